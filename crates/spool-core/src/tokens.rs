//! Token counting with o200k_base, the encoding of the models spool targets
//! first (GPT-4o, GPT-4.1, o-series, GPT-5).
//!
//! # The counting rule for model input items
//!
//! [`count_input_item`] estimates what one Responses API input item costs.
//! It is an estimate: the provider's exact framing is not public. It is
//! deliberately cheap and slightly generous, because budgets built on it
//! must not overflow the context window.
//!
//! - Every item costs [`PER_ITEM_OVERHEAD`] tokens for its framing (the
//!   role or type markers around it), like the per-message overhead of
//!   chat formats.
//! - Text the model reads is counted with o200k_base: message text parts
//!   and refusals, reasoning summaries and reasoning text, a function
//!   call's name and arguments, a tool output.
//! - An image costs [`IMAGE_TOKENS`]. A URL tells nothing about the size,
//!   so this is the cost of a 1024×1024 image at high detail.
//! - Opaque blobs (`encrypted_content`) are not tokenized (BPE over base64
//!   is slow and meaningless); they cost one token per
//!   [`OPAQUE_BYTES_PER_TOKEN`] bytes.
//! - Ids (`id`, `call_id`) and `type`/`status` markers are bookkeeping the
//!   model does not read as text; they are covered by the overhead.
//! - An item spool does not model (`ResponseItem::Other`) counts its
//!   string values, apart from the ids and markers above; keys are
//!   structure, covered by the overhead. So an item sent as raw JSON (an
//!   id-less reasoning item, a freeform tool call) costs what its typed
//!   form would, and a cached count does not depend on which form it took.
//!
//! Counting walks borrowed text; it never re-serializes an item.

use serde_json::Value;
use spool_protocol::responses::{
    ContentItem, KnownResponseItem, ReasoningContentPart, ReasoningSummaryPart, ResponseItem,
};
use tiktoken_rs::CoreBPE;

/// Framing tokens charged once per input item.
pub const PER_ITEM_OVERHEAD: u32 = 4;

/// Estimated cost of one image whose size is unknown.
pub const IMAGE_TOKENS: u32 = 765;

/// Bytes of opaque (encrypted, base64) content per estimated token.
pub const OPAQUE_BYTES_PER_TOKEN: usize = 4;

/// The o200k_base encoder. tiktoken-rs builds it once per process behind a
/// `LazyLock` (building it parses ~200k ranks, tens of milliseconds), so the
/// first call pays for that and every later call is a pointer read.
fn bpe() -> &'static CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

/// Builds the encoder now, so that the first count does not wait for it: a
/// server calls this on a thread of its own as it starts, off the path of
/// its first turn.
pub fn warm() {
    bpe();
}

/// o200k_base tokens in `text`. Special-token markers such as
/// `<|endoftext|>` in user text are counted as ordinary text, never as
/// control tokens: that is how the provider treats text in a request.
pub fn count_text(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    bpe().count_ordinary(text)
}

/// Estimated tokens of one Responses API input item (see the module docs
/// for the rule).
pub fn count_input_item(item: &ResponseItem) -> u32 {
    let body = match item {
        ResponseItem::Known(known) => count_known(known),
        ResponseItem::Other(value) => count_value(value),
    };
    PER_ITEM_OVERHEAD.saturating_add(saturate(body))
}

fn count_known(item: &KnownResponseItem) -> usize {
    match item {
        KnownResponseItem::Message { content, .. } => content.iter().map(count_content).sum(),
        KnownResponseItem::Reasoning {
            summary,
            content,
            encrypted_content,
            ..
        } => {
            let summary: usize = summary
                .iter()
                .map(|part| match part {
                    ReasoningSummaryPart::SummaryText { text } => count_text(text),
                })
                .sum();
            let content: usize = content
                .iter()
                .flatten()
                .map(|part| match part {
                    ReasoningContentPart::ReasoningText { text } => count_text(text),
                })
                .sum();
            summary + content + encrypted_content.as_deref().map_or(0, count_opaque)
        }
        KnownResponseItem::FunctionCall {
            name, arguments, ..
        } => count_text(name) + count_text(arguments),
        KnownResponseItem::FunctionCallOutput { output, .. } => count_text(output),
        KnownResponseItem::WebSearchCall { action, .. } => action.as_ref().map_or(0, count_value),
    }
}

