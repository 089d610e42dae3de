//! The last pass over the input: what the model API would reject goes.
//!
//! - Every tool call keeps its output and every output its call. An output
//!   answers the latest unanswered call with its `call_id` before it; an
//!   output with no such call (an orphan) and a call never answered are
//!   dropped. A `call_id` reused by a later exchange is a new pair, not a
//!   clash: some Chat Completions servers number calls per response
//!   (`call_0`, ...), and dropping the reuse would lose real history.
//!   Conversion already emits each call right before its output; this pass
//!   is what makes the guarantee hold for any input.
//! - A reasoning item that carries a provider id must be followed by the
//!   output item it produced (an assistant message, a call, a web search);
//!   the API rejects it otherwise ("provided without its required following
//!   item"). One left dangling (its message was empty, its call is still
//!   running) is dropped.

use std::collections::HashMap;

use serde_json::Value;
use spool_protocol::responses::{KnownResponseItem, ResponseItem};

/// Which half of a tool exchange an input item is, with its `call_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSide<'a> {
    Call(&'a str),
    Output(&'a str),
}

/// Calls that the API requires to be answered by the output type at the
/// same position in [`OUTPUT_TYPES`] before the next request.
const CALL_TYPES: &[&str] = &[
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
];
const OUTPUT_TYPES: &[&str] = &[
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "computer_call_output",
    "shell_call_output",
    "apply_patch_call_output",
];

/// The side of a tool exchange an input item in JSON is: a call or an
/// output by its `type`, tied together by `call_id`. Shared with the
/// Session API, whose windows must not start with an output whose call
/// they left out.
pub fn tool_side(value: &Value) -> Option<ToolSide<'_>> {
    let kind = value.get("type")?.as_str()?;
    let call_id = value.get("call_id")?.as_str()?;
    tool_side_of(kind, call_id)
}

/// [`tool_side`] of an item whose `type` is `kind` and whose `call_id` is
/// `call_id`, for callers that read the two fields without a [`Value`].
pub fn tool_side_of<'a>(kind: &str, call_id: &'a str) -> Option<ToolSide<'a>> {
    if CALL_TYPES.contains(&kind) {
        Some(ToolSide::Call(call_id))
    } else if OUTPUT_TYPES.contains(&kind) {
        Some(ToolSide::Output(call_id))
    } else {
        None
    }
}

/// Whether `items` may be split into two requests' inputs just before
/// `index`: the second would not start with a tool output (its call in the
/// first) and the first would not end with a reasoning item bound to the
/// output it goes with.
pub fn splits_before(items: &[ResponseItem], index: usize) -> bool {
    let Some(next) = items.get(index) else {
        return true;
    };
    let output_first = matches!(side(next), Some(ToolSide::Output(_)));
    let reasoning_last = index
        .checked_sub(1)
        .and_then(|previous| items.get(previous))
        .is_some_and(is_bound_reasoning);
    !output_first && !reasoning_last
}

pub(super) fn side(item: &ResponseItem) -> Option<ToolSide<'_>> {
    match item {
        ResponseItem::Known(KnownResponseItem::FunctionCall { call_id, .. }) => {
            Some(ToolSide::Call(call_id))
        }
        ResponseItem::Known(KnownResponseItem::FunctionCallOutput { call_id, .. }) => {
            Some(ToolSide::Output(call_id))
        }
        ResponseItem::Known(
            KnownResponseItem::Message { .. }
            | KnownResponseItem::Reasoning { .. }
            | KnownResponseItem::WebSearchCall { .. },
        ) => None,
        ResponseItem::Other(value) => tool_side(value),
    }
}

/// Whether this is a reasoning item bound to a provider id, which the API
/// requires to be followed by its output item.
fn is_bound_reasoning(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Known(KnownResponseItem::Reasoning { id, .. }) => !id.is_empty(),
        ResponseItem::Known(
            KnownResponseItem::Message { .. }
            | KnownResponseItem::FunctionCall { .. }
            | KnownResponseItem::FunctionCallOutput { .. }
            | KnownResponseItem::WebSearchCall { .. },
        ) => false,
        ResponseItem::Other(value) => {
            value.get("type").and_then(|kind| kind.as_str()) == Some("reasoning")
                && value
                    .get("id")
                    .and_then(|id| id.as_str())
                    .is_some_and(|id| !id.is_empty())
        }
    }
}

fn is_reasoning(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Known(KnownResponseItem::Reasoning { .. }) => true,
        ResponseItem::Known(
            KnownResponseItem::Message { .. }
            | KnownResponseItem::FunctionCall { .. }
            | KnownResponseItem::FunctionCallOutput { .. }
            | KnownResponseItem::WebSearchCall { .. },
        ) => false,
        ResponseItem::Other(value) => {
            value.get("type").and_then(|kind| kind.as_str()) == Some("reasoning")
        }
    }
}

/// Whether a model output item that reasoning can lead to.
fn follows_reasoning(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Known(KnownResponseItem::Message { role, .. }) => role == "assistant",
        ResponseItem::Known(
            KnownResponseItem::FunctionCall { .. } | KnownResponseItem::WebSearchCall { .. },
        ) => true,
        ResponseItem::Known(
            KnownResponseItem::FunctionCallOutput { .. } | KnownResponseItem::Reasoning { .. },
        ) => false,
        // Raw items (the Session API's, or kinds spool does not model): an
        // assistant message (typed or the short `{"role", "content"}`
        // form) or any hosted or client tool call (`*_call`).
        ResponseItem::Other(value) => {
            let kind = value.get("type").and_then(Value::as_str);
            let role = value.get("role").and_then(Value::as_str);
            match kind {
                None | Some("message") => role == Some("assistant"),
                Some(kind) => kind.ends_with("_call"),
            }
        }
    }
}

