//! One record → the Responses API input items it stands for.

use serde_json::{Value, json};
use spool_protocol::responses::{
    ContentItem, KnownResponseItem, ReasoningContentPart, ReasoningSummaryPart, ResponseItem,
};
use spool_protocol::{ItemKind, ItemStatus, ThreadItem, UserInput, WebSearchAction};

use super::{ReasoningIdPolicy, provider, tools};
use crate::record::ItemRecord;

/// The prefix of the user message that stands in for compacted history.
pub const COMPACTION_PREFIX: &str = "Summary of the conversation so far:\n";

/// The prefix of the user message that carries a finished review to later
/// turns.
pub const REVIEW_PREFIX: &str = "A code review of this work was run. The reviewer's findings:\n\n";

/// The key of a compaction's `providerData` that holds the items the
/// provider's compact endpoint gave for the history it replaces: sent in
/// place of the summary text.
pub const COMPACTED_OUTPUT_KEY: &str = "compactedOutput";

/// The key of `providerData` that holds a raw Responses input item, as
/// the Session API's caller gave it.
pub const INPUT_ITEM_KEY: &str = "inputItem";

/// The raw input item a record carries, if any (see the module docs of
/// `llm`).
pub fn raw_input_item(record: &ItemRecord) -> Option<&Value> {
    record
        .envelope
        .provider_data
        .as_deref()?
        .get(INPUT_ITEM_KEY)
}

/// Whether a record is part of the model's view at all: the model is in
/// its audience, and its kind can become model input or it carries a raw
/// input item (which is model input by definition: its caller gave it as
/// one, whatever kind it was filed under).
pub fn in_view(record: &ItemRecord) -> bool {
    record.envelope.audience.llm
        && (yields_model_input(record.item.kind()) || raw_input_item(record).is_some())
}

/// Whether a record is a finished compaction, which replaces everything
/// before it. An unfinished or empty one replaces nothing: dropping history
/// with no summary to stand in for it would lose it.
pub fn is_cut_point(record: &ItemRecord) -> bool {
    let ThreadItem::ContextCompaction {
        summary: Some(summary),
        ..
    } = &record.item
    else {
        return false;
    };
    record.envelope.status == ItemStatus::Completed && !summary.is_empty()
}

/// Whether items of this kind can become model input.
pub(crate) fn yields_model_input(kind: ItemKind) -> bool {
    match kind {
        ItemKind::UserMessage
        | ItemKind::AgentMessage
        | ItemKind::Reasoning
        | ItemKind::Plan
        | ItemKind::CommandExecution
        | ItemKind::FileChange
        | ItemKind::McpToolCall
        | ItemKind::DynamicToolCall
        | ItemKind::WebSearch
        | ItemKind::ContextCompaction
        | ItemKind::FunctionCall
        | ItemKind::Handoff
        | ItemKind::ImageView
        | ItemKind::ExitedReviewMode
        | ItemKind::Context => true,
        // The reasons are in `convert`.
        ItemKind::Component
        | ItemKind::Container
        | ItemKind::Status
        | ItemKind::StateChange
        | ItemKind::ResourceChange
        | ItemKind::StepError
        | ItemKind::Error
        | ItemKind::EnteredReviewMode => false,
    }
}