fn count_content(part: &ContentItem) -> usize {
    match part {
        ContentItem::InputText { text } | ContentItem::OutputText { text, .. } => count_text(text),
        ContentItem::InputImage { .. } => IMAGE_TOKENS as usize,
        // Audio is billed by duration, which is not known here; count the
        // same fixed cost as an image so a budget still sees it.
        ContentItem::InputAudio { .. } => IMAGE_TOKENS as usize,
        ContentItem::Refusal { refusal } => count_text(refusal),
    }
}

/// Tokens of an arbitrary JSON value: its strings, ids and markers
/// excluded, opaque blobs estimated by size. Numbers, booleans and nulls
/// cost one token each.
fn count_value(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 1,
        Value::String(text) => count_text(text),
        Value::Array(values) => values.iter().map(count_value).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match (key.as_str(), value) {
                ("id" | "call_id" | "type" | "status", _) => 0,
                ("encrypted_content", Value::String(blob)) => count_opaque(blob),
                (_, value) => count_value(value),
            })
            .sum(),
    }
}

fn count_opaque(blob: &str) -> usize {
    blob.len().div_ceil(OPAQUE_BYTES_PER_TOKEN)
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_known_strings_with_o200k_base() {
        assert_eq!(count_text(""), 0);
        assert_eq!(count_text("hello world"), 2);
        // Special-token markers in text are ordinary text, and do not panic.
        assert!(count_text("<|endoftext|>") > 1);
    }

    #[test]
    fn an_item_costs_its_text_plus_the_overhead() {
        let item = ResponseItem::user_text("hello world");
        assert_eq!(count_input_item(&item), PER_ITEM_OVERHEAD + 2);
    }

    #[test]
    fn ids_are_not_counted_and_images_have_a_fixed_cost() {
        let call = ResponseItem::Known(KnownResponseItem::FunctionCall {
            id: Some("fc_very_long_identifier_that_is_not_text".into()),
            call_id: "call_another_long_identifier".into(),
            name: "shell".into(),
            arguments: String::new(),
            status: None,
        });
        assert_eq!(count_input_item(&call), PER_ITEM_OVERHEAD + 1);
        let image = ResponseItem::Known(KnownResponseItem::Message {
            id: None,
            role: "user".into(),
            content: vec![ContentItem::InputImage {
                detail: Default::default(),
                file_id: Default::default(),
                image_url: Some("https://example.com/cat.png".into()),
            }],
            status: None,
        });
        assert_eq!(count_input_item(&image), PER_ITEM_OVERHEAD + IMAGE_TOKENS);
    }

    #[test]
    fn opaque_content_is_estimated_by_size() {
        let other = ResponseItem::Other(json!({
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "x".repeat(400),
        }));
        assert_eq!(count_input_item(&other), PER_ITEM_OVERHEAD + 100);
    }

    #[test]
    fn raw_json_costs_what_the_typed_item_costs() {
        let typed = KnownResponseItem::Reasoning {
            id: "rs_1".into(),
            summary: vec![ReasoningSummaryPart::SummaryText {
                text: "Checking the docs first".into(),
            }],
            content: Some(vec![ReasoningContentPart::ReasoningText {
                text: "the user wants a list".into(),
            }]),
            encrypted_content: Some("gAAAAB".repeat(10)),
        };
        let mut raw = serde_json::to_value(&typed).unwrap();
        raw.as_object_mut().unwrap().remove("id");
        assert_eq!(
            count_input_item(&ResponseItem::Other(raw)),
            count_input_item(&ResponseItem::Known(typed))
        );
    }
}
