//! OpenAI Responses API items, as providers send and receive them.
//!
//! Parsing is lenient: an item of a type spool does not model is kept as
//! raw JSON (`ResponseItem::Other`) instead of failing the stream, and
//! unknown fields of known items are ignored.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentItem {
    InputText {
        text: String,
    },
    /// An image by URL (or data URL), or by an uploaded file's id.
    InputImage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image_url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    InputAudio {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audio_url: Option<String>,
    },
    OutputText {
        text: String,
        #[serde(default)]
        annotations: Vec<Value>,
    },
    Refusal {
        refusal: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReasoningSummaryPart {
    SummaryText { text: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReasoningContentPart {
    ReasoningText { text: String },
}

/// The Responses API items spool reads and writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KnownResponseItem {
    Message {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        role: String,
        content: Vec<ContentItem>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
    Reasoning {
        /// Empty when the reasoning has no id (then it is not written out).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        id: String,
        #[serde(default)]
        summary: Vec<ReasoningSummaryPart>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ReasoningContentPart>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
    },
    FunctionCall {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        call_id: String,
        name: String,
        arguments: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
    FunctionCallOutput {
        call_id: String,
        output: String,
    },
    WebSearchCall {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<Value>,
    },
}

/// A Responses API item: one spool models, or any other kept as it came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ResponseItem {
    Known(KnownResponseItem),
    Other(Value),
}

impl ResponseItem {
    /// A user message with one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        ResponseItem::Known(KnownResponseItem::Message {
            id: None,
            role: "user".into(),
            content: vec![ContentItem::InputText { text: text.into() }],
            status: None,
        })
    }

    /// An assistant message with one output text part.
    pub fn assistant_text(id: Option<String>, text: impl Into<String>) -> Self {
        ResponseItem::Known(KnownResponseItem::Message {
            id,
            role: "assistant".into(),
            content: vec![ContentItem::OutputText {
                text: text.into(),
                annotations: Vec::new(),
            }],
            status: Some("completed".into()),
        })
    }

    /// The `call_id` of a function call or of its output.
    pub fn call_id(&self) -> Option<&str> {
        match self {
            ResponseItem::Known(KnownResponseItem::FunctionCall { call_id, .. })
            | ResponseItem::Known(KnownResponseItem::FunctionCallOutput { call_id, .. }) => {
                Some(call_id)
            }
            ResponseItem::Known(
                KnownResponseItem::Message { .. }
                | KnownResponseItem::Reasoning { .. }
                | KnownResponseItem::WebSearchCall { .. },
            )
            | ResponseItem::Other(_) => None,
        }
    }
}

/// Schemas of the Responses API types, for `schema/`.
pub fn schemas() -> Vec<(&'static str, Value)> {
    vec![("ResponseItem", crate::schema::schema_of::<ResponseItem>())]
}
