//! A [`ModelRequest`] (Responses-shaped) as a Chat Completions request body.
//!
//! History items map to chat messages: instructions and developer messages
//! become `system` (the role every Chat server knows; many local chat
//! templates reject `developer`), function calls become the `tool_calls` of
//! an assistant message, their outputs `tool` messages. Reasoning and hosted
//! tool items have no Chat form and are dropped.

use serde_json::{Map, Value, json};
use spool_protocol::responses::{ContentItem, KnownResponseItem, ResponseItem};

use crate::ModelRequest;

/// The JSON body of a streaming Chat Completions request.
pub(crate) fn request_body(request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        // Only with tools: some servers reject the flag on its own.
        body.insert(
            "parallel_tool_calls".into(),
            json!(request.parallel_tool_calls),
        );
    }
    if let Some(max) = request.max_output_tokens {
        // `max_tokens`, not `max_completion_tokens`: the one llama.cpp,
        // vLLM and Ollama all accept.
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

/// The chat messages for a request's instructions and input items.
pub(crate) fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    if let Some(instructions) = &request.instructions {
        out.push(json!({"role": "system", "content": instructions}));
    }
    for item in &request.input {
        match item {
            ResponseItem::Known(known) => push_known(&mut out, known),
            ResponseItem::Other(value) => push_other(&mut out, value),
        }
    }
    out
}

fn push_known(out: &mut Vec<Value>, item: &KnownResponseItem) {
    match item {
        KnownResponseItem::Message { role, content, .. } => {
            let role = chat_role(role);
            out.push(json!({"role": role, "content": message_content(role, content)}));
        }
        KnownResponseItem::FunctionCall {
            call_id,
            name,
            arguments,
            ..
        } => {
            let call = json!({
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            });
            // Calls that follow an assistant message came from the same
            // model response, so they belong on that message.
            match out.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    match last.get_mut("tool_calls").and_then(Value::as_array_mut) {
                        Some(calls) => calls.push(call),
                        None => last["tool_calls"] = json!([call]),
                    }
                }
                _ => out.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        KnownResponseItem::FunctionCallOutput { call_id, output } => {
            out.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
        }
        KnownResponseItem::Reasoning { .. } | KnownResponseItem::WebSearchCall { .. } => {}
    }
}

/// An item spool does not model: kept if it is an easy-input message
/// (`{"role": …, "content": …}`), dropped otherwise.
fn push_other(out: &mut Vec<Value>, value: &Value) {
    let kind = value.get("type").and_then(Value::as_str);
    let role = value.get("role").and_then(Value::as_str);
    match (kind, role, value.get("content")) {
        (None | Some("message"), Some(role), Some(content)) => {
            let role = chat_role(role);
            let content = match content {
                Value::String(_) => content.clone(),
                Value::Array(parts) => {
                    let text: Vec<&str> = parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect();
                    json!(text.join(""))
                }
                _ => return,
            };
            out.push(json!({"role": role, "content": content}));
        }
        _ => tracing::debug!(
            ?kind,
            "dropping an input item Chat Completions cannot carry"
        ),
    }
}

fn chat_role(role: &str) -> &str {
    match role {
        "developer" => "system",
        other => other,
    }
}

/// A message's content: a plain string when it is only text (what every
/// server accepts), parts when it carries images.
fn message_content(role: &str, content: &[ContentItem]) -> Value {
    let has_image = content
        .iter()
        .any(|c| matches!(c, ContentItem::InputImage { .. }));
    if !has_image || role != "user" {
        let text: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                ContentItem::InputText { text } | ContentItem::OutputText { text, .. } => {
                    Some(text.as_str())
                }
                ContentItem::Refusal { refusal } => Some(refusal.as_str()),
                ContentItem::InputImage { .. } | ContentItem::InputAudio { .. } => None,
            })
            .collect();
        return json!(text.join(""));
    }
    let parts: Vec<Value> = content
        .iter()
        .map(|c| match c {
            ContentItem::InputText { text } | ContentItem::OutputText { text, .. } => {
                json!({"type": "text", "text": text})
            }
            ContentItem::Refusal { refusal } => json!({"type": "text", "text": refusal}),
            ContentItem::InputImage {
                image_url: Some(url),
                detail,
                ..
            } => {
                let mut image = json!({"url": url});
                if let Some(detail) = detail {
                    image["detail"] = json!(detail);
                }
                json!({"type": "image_url", "image_url": image})
            }
            // Chat Completions has no file-id images; say what was left out
            // rather than drop it silently.
            ContentItem::InputImage {
                image_url: None,
                file_id,
                ..
            } => json!({"type": "text", "text": format!("[image file {}]", file_id.as_deref().unwrap_or("?"))}),
            ContentItem::InputAudio { audio_url } => json!({"type": "text", "text": format!("[audio {}]", audio_url.as_deref().unwrap_or("?"))}),
        })
        .collect();
    Value::Array(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

    #[test]
    fn history_becomes_chat_messages() {
        let request = ModelRequest {
            model: "m".into(),
            instructions: Some("be brief".into()),
            input: vec![
                ResponseItem::Known(KnownResponseItem::Message {
                    id: None,
                    role: "developer".into(),
                    content: vec![ContentItem::InputText { text: "dev".into() }],
                    status: None,
                }),
                ResponseItem::user_text("weather?"),
                ResponseItem::Known(KnownResponseItem::Reasoning {
                    id: "rs_1".into(),
                    summary: vec![],
                    content: None,
                    encrypted_content: None,
                }),
                ResponseItem::assistant_text(Some("msg_1".into()), "checking"),
                ResponseItem::Known(KnownResponseItem::FunctionCall {
                    id: Some("fc_1".into()),
                    call_id: "call_1".into(),
                    name: "weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into(),
                    status: None,
                }),
                ResponseItem::Known(KnownResponseItem::FunctionCall {
                    id: None,
                    call_id: "call_2".into(),
                    name: "weather".into(),
                    arguments: r#"{"city":"Rome"}"#.into(),
                    status: None,
                }),
                ResponseItem::Known(KnownResponseItem::FunctionCallOutput {
                    call_id: "call_1".into(),
                    output: "sunny".into(),
                }),
                ResponseItem::Known(KnownResponseItem::FunctionCallOutput {
                    call_id: "call_2".into(),
                    output: "rainy".into(),
                }),
                ResponseItem::Other(json!({"role": "user", "content": "thanks"})),
                ResponseItem::Other(json!({"type": "image_generation_call", "id": "x"})),
            ],
            tools: vec![ToolSpec {
                name: "weather".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            parallel_tool_calls: true,
            max_output_tokens: Some(50),
            ..ModelRequest::default()
        };
        let body = request_body(&request);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "system", "content": "dev"},
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "checking", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": "rainy"},
                {"role": "user", "content": "thanks"}
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "weather", "description": "d", "parameters": {"type": "object"}}}])
        );
        assert_eq!(body["max_tokens"], json!(50));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["parallel_tool_calls"], json!(true));
    }

    #[test]
    fn a_call_without_preceding_text_gets_its_own_assistant_message() {
        let request = ModelRequest {
            input: vec![
                ResponseItem::user_text("go"),
                ResponseItem::Known(KnownResponseItem::FunctionCall {
                    id: None,
                    call_id: "c".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                    status: None,
                }),
            ],
            ..ModelRequest::default()
        };
        let body = request_body(&request);
        assert_eq!(body["messages"][1]["content"], Value::Null);
        assert_eq!(body["messages"][1]["tool_calls"][0]["id"], json!("c"));
        assert!(body.get("tools").is_none());
        assert!(body.get("parallel_tool_calls").is_none());
    }
}
