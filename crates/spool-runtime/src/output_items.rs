//! A provider's finished output item as the thread item it completes,
//! and the provider's ids kept beside it (see `output_mapper`).

use serde_json::{Value, json};
use spool_protocol::responses::{ContentItem, KnownResponseItem, ResponseItem};
use spool_protocol::*;

/// The completed spool item: the provider's final item is authoritative.
pub(crate) fn completed_item(started: ThreadItem, done: &ResponseItem) -> ThreadItem {
    match (started, done) {
        (
            ThreadItem::AgentMessage { id, phase, .. },
            ResponseItem::Known(KnownResponseItem::Message { content, .. }),
        ) => {
            let mut item =
                ThreadItem::agent_message(id, content.iter().map(content_text).collect::<String>());
            if let ThreadItem::AgentMessage { phase: p, .. } = &mut item {
                *p = phase;
            }
            item
        }
        (
            ThreadItem::Reasoning { id, .. },
            ResponseItem::Known(KnownResponseItem::Reasoning {
                summary, content, ..
            }),
        ) => ThreadItem::Reasoning {
            id,
            summary: summary
                .iter()
                .map(|p| match p {
                    spool_protocol::responses::ReasoningSummaryPart::SummaryText { text } => {
                        text.clone()
                    }
                })
                .collect(),
            content: content
                .iter()
                .flatten()
                .map(|p| match p {
                    spool_protocol::responses::ReasoningContentPart::ReasoningText { text } => {
                        text.clone()
                    }
                })
                .collect(),
        },
        (
            ThreadItem::FunctionCall { id, .. },
            ResponseItem::Known(KnownResponseItem::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            }),
        ) => ThreadItem::FunctionCall {
            id,
            name: name.clone(),
            call_id: call_id.clone(),
            arguments: arguments.clone(),
            // Filled by the tool runner; a call nobody runs stays unanswered.
            status: FunctionCallStatus::InProgress,
            output: None,
            duration_ms: None,
        },
        (
            ThreadItem::WebSearch { id, .. },
            ResponseItem::Known(KnownResponseItem::WebSearchCall { action, .. }),
        ) => ThreadItem::WebSearch {
            id,
            query: search_query(action.as_ref()),
            action: action
                .as_ref()
                .and_then(|a| serde_json::from_value(web_search_action_json(a)).ok()),
            results: None,
        },
        // The provider changed the item's type between added and done: keep
        // what was started (the raw final item is in providerData).
        (started, _) => started,
    }
}

fn content_text(part: &ContentItem) -> &str {
    match part {
        ContentItem::OutputText { text, .. } | ContentItem::InputText { text } => text,
        ContentItem::Refusal { refusal } => refusal,
        ContentItem::InputImage { .. } | ContentItem::InputAudio { .. } => "",
    }
}

/// Responses `action` → Codex `WebSearchAction` JSON (`type` values differ in case).
fn web_search_action_json(action: &Value) -> Value {
    let mut a = action.clone();
    if let Some(t) = a.get("type").and_then(Value::as_str) {
        let camel = match t {
            "search" => "search",
            "open_page" => "openPage",
            "find_in_page" | "find" => "findInPage",
            _ => "other",
        };
        a["type"] = json!(camel);
    }
    a
}

pub(crate) fn search_query(action: Option<&Value>) -> String {
    action
        .and_then(|a| a.get("query"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The provider's ids of an item, kept in `providerData` from the start.
pub(crate) fn provider_ids(item: &ResponseItem) -> Option<Value> {
    match item {
        ResponseItem::Known(KnownResponseItem::Message { id, .. })
        | ResponseItem::Known(KnownResponseItem::WebSearchCall { id, .. }) => {
            id.as_ref().map(|id| json!({ "id": id }))
        }
        ResponseItem::Known(KnownResponseItem::Reasoning { id, .. }) => Some(json!({ "id": id })),
        ResponseItem::Known(KnownResponseItem::FunctionCall {
            id, call_id, name, ..
        }) => Some(json!({ "id": id, "call_id": call_id, "name": name })),
        ResponseItem::Known(KnownResponseItem::FunctionCallOutput { .. })
        | ResponseItem::Other(_) => None,
    }
}

pub(crate) fn provider_key(item: &ResponseItem, output_index: usize) -> String {
    let id = match item {
        ResponseItem::Known(KnownResponseItem::Message { id, .. })
        | ResponseItem::Known(KnownResponseItem::WebSearchCall { id, .. })
        | ResponseItem::Known(KnownResponseItem::FunctionCall { id, .. }) => id.clone(),
        ResponseItem::Known(KnownResponseItem::Reasoning { id, .. }) => {
            Some(id.clone()).filter(|id| !id.is_empty())
        }
        ResponseItem::Known(KnownResponseItem::FunctionCallOutput { .. }) => None,
        ResponseItem::Other(v) => v.get("id").and_then(Value::as_str).map(str::to_owned),
    };
    id.unwrap_or_else(|| format!("#{output_index}"))
}
