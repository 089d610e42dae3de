//! Responses API input items of every shape the Session API must keep, for
//! the session tests.

#![allow(dead_code)] // each test binary uses a different subset

use serde_json::{Value, json};

pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub fn assistant(id: &str, text: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    })
}

pub fn call(call_id: &str) -> Value {
    json!({
        "type": "function_call",
        "id": format!("fc_{call_id}"),
        "call_id": call_id,
        "name": "lookup",
        "arguments": "{\"q\":\"weather\"}",
        "status": "completed"
    })
}

pub fn output(call_id: &str) -> Value {
    json!({"type": "function_call_output", "call_id": call_id, "output": "sunny, 21°C"})
}

/// One of every shape: the short and typed message forms of every role,
/// content parts, reasoning (with encrypted content), a function call and
/// its output, a web search, a freeform tool call and its output, an item
/// reference, and odd JSON (nulls, numbers, unicode, nesting, key order).
pub fn every_shape() -> Vec<Value> {
    vec![
        user("hi"),
        json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "what is in this image?"},
            {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "high"},
            {"type": "input_file", "file_id": "file-1", "filename": "notes.pdf"}
        ]}),
        json!({"role": "system", "content": "You are terse."}),
        json!({"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "Answer in French."}
        ]}),
        json!({
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Looking it up."}],
            "encrypted_content": "gAAAAABo-opaque=="
        }),
        call("call_1"),
        output("call_1"),
        json!({
            "id": "ws_1",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "weather paris"}
        }),
        assistant("msg_1", "Il fait beau."),
        json!({"type": "custom_tool_call", "call_id": "ctc_1", "name": "patch", "input": "*** Begin"}),
        json!({"type": "custom_tool_call_output", "call_id": "ctc_1", "output": "done"}),
        json!({"type": "item_reference", "id": "msg_0"}),
        json!({
            "zeta": null,
            "role": "assistant",
            "content": "ünïcödé ✓ \"quoted\" \\ backslash\nnewline",
            "numbers": [0, -1, 1.5, 1e-7, 12345678901234_i64, u64::MAX],
            "nested": {"b": [true, false, {"a": []}], "a": {}}
        }),
    ]
}

/// The alternating items of the Agents SDK benchmark.
pub fn sdk_item(n: usize) -> Value {
    if n.is_multiple_of(2) {
        user(&format!("{n:05} {}", "question text ".repeat(9)))
    } else {
        assistant(
            &format!("msg_{n:05}"),
            &format!("{n:05} {}", "answer text, ".repeat(15)),
        )
    }
}
