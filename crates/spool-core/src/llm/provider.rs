//! Reading the provider's own payload out of `envelope.providerData`.
//!
//! The provider boundary owns that payload's shape, so reading it is
//! lenient: the raw provider item may be the payload itself or one of its
//! direct children (for example `{"item": {...}, "responseId": ...}`), keys
//! may be snake_case (the wire) or camelCase, and anything missing or of
//! the wrong type just means "not recorded".

use serde_json::{Map, Value};

type Object = Map<String, Value>;

/// The payload itself, or the first direct child object, that satisfies
/// `wanted`. One level deep is enough for every shape the providers write,
/// and keeps the lookup cheap.
fn find_object(data: &Value, wanted: impl Fn(&Object) -> bool) -> Option<&Object> {
    let top = data.as_object()?;
    if wanted(top) {
        return Some(top);
    }
    top.values()
        .filter_map(Value::as_object)
        .find(|child| wanted(child))
}

/// The first of `keys` that holds a non-empty string.
fn str_field<'a>(object: &'a Object, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .filter_map(|key| object.get(*key)?.as_str())
        .find(|value| !value.is_empty())
}

fn has_any(object: &Object, keys: &[&str]) -> bool {
    keys.iter().any(|key| object.contains_key(*key))
}

const CALL_ID: &[&str] = &["call_id", "callId"];
const ENCRYPTED: &[&str] = &["encrypted_content", "encryptedContent"];

/// A tool call as the provider sent it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RecordedCall {
    pub call_id: String,
    pub name: Option<String>,
    pub arguments: Option<String>,
    /// A freeform (`custom_tool_call`) call carries raw `input` instead of
    /// JSON arguments, and must be answered with `custom_tool_call_output`.
    pub freeform_input: Option<String>,
}

/// The provider's call, if one with a call id was recorded.
pub(super) fn recorded_call(data: Option<&Value>) -> Option<RecordedCall> {
    let object = find_object(data?, |object| has_any(object, CALL_ID))?;
    let call_id = str_field(object, CALL_ID)?.to_owned();
    let name = str_field(object, &["name"]).map(str::to_owned);
    let arguments = object
        .get("arguments")
        .and_then(|arguments| match arguments {
            Value::String(text) => Some(text.clone()),
            Value::Null => None,
            // Some providers hand back parsed arguments; the model API wants the
            // JSON text. These are small, so writing them out is cheap.
            other => Some(other.to_string()),
        });
    let is_freeform = str_field(object, &["type"]) == Some("custom_tool_call");
    let freeform_input = is_freeform
        .then(|| str_field(object, &["input"]).map(str::to_owned))
        .flatten();
    Some(RecordedCall {
        call_id,
        name,
        arguments,
        freeform_input,
    })
}

/// The provider's reasoning item id and encrypted reasoning, when recorded.
pub(super) fn reasoning(data: Option<&Value>) -> (Option<String>, Option<String>) {
    let Some(object) = data.and_then(|data| {
        find_object(data, |object| {
            str_field(object, &["type"]) == Some("reasoning") || has_any(object, ENCRYPTED)
        })
        // A bare `{"id": "rs_..."}` payload has neither marker.
        .or_else(|| data.as_object())
    }) else {
        return (None, None);
    };
    let id = str_field(object, &["id"]).map(str::to_owned);
    let encrypted = str_field(object, ENCRYPTED).map(str::to_owned);
    (id, encrypted)
}

/// The provider's web search call id and action, when recorded.
pub(super) fn web_search(data: Option<&Value>) -> (Option<String>, Option<Value>) {
    let Some(object) = data.and_then(|data| {
        find_object(data, |object| {
            str_field(object, &["type"]) == Some("web_search_call") || object.contains_key("action")
        })
        .or_else(|| data.as_object())
    }) else {
        return (None, None);
    };
    let id = str_field(object, &["id"]).map(str::to_owned);
    let action = object
        .get("action")
        .filter(|action| action.is_object())
        .cloned();
    (id, action)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_a_call_at_the_top_or_one_level_down() {
        let top = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                         "name": "shell", "arguments": "{\"command\":\"ls\"}"});
        let call = recorded_call(Some(&top)).unwrap();
        assert_eq!(call.call_id, "call_1");
        assert_eq!(call.name.as_deref(), Some("shell"));
        assert_eq!(call.arguments.as_deref(), Some("{\"command\":\"ls\"}"));

        let nested = json!({"responseId": "resp_1",
                            "item": {"callId": "call_2", "name": "x", "arguments": {"a": 1}}});
        let call = recorded_call(Some(&nested)).unwrap();
        assert_eq!(call.call_id, "call_2");
        assert_eq!(call.arguments.as_deref(), Some("{\"a\":1}"));

        assert_eq!(recorded_call(Some(&json!({"id": "x"}))), None);
        assert_eq!(recorded_call(None), None);
    }

    #[test]
    fn recognises_freeform_calls() {
        let data = json!({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch",
                          "input": "*** Begin Patch"});
        let call = recorded_call(Some(&data)).unwrap();
        assert_eq!(call.freeform_input.as_deref(), Some("*** Begin Patch"));
    }

    #[test]
    fn reads_reasoning_ids_and_encrypted_content() {
        let data =
            json!({"item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA"}});
        assert_eq!(
            reasoning(Some(&data)),
            (Some("rs_1".into()), Some("gAAA".into()))
        );
        assert_eq!(
            reasoning(Some(&json!({"id": "rs_2"}))).0.as_deref(),
            Some("rs_2")
        );
        assert_eq!(reasoning(Some(&json!("junk"))), (None, None));
    }
}
