//! The window rule of `get_items(Some(n))`: a window that leaves older
//! items out never holds a tool output whose call it left out.
//!
//! The model API rejects an output without its call, and a window cut
//! between a call and its output (or between parallel calls and their
//! outputs) would hand exactly that to a caller who sends the window on.
//! Such outputs are left out of the window; they stay stored, and a wider
//! window, or `get_items(None)`, still has them.
//!
//! Pairing follows the model view's rule (`spool_core::llm::tool_side`): an
//! output belongs to a call with its `call_id` before it.

use std::collections::HashSet;

use crate::input_json::InputJson;
use crate::input_json::sealed::Side;

/// `items` (a cut window, oldest first) without the outputs whose call is
/// not in it.
pub(super) fn without_cut_outputs<T: InputJson>(items: Vec<T>) -> Vec<T> {
    let has_output = items
        .iter()
        .any(|item| item.side().is_some_and(|side| !side.call));
    if !has_output {
        // The common case: no set to build, nothing to move.
        return items;
    }
    let mut calls: HashSet<String> = HashSet::new();
    items
        .into_iter()
        .filter(|item| match item.side() {
            Some(Side {
                call: true,
                call_id,
            }) => {
                calls.insert(call_id.into_owned());
                true
            }
            Some(Side { call_id, .. }) => calls.contains(call_id.as_ref()),
            None => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;
    use serde_json::{Value, json};

    fn call(id: &str) -> Value {
        json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"})
    }

    fn output(id: &str) -> Value {
        json!({"type": "function_call_output", "call_id": id, "output": "ok"})
    }

    #[test]
    fn outputs_of_calls_left_out_go_and_the_rest_stays() {
        let user = json!({"role": "user", "content": "hi"});
        // Parallel calls a and b; the window starts at b.
        let window = vec![call("b"), output("a"), output("b"), user.clone()];
        assert_eq!(
            without_cut_outputs(window),
            [call("b"), output("b"), user.clone()]
        );
        let window = vec![output("x"), user.clone()];
        assert_eq!(without_cut_outputs(window), [user]);
    }

    /// The same rule on items kept as JSON text, whose `call_id` may need
    /// unescaping and whose other fields are never read.
    #[test]
    fn raw_items_follow_the_same_rule() {
        let raw = |items: Vec<Value>| -> Vec<Box<RawValue>> {
            items
                .iter()
                .map(|item| serde_json::value::to_raw_value(item).unwrap())
                .collect()
        };
        let text = |items: Vec<Box<RawValue>>| -> Vec<String> {
            items.iter().map(|item| item.get().to_owned()).collect()
        };
        let user = json!({"role": "user", "content": "call_id"});
        let quoted = "b \"quoted\" é";
        let window = vec![call(quoted), output("a"), output(quoted), user.clone()];
        assert_eq!(
            text(without_cut_outputs(raw(window))),
            text(raw(vec![call(quoted), output(quoted), user.clone()]))
        );
        let window = vec![output("x"), user.clone(), json!("not an object")];
        assert_eq!(
            text(without_cut_outputs(raw(window))),
            text(raw(vec![user, json!("not an object")]))
        );
    }
}