/// Drops what the API would reject (see the module docs), in place.
pub(crate) fn sanitize(input: &mut Vec<ResponseItem>) {
    let mut keep = vec![true; input.len()];
    {
        // Calls waiting for their output, by call id.
        let mut open: HashMap<&str, usize> = HashMap::new();
        for (index, item) in input.iter().enumerate() {
            match side(item) {
                Some(ToolSide::Call(call_id)) => {
                    // A new call with the id of one still unanswered: the
                    // earlier one will never get its output.
                    if let Some(unanswered) = open.insert(call_id, index) {
                        keep[unanswered] = false;
                    }
                }
                Some(ToolSide::Output(call_id)) => keep[index] = open.remove(call_id).is_some(),
                None => {}
            }
        }
        for unanswered in open.into_values() {
            keep[unanswered] = false;
        }
    }
    // Backwards, so each bound reasoning item knows what follows it among
    // the items that stay. Reasoning items are transparent: a run of them
    // leads to whatever follows the run.
    let mut followed = false;
    for (index, item) in input.iter().enumerate().rev() {
        if !keep[index] {
            continue;
        }
        if is_reasoning(item) {
            if is_bound_reasoning(item) && !followed {
                keep[index] = false;
            }
            continue;
        }
        followed = follows_reasoning(item);
    }
    let mut index = 0;
    input.retain(|_| {
        let kept = keep[index];
        index += 1;
        kept
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(call_id: &str) -> ResponseItem {
        ResponseItem::Known(KnownResponseItem::FunctionCall {
            id: None,
            call_id: call_id.into(),
            name: "f".into(),
            arguments: "{}".into(),
            status: None,
        })
    }

    fn output(call_id: &str) -> ResponseItem {
        ResponseItem::Known(KnownResponseItem::FunctionCallOutput {
            call_id: call_id.into(),
            output: call_id.into(),
        })
    }

    fn reasoning(id: &str) -> ResponseItem {
        ResponseItem::Known(KnownResponseItem::Reasoning {
            id: id.into(),
            summary: Vec::new(),
            content: None,
            encrypted_content: None,
        })
    }

    fn sanitized(mut input: Vec<ResponseItem>) -> Vec<ResponseItem> {
        sanitize(&mut input);
        input
    }

    #[test]
    fn a_split_keeps_outputs_with_their_calls_and_reasoning_with_its_output() {
        let items = vec![
            ResponseItem::user_text("go"),
            reasoning("rs_1"),
            call("a"),
            output("a"),
            ResponseItem::user_text("next"),
        ];
        let allowed: Vec<bool> = (0..=items.len())
            .map(|index| splits_before(&items, index))
            .collect();
        assert_eq!(allowed, [true, true, false, false, true, true]);
        // Reasoning without an id binds nothing.
        let free = vec![reasoning(""), ResponseItem::user_text("x")];
        assert!(splits_before(&free, 1));
    }

    #[test]
    fn orphan_outputs_and_unanswered_calls_go() {
        let input = vec![
            output("a"),
            call("b"),
            output("b"),
            call("c"),
            ResponseItem::user_text("next"),
        ];
        assert_eq!(
            sanitized(input),
            [call("b"), output("b"), ResponseItem::user_text("next")]
        );
    }

    #[test]
    fn an_output_before_its_call_is_an_orphan() {
        assert!(sanitized(vec![output("a"), call("a")]).is_empty());
    }

    #[test]
    fn reused_call_ids_pair_in_order() {
        let input = vec![call("x"), output("x"), call("x"), output("x")];
        assert_eq!(sanitized(input.clone()), input);
        // A call superseded by a newer one with its id is never answered.
        assert_eq!(
            sanitized(vec![call("x"), call("x"), output("x")]),
            [call("x"), output("x")]
        );
    }

    #[test]
    fn freeform_calls_pair_like_function_calls() {
        let freeform = ResponseItem::Other(json!({"type": "custom_tool_call", "call_id": "p"}));
        let answer =
            ResponseItem::Other(json!({"type": "custom_tool_call_output", "call_id": "p"}));
        assert_eq!(sanitized(vec![freeform.clone()]), []);
        assert_eq!(
            sanitized(vec![freeform.clone(), answer.clone()]),
            [freeform, answer]
        );
    }

    #[test]
    fn bound_reasoning_needs_the_item_it_led_to() {
        let answer = ResponseItem::assistant_text(None, "hi");
        // Followed by its message, directly or through more reasoning.
        let kept = vec![reasoning("rs_1"), reasoning("rs_2"), answer.clone()];
        assert_eq!(sanitized(kept.clone()), kept);
        // Followed by nothing, a user message, or an output: dropped.
        assert!(sanitized(vec![reasoning("rs_1")]).is_empty());
        assert_eq!(
            sanitized(vec![reasoning("rs_1"), ResponseItem::user_text("u")]),
            [ResponseItem::user_text("u")]
        );
        // Followed by a call that itself goes: dropped with it.
        assert!(sanitized(vec![reasoning("rs_1"), call("z")]).is_empty());
        // Without an id there is nothing to dangle.
        assert_eq!(sanitized(vec![reasoning("")]), [reasoning("")]);
    }
}
