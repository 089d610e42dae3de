//! A Responses API input item (raw JSON, as a Session API caller gives it)
//! → the spool item it is filed as.
//!
//! The raw item itself is kept in `envelope.providerData.inputItem` and is
//! what the session and the model view give back, exactly; the typed item
//! is what clients, views and tools see of it, so it says what the raw
//! item says, or says plainly that it is a raw item:
//!
//! | input item | item |
//! |---|---|
//! | message, role `user` | `userMessage` (text parts; images by URL or file id; other parts as bracketed text references) |
//! | message, role `assistant` | `agentMessage` (its output text and refusals, concatenated; `phase` if given) |
//! | message, role `system` or `developer` | `context` (its text) |
//! | `reasoning` | `reasoning` (summary and content texts) |
//! | `function_call` | `functionCall` (name, call id and arguments as given; no output: the output is an item of its own) |
//! | `web_search_call` | `webSearch` (the action's query and action) |
//! | anything else | `component` named after its `type` (or `role`), props = the raw item |
//!
//! `component` for the rest (tool outputs, hosted tool calls, item
//! references, …): spool has no item kind with those semantics, and
//! pretending one (a tool output filed as a tool call, say) would mislead
//! every view that trusts the kind. A component is honestly "a piece of
//! structured data with a name", which a UI can render; its audience
//! includes the model, and the model view sends its raw item (a record
//! with a raw input item is model input whatever its kind).
//!
//! The mapping is part of the stored format, which is why it lives with the
//! codec: an item row holding an item that is its raw item as filed here
//! leaves its `item` column empty, and reads file the raw item again
//! (`encode.rs`, `DERIVED_ITEM`). What
//! [`thread_item`] makes of a raw item must therefore not change for rows
//! already written; a change needs a marker of its own.

use serde_json::Value;
use spool_protocol::{
    Audience, FunctionCallStatus, ImageDetail, MessagePhase, ThreadItem, UserInput, WebSearchAction,
};

/// The item a raw input item is filed as, with id `id`.
pub(crate) fn thread_item(id: String, raw: &Value) -> ThreadItem {
    let kind = str_field(raw, "type");
    let role = str_field(raw, "role");
    match (kind, role) {
        (None | Some("message"), Some("user")) => ThreadItem::UserMessage {
            id,
            client_id: None,
            content: user_content(field(raw, "content")),
        },
        (None | Some("message"), Some("assistant")) => ThreadItem::AgentMessage {
            id,
            text: text_of(field(raw, "content")),
            phase: str_field(raw, "phase").and_then(phase),
            memory_citation: None,
            delivery: None,
            questions: None,
        },
        (None | Some("message"), Some("system" | "developer")) => ThreadItem::Context {
            id,
            text: text_of(field(raw, "content")),
        },
        (Some("reasoning"), _) => ThreadItem::Reasoning {
            id,
            summary: texts(field(raw, "summary")),
            content: texts(field(raw, "content")),
        },
        (Some("function_call"), _) => ThreadItem::FunctionCall {
            id,
            name: str_field(raw, "name").unwrap_or_default().to_owned(),
            call_id: str_field(raw, "call_id").unwrap_or_default().to_owned(),
            arguments: match field(raw, "arguments") {
                Some(Value::String(arguments)) => arguments.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
            status: match str_field(raw, "status") {
                Some("in_progress") => FunctionCallStatus::InProgress,
                Some("incomplete") => FunctionCallStatus::Failed,
                Some(_) | None => FunctionCallStatus::Completed,
            },
            output: None,
            duration_ms: None,
        },
        (Some("web_search_call"), _) => {
            let action = field(raw, "action");
            ThreadItem::WebSearch {
                id,
                query: action
                    .and_then(|action| str_field(action, "query"))
                    .unwrap_or_default()
                    .to_owned(),
                action: action.map(web_search_action),
                results: None,
            }
        }
        (kind, role) => ThreadItem::Component {
            id,
            name: kind.or(role).unwrap_or("unknown").to_owned(),
            props: raw.clone(),
        },
    }
}

/// Whether `item` is what [`thread_item`] files `raw` as, its id aside:
/// the answer of filing `raw` again and comparing, without building an
/// item for the shapes the Session API mostly stores (a user message with
/// text content, an assistant, system or developer message). Any other
/// shape is filed and compared. The writer asks this of every item with a
/// raw input item (`encode.rs`, `DERIVED_ITEM`): building the item again
/// was ~1.2k instructions of each `add_items` item.
pub(crate) fn is_filing_of(raw: &Value, item: &ThreadItem) -> bool {
    let message = matches!(str_field(raw, "type"), None | Some("message"));
    match (message, str_field(raw, "role"), item) {
        (
            true,
            Some("user"),
            ThreadItem::UserMessage {
                id: _,
                client_id: None,
                content,
            },
        ) => match field(raw, "content").and_then(Value::as_str) {
            // Text content is one text part; a list is left to filing.
            Some(whole) => matches!(
                content.as_slice(),
                [UserInput::Text { text, text_elements }]
                    if text_elements.is_empty() && text == whole
            ),
            None => files_again(raw, item),
        },
        (
            true,
            Some("assistant"),
            ThreadItem::AgentMessage {
                id: _,
                text,
                phase: item_phase,
                memory_citation: None,
                delivery: None,
                questions: None,
            },
        ) => {
            *item_phase == str_field(raw, "phase").and_then(phase)
                && is_text_of(field(raw, "content"), text)
        }
        (true, Some("system" | "developer"), ThreadItem::Context { id: _, text }) => {
            is_text_of(field(raw, "content"), text)
        }
        _ => files_again(raw, item),
    }
}

/// Whether filing `raw` again under `item`'s id gives `item`.
fn files_again(raw: &Value, item: &ThreadItem) -> bool {
    thread_item(item.id().to_owned(), raw) == *item
}

/// Whether [`text_of`] gives `text` for `content`, read in place.
fn is_text_of(content: Option<&Value>, text: &str) -> bool {
    match content {
        Some(Value::String(whole)) => whole == text,
        Some(Value::Array(parts)) => {
            let mut rest = text;
            for part in parts {
                if let Some(piece) = str_field(part, "text").or_else(|| str_field(part, "refusal"))
                {
                    match rest.strip_prefix(piece) {
                        Some(after) => rest = after,
                        None => return false,
                    }
                }
            }
            rest.is_empty()
        }
        Some(_) | None => text.is_empty(),
    }
}

/// Who sees an item filed from a raw input item: the model always (the
/// caller stored it for the model), the client as the kind says.
pub(crate) fn audience(item: &ThreadItem) -> Audience {
    Audience {
        client: item.kind().default_audience().client,
        llm: true,
    }
}

/// Provenance agent: "user" for what the user said, otherwise unknown.
pub(crate) fn agent(item: &ThreadItem) -> &'static str {
    match item {
        ThreadItem::UserMessage { .. } => "user",
        ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::Plan { .. }
        | ThreadItem::CommandExecution { .. }
        | ThreadItem::FileChange { .. }
        | ThreadItem::McpToolCall { .. }
        | ThreadItem::DynamicToolCall { .. }
        | ThreadItem::WebSearch { .. }
        | ThreadItem::ImageView { .. }
        | ThreadItem::EnteredReviewMode { .. }
        | ThreadItem::ExitedReviewMode { .. }
        | ThreadItem::ContextCompaction { .. }
        | ThreadItem::FunctionCall { .. }
        | ThreadItem::Handoff { .. }
        | ThreadItem::Component { .. }
        | ThreadItem::Container { .. }
        | ThreadItem::Status { .. }
        | ThreadItem::StateChange { .. }
        | ThreadItem::ResourceChange { .. }
        | ThreadItem::StepError { .. }
        | ThreadItem::Error { .. }
        | ThreadItem::Context { .. } => "",
    }
}

fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    field(value, key)?.as_str()
}

/// `value.get(key)`, cheaper on small objects. serde_json keeps an
/// object's keys in order in a map hashed with SipHash: a lookup hashes the
/// key (~250 instructions for a short one), where scanning the handful of
/// keys a Responses input item or one of its parts has compares a few
/// bytes each. Keys of an object are unique, so the first match is the one
/// `get` finds.
pub(crate) fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    /// Above this many keys, hashing wins.
    const SCANNED: usize = 8;
    let Value::Object(map) = value else {
        return None;
    };
    if map.len() > SCANNED {
        return map.get(key);
    }
    map.iter()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// A message's content as user input: a string is one text part; a list
/// keeps its text and image parts, and names the others in brackets.
fn user_content(content: Option<&Value>) -> Vec<UserInput> {
    match content {
        Some(Value::String(text)) => vec![UserInput::text(text.clone())],
        Some(Value::Array(parts)) => parts.iter().filter_map(user_part).collect(),
        Some(_) | None => Vec::new(),
    }
}

fn user_part(part: &Value) -> Option<UserInput> {
    match str_field(part, "type") {
        Some("input_text" | "output_text" | "text") => {
            str_field(part, "text").map(|text| UserInput::text(text.to_owned()))
        }
        Some("input_image") => Some(UserInput::Image {
            url: str_field(part, "image_url").map(str::to_owned),
            file_id: str_field(part, "file_id").map(str::to_owned),
            detail: str_field(part, "detail").and_then(image_detail),
        }),
        Some("input_file") => {
            let name = str_field(part, "filename")
                .or_else(|| str_field(part, "file_id"))
                .or_else(|| str_field(part, "file_url"))
                .unwrap_or("attached file");
            Some(UserInput::text(format!("[file: {name}]")))
        }
        Some(other) => Some(UserInput::text(format!("[{other}]"))),
        None => str_field(part, "text").map(|text| UserInput::text(text.to_owned())),
    }
}