/// Appends the input items `record` stands for to `out`. Audience is the
/// caller's business; this only converts.
pub(crate) fn convert(record: &ItemRecord, policy: ReasoningIdPolicy, out: &mut Vec<ResponseItem>) {
    if let Some(raw) = raw_input_item(record) {
        out.push(raw_item(raw));
        return;
    }
    let provider_data = record.envelope.provider_data.as_deref();
    match &record.item {
        ThreadItem::UserMessage { content, .. } => user_message(content, out),
        ThreadItem::AgentMessage { text, .. } => {
            // A message cut off before its first token says nothing.
            if !text.is_empty() {
                out.push(message(
                    "assistant",
                    vec![ContentItem::OutputText {
                        text: text.clone(),
                        annotations: Vec::new(),
                    }],
                ));
            }
        }
        ThreadItem::Reasoning {
            summary, content, ..
        } => reasoning(summary, content, provider_data, policy, out),
        ThreadItem::FunctionCall { .. }
        | ThreadItem::CommandExecution { .. }
        | ThreadItem::FileChange { .. }
        | ThreadItem::McpToolCall { .. }
        | ThreadItem::DynamicToolCall { .. }
        | ThreadItem::Handoff { .. }
        | ThreadItem::Plan { .. } => tools::convert_tool(record, out),
        ThreadItem::WebSearch { query, action, .. } => {
            out.push(web_search(query, action.as_ref(), provider_data));
        }
        ThreadItem::Context { text, .. } => {
            out.push(message(
                "developer",
                vec![ContentItem::InputText { text: text.clone() }],
            ));
        }
        ThreadItem::ContextCompaction { summary, .. } => {
            let compacted = provider_data
                .and_then(|data| data.get(COMPACTED_OUTPUT_KEY))
                .and_then(Value::as_array);
            if let (true, Some(items)) = (is_cut_point(record), compacted) {
                out.extend(items.iter().cloned().map(ResponseItem::Other));
            } else if let (true, Some(summary)) = (is_cut_point(record), summary) {
                out.push(message(
                    "user",
                    vec![ContentItem::InputText {
                        text: format!("{COMPACTION_PREFIX}{summary}"),
                    }],
                ));
            }
        }
        ThreadItem::ImageView { path, .. } => tools::image_view(record, path, out),
        // Presentation for the UI: the model gets the same facts from the
        // messages and tool outputs around them.
        ThreadItem::Component { .. } | ThreadItem::Container { .. } => {}
        // Transient progress; never persisted, never the model's business.
        ThreadItem::Status { .. } => {}
        // Application bookkeeping: what changed reaches the model through
        // the tool outputs that changed it.
        ThreadItem::StateChange { .. } | ThreadItem::ResourceChange { .. } => {}
        // Runtime failures, reported to the client. A failure the model must
        // know about is already in the failed tool's output.
        ThreadItem::StepError { .. } | ThreadItem::Error { .. } => {}
        // The UI's marker of a review's start: the reviewer's prompt is its
        // own item.
        ThreadItem::EnteredReviewMode { .. } => {}
        // A finished review reaches later turns as its findings (a review
        // that did not finish has none).
        ThreadItem::ExitedReviewMode { review, .. } => {
            if !review.is_empty() {
                out.push(message(
                    "user",
                    vec![ContentItem::InputText {
                        text: format!("{REVIEW_PREFIX}{review}"),
                    }],
                ));
            }
        }
    }
}

/// A raw input item exactly as its caller gave it: the reasoning-id
/// policy applies to reasoning spool generated, never to the caller's own
/// input (its ids are the caller's choice).
fn raw_item(raw: &Value) -> ResponseItem {
    ResponseItem::Other(raw.clone())
}

/// A message without `id` or `status`: both are output metadata the
/// provider does not need back (see the module docs of `llm`).
fn message(role: &str, content: Vec<ContentItem>) -> ResponseItem {
    ResponseItem::Known(KnownResponseItem::Message {
        id: None,
        role: role.to_owned(),
        content,
        status: None,
    })
}

