//! Scripted OpenAI Responses API answers (SSE), for tests of code that
//! talks to a model: a message, or a batch of function calls.

use serde_json::{Value, json};

use crate::server::{Gate, ScriptedResponse};

fn event(name: &str, mut data: Value) -> (String, Value) {
    data["type"] = json!(name);
    (name.to_owned(), data)
}

/// A response with one assistant message, streamed in `deltas`.
pub fn message_response(response_id: &str, deltas: &[&str]) -> ScriptedResponse {
    let text: String = deltas.concat();
    let message_id = format!("msg_{response_id}");
    let mut events = vec![
        event("response.created", json!({"response": {"id": response_id}})),
        event(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message", "id": message_id,
                "role": "assistant", "status": "in_progress", "content": []}}),
        ),
    ];
    for delta in deltas {
        events.push(event(
            "response.output_text.delta",
            json!({"item_id": message_id, "output_index": 0, "delta": delta}),
        ));
    }
    events.push(event(
        "response.output_item.done",
        json!({"output_index": 0, "item": {"type": "message", "id": message_id,
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
    ));
    events.push(event(
        "response.completed",
        json!({"response": {"id": response_id, "usage": {"input_tokens": 10,
            "output_tokens": 5, "total_tokens": 15}}}),
    ));
    ScriptedResponse::sse(events)
}

/// A response that calls tools: `(call_id, name, arguments)` each, in
/// output order.
pub fn calls_response(response_id: &str, calls: &[(&str, &str, Value)]) -> ScriptedResponse {
    let mut events = vec![event(
        "response.created",
        json!({"response": {"id": response_id}}),
    )];
    for (index, (call_id, name, arguments)) in calls.iter().enumerate() {
        let arguments = match arguments {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let id = format!("fc_{call_id}");
        events.push(event(
            "response.output_item.added",
            json!({"output_index": index, "item": {"type": "function_call", "id": id,
                "call_id": call_id, "name": name, "arguments": "", "status": "in_progress"}}),
        ));
        events.push(event(
            "response.output_item.done",
            json!({"output_index": index, "item": {"type": "function_call", "id": id,
                "call_id": call_id, "name": name, "arguments": arguments,
                "status": "completed"}}),
        ));
    }
    events.push(event(
        "response.completed",
        json!({"response": {"id": response_id}}),
    ));
    ScriptedResponse::sse(events)
}

/// A message response streaming `before`, then waiting for `gate`, then
/// streaming `after`, every chunk `pace` apart.
pub fn paced_message_response(
    response_id: &str,
    before: &[&str],
    gate: &Gate,
    after: &[&str],
    pace: std::time::Duration,
) -> ScriptedResponse {
    let message_id = format!("msg_{response_id}");
    let text: String = before.iter().chain(after).copied().collect();
    let delta = |d: &str| {
        json!({"type": "response.output_text.delta", "item_id": message_id,
               "output_index": 0, "delta": d})
    };
    let mut response = ScriptedResponse::event_stream()
        .chunk_delay(pace)
        .sse_event(
            "response.created",
            &json!({"type": "response.created", "response": {"id": response_id}}),
        )
        .sse_event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0,
                    "item": {"type": "message", "id": message_id, "role": "assistant",
                             "status": "in_progress", "content": []}}),
        );
    for d in before {
        response = response.sse_event("response.output_text.delta", &delta(d));
    }
    response = response.wait_for(gate);
    for d in after {
        response = response.sse_event("response.output_text.delta", &delta(d));
    }
    response
        .sse_event(
            "response.output_item.done",
            &json!({"type": "response.output_item.done", "output_index": 0,
                    "item": {"type": "message", "id": message_id, "role": "assistant",
                             "status": "completed",
                             "content": [{"type": "output_text", "text": text,
                                          "annotations": []}]}}),
        )
        .sse_event(
            "response.completed",
            &json!({"type": "response.completed", "response": {"id": response_id,
                    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}}),
        )
}