fn image_detail(detail: &str) -> Option<ImageDetail> {
    match detail {
        "auto" => Some(ImageDetail::Auto),
        "low" => Some(ImageDetail::Low),
        "high" => Some(ImageDetail::High),
        "original" => Some(ImageDetail::Original),
        _ => None,
    }
}

fn phase(phase: &str) -> Option<MessagePhase> {
    match phase {
        "commentary" => Some(MessagePhase::Commentary),
        "final_answer" => Some(MessagePhase::FinalAnswer),
        _ => None,
    }
}

/// The text a message's content holds: a string, or its parts' `text`
/// (and `refusal`) values, concatenated.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| str_field(part, "text").or_else(|| str_field(part, "refusal")))
            .collect(),
        Some(_) | None => String::new(),
    }
}

/// The `text` of each part of a list (reasoning summaries and contents).
fn texts(parts: Option<&Value>) -> Vec<String> {
    parts
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| str_field(part, "text").map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The API's search action (snake_case `type`) as the item's action.
fn web_search_action(action: &Value) -> WebSearchAction {
    let text = |key| str_field(action, key).map(str::to_owned);
    match str_field(action, "type") {
        Some("search") => WebSearchAction::Search {
            query: text("query"),
            queries: field(action, "queries")
                .and_then(Value::as_array)
                .map(|queries| {
                    queries
                        .iter()
                        .filter_map(|query| query.as_str().map(str::to_owned))
                        .collect()
                }),
        },
        Some("open_page") => WebSearchAction::OpenPage { url: text("url") },
        Some("find_in_page") => WebSearchAction::FindInPage {
            url: text("url"),
            pattern: text("pattern"),
        },
        Some(_) | None => WebSearchAction::Other,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use spool_protocol::{ByteRange, TextElement, ThreadItem, UserInput};

    use super::{is_filing_of, thread_item};

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), "[ab]{1,3}"]
    }

    fn part() -> impl Strategy<Value = Value> {
        prop_oneof![
            text().prop_map(|t| json!({"type": "output_text", "text": t})),
            text().prop_map(|t| json!({"type": "refusal", "refusal": t})),
            text().prop_map(|t| json!({"type": "input_text", "text": t})),
            Just(json!({"type": "input_image", "image_url": "u"})),
            Just(json!(7)),
        ]
    }

    fn content() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            text().prop_map(|t| Some(Value::String(t))),
            prop::collection::vec(part(), 0..4).prop_map(|p| Some(Value::Array(p))),
            Just(Some(json!(3))),
        ]
    }

    /// Raw items of the shapes the check reads in place, and a few it
    /// leaves to filing.
    fn raw() -> impl Strategy<Value = Value> {
        let kind = prop_oneof![Just(None), Just(Some("message")), Just(Some("reasoning"))];
        let role = prop_oneof![
            Just(None),
            Just(Some("user")),
            Just(Some("assistant")),
            Just(Some("system")),
            Just(Some("developer")),
        ];
        let phase = prop_oneof![Just(None), Just(Some("commentary")), Just(Some("other"))];
        (kind, role, phase, content()).prop_map(|(kind, role, phase, content)| {
            let mut raw = serde_json::Map::new();
            if let Some(kind) = kind {
                raw.insert("type".into(), kind.into());
            }
            if let Some(role) = role {
                raw.insert("role".into(), role.into());
            }
            if let Some(phase) = phase {
                raw.insert("phase".into(), phase.into());
            }
            if let Some(content) = content {
                raw.insert("content".into(), content);
            }
            Value::Object(raw)
        })
    }

    /// The item a raw item is filed as, or one changed in a way the check
    /// must see.
    fn candidate(raw: &Value, other: &Value, change: u8) -> ThreadItem {
        let mut item = thread_item("i".into(), raw);
        match (change, &mut item) {
            (1, _) => item = thread_item("i".into(), other),
            (2, ThreadItem::UserMessage { client_id, .. }) => *client_id = Some("c".into()),
            (3, ThreadItem::UserMessage { content, .. }) => content.push(UserInput::text("x")),
            (4, ThreadItem::AgentMessage { text, .. } | ThreadItem::Context { text, .. }) => {
                text.push('a')
            }
            (5, ThreadItem::AgentMessage { phase, .. }) => *phase = None,
            (6, ThreadItem::UserMessage { content, .. }) => {
                if let Some(UserInput::Text { text_elements, .. }) = content.first_mut() {
                    text_elements.push(TextElement {
                        byte_range: ByteRange { start: 0, end: 0 },
                        placeholder: None,
                    });
                }
            }
            _ => {}
        }
        item
    }

    proptest! {
        #[test]
        fn answers_as_filing_again_and_comparing(
            raw in raw(),
            other in raw(),
            change in 0u8..7,
        ) {
            let item = candidate(&raw, &other, change);
            prop_assert_eq!(
                is_filing_of(&raw, &item),
                thread_item(item.id().to_owned(), &raw) == item
            );
        }
    }
}