fn user_message(content: &[UserInput], out: &mut Vec<ResponseItem>) {
    let parts: Vec<ContentItem> = content
        .iter()
        .map(|input| match input {
            UserInput::Text { text, .. } => ContentItem::InputText { text: text.clone() },
            UserInput::Image {
                url,
                file_id,
                detail,
            } => ContentItem::InputImage {
                image_url: url.clone(),
                file_id: file_id.clone(),
                detail: detail.map(|d| image_detail(d).to_owned()),
            },
            UserInput::Audio { url } => ContentItem::InputAudio {
                audio_url: Some(url.clone()),
            },
            UserInput::LocalAudio { path } => ContentItem::InputText {
                text: format!("[local audio: {path}]"),
            },
            // Reading files is I/O, which this crate does not do: local
            // images, skills and mentions are referenced by path, for the
            // runtime (or the model's tools) to resolve.
            UserInput::LocalImage { path, .. } => ContentItem::InputText {
                text: format!("[local image: {path}]"),
            },
            UserInput::Skill { name, path } => ContentItem::InputText {
                text: format!("[skill: {name} ({path})]"),
            },
            UserInput::Mention { name, path } => ContentItem::InputText {
                text: format!("[mention: {name} ({path})]"),
            },
        })
        .collect();
    if !parts.is_empty() {
        out.push(message("user", parts));
    }
}

fn image_detail(detail: spool_protocol::ImageDetail) -> &'static str {
    match detail {
        spool_protocol::ImageDetail::Auto => "auto",
        spool_protocol::ImageDetail::Low => "low",
        spool_protocol::ImageDetail::High => "high",
        spool_protocol::ImageDetail::Original => "original",
    }
}

fn reasoning(
    summary: &[String],
    content: &[String],
    provider_data: Option<&Value>,
    policy: ReasoningIdPolicy,
    out: &mut Vec<ResponseItem>,
) {
    let (provider_id, encrypted_content) = provider::reasoning(provider_data);
    // Only the provider's id (`rs_...`) means anything to the provider;
    // spool's own item id is never sent in its place.
    let id = match policy {
        ReasoningIdPolicy::Preserve => provider_id,
        ReasoningIdPolicy::Omit => None,
    };
    let summary: Vec<ReasoningSummaryPart> = summary
        .iter()
        .filter(|text| !text.is_empty())
        .map(|text| ReasoningSummaryPart::SummaryText { text: text.clone() })
        .collect();
    let content: Vec<ReasoningContentPart> = content
        .iter()
        .filter(|text| !text.is_empty())
        .map(|text| ReasoningContentPart::ReasoningText { text: text.clone() })
        .collect();
    let usable = !summary.is_empty() || !content.is_empty() || encrypted_content.is_some();
    let item = KnownResponseItem::Reasoning {
        id: id.clone().unwrap_or_default(),
        summary,
        content: (!content.is_empty()).then_some(content),
        encrypted_content,
    };
    // An id alone is usable: it points at reasoning the provider stored.
    // Without one, an item with nothing in it is noise. (An empty id is
    // not written out: the API refuses `"id": ""`.)
    if id.is_some() || usable {
        out.push(ResponseItem::Known(item));
    }
}

fn web_search(
    query: &str,
    action: Option<&WebSearchAction>,
    provider_data: Option<&Value>,
) -> ResponseItem {
    let (id, provider_action) = provider::web_search(provider_data);
    let action = provider_action.unwrap_or_else(|| api_action(query, action));
    ResponseItem::Known(KnownResponseItem::WebSearchCall {
        // The provider's id is kept: it is how the API ties the call to
        // the results it already gave the model.
        id,
        status: Some("completed".into()),
        action: Some(action),
    })
}

/// An item's search action in the API's shape (snake_case `type`, where
/// the item's own enum is camelCase).
fn api_action(query: &str, action: Option<&WebSearchAction>) -> Value {
    match action {
        Some(WebSearchAction::Search {
            query: action_query,
            queries,
        }) => {
            let query = action_query.as_deref().unwrap_or(query);
            match queries {
                Some(queries) => json!({"type": "search", "query": query, "queries": queries}),
                None => json!({"type": "search", "query": query}),
            }
        }
        Some(WebSearchAction::OpenPage { url }) => json!({"type": "open_page", "url": url}),
        Some(WebSearchAction::FindInPage { url, pattern }) => {
            json!({"type": "find_in_page", "url": url, "pattern": pattern})
        }
        Some(WebSearchAction::Other) | None => json!({"type": "search", "query": query}),
    }
}
