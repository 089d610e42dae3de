//! The Chat Completions provider against a scripted SSE server.

mod common;

use std::collections::HashMap;

use common::{collect, config, request, split, streamed_text, usage_of};
use serde_json::{Value, json};
use spool_model::{ChatProvider, ModelError, ModelEvent, ModelProvider, ModelRequest};
use spool_protocol::responses::{KnownResponseItem, ResponseItem};
use spool_testkit::{ScriptedResponse, ScriptedServer};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "system_fingerprint": "fp", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

fn call_delta(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> String {
    let mut call = json!({"index": index, "function": {"arguments": args}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    chunk(json!({"tool_calls": [call]}), None)
}

/// A compact description of an event, with synthesized ids replaced by the
/// order they first appeared in, so the sequence can be compared exactly.
fn describe(events: &[ModelEvent]) -> Vec<String> {
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut name = |id: &str| {
        let next = format!("#{}", ids.len());
        ids.entry(id.to_owned()).or_insert(next).clone()
    };
    events
        .iter()
        .map(|e| match e {
            ModelEvent::Created { response_id } => format!("created {response_id:?}"),
            ModelEvent::OutputItemAdded { output_index, item } => {
                format!("added {output_index} {}", item_summary(item, &mut name))
            }
            ModelEvent::OutputItemDone {
                output_index,
                item,
                raw,
            } => {
                assert_eq!(raw, &serde_json::to_value(item).unwrap());
                format!("done {output_index} {}", item_summary(item, &mut name))
            }
            ModelEvent::OutputTextDelta {
                item_id,
                output_index,
                delta,
            } => {
                format!("text {} {output_index} {delta:?}", name(item_id))
            }
            ModelEvent::ReasoningTextDelta {
                item_id,
                content_index,
                delta,
            } => {
                format!("reasoning {} {content_index} {delta:?}", name(item_id))
            }
            ModelEvent::FunctionCallArgumentsDelta {
                item_id,
                output_index,
                delta,
            } => {
                format!("args {} {output_index} {delta:?}", name(item_id))
            }
            ModelEvent::Completed {
                response_id,
                usage,
                incomplete_reason,
            } => format!(
                "completed {response_id:?} {:?} {incomplete_reason:?}",
                usage.map(|u| (
                    u.input_tokens,
                    u.cached_input_tokens,
                    u.output_tokens,
                    u.total_tokens
                ))
            ),
            other => format!("{other:?}"),
        })
        .collect()
}

fn item_summary(item: &ResponseItem, name: &mut impl FnMut(&str) -> String) -> String {
    match item {
        ResponseItem::Known(KnownResponseItem::Message {
            id,
            content,
            status,
            ..
        }) => {
            let text: Vec<String> = content.iter().map(|c| format!("{c:?}")).collect();
            format!(
                "message {} {status:?} [{}]",
                name(id.as_deref().unwrap()),
                text.join(", ")
            )
        }
        ResponseItem::Known(KnownResponseItem::FunctionCall {
            id,
            call_id,
            name: fname,
            arguments,
            status,
        }) => format!(
            "call {} {call_id} {fname} {arguments:?} {status:?}",
            name(id.as_deref().unwrap())
        ),
        ResponseItem::Known(KnownResponseItem::Reasoning { id, content, .. }) => {
            format!("reasoning {} {content:?}", name(id))
        }
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn content_and_two_parallel_tool_calls_across_chunks() -> anyhow::Result<()> {
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70,
            "prompt_tokens_details": {"cached_tokens": 32}}});
    let response = ScriptedResponse::sse_data([
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(json!({"content": "Let me "}), None),
        chunk(json!({"content": "check."}), None),
        call_delta(0, Some("call_a"), Some("get_weather"), ""),
        call_delta(1, Some("call_b"), Some("get_time"), ""),
        call_delta(0, None, None, "{\"city\":"),
        call_delta(1, None, None, "{\"tz\":\"CET\"}"),
        call_delta(0, None, None, "\"Paris\"}"),
        chunk(json!({}), Some("tool_calls")),
        usage.to_string(),
        "[DONE]".to_owned(),
    ]);
    let server = ScriptedServer::with_responses([response]).await?;
    let provider = ChatProvider::new(config(&server.url()));
    let (events, error) = split(collect(provider.stream(request())).await);
    assert_eq!(error, None);
    assert_eq!(
        describe(&events),
        vec![
            "created Some(\"chatcmpl-1\")".to_owned(),
            "added 0 message #0 Some(\"in_progress\") []".to_owned(),
            "text #0 0 \"Let me \"".to_owned(),
            "text #0 0 \"check.\"".to_owned(),
            "done 0 message #0 Some(\"completed\") [OutputText { text: \"Let me check.\", annotations: [] }]"
                .to_owned(),
            "added 1 call #1 call_a get_weather \"\" Some(\"in_progress\")".to_owned(),
            "added 2 call #2 call_b get_time \"\" Some(\"in_progress\")".to_owned(),
            "args #1 1 \"{\\\"city\\\":\"".to_owned(),
            "args #2 2 \"{\\\"tz\\\":\\\"CET\\\"}\"".to_owned(),
            "args #1 1 \"\\\"Paris\\\"}\"".to_owned(),
            "done 1 call #1 call_a get_weather \"{\\\"city\\\":\\\"Paris\\\"}\" Some(\"completed\")"
                .to_owned(),
            "done 2 call #2 call_b get_time \"{\\\"tz\\\":\\\"CET\\\"}\" Some(\"completed\")".to_owned(),
            "completed Some(\"chatcmpl-1\") Some((50, 32, 20, 70)) None".to_owned(),
        ]
    );
    // Synthesized ids look like the Responses API's.
    let ModelEvent::OutputItemAdded { item, .. } = &events[1] else {
        unreachable!()
    };
    let ResponseItem::Known(KnownResponseItem::Message { id: Some(id), .. }) = item else {
        unreachable!()
    };
    assert!(id.starts_with("msg_"), "{id}");

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        sent.body,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "Be helpful."},
                {"role": "user", "content": "What is the weather in Paris?"}
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
    Ok(())
}

#[tokio::test]
async fn reasoning_content_becomes_a_reasoning_item_and_length_is_incomplete() -> anyhow::Result<()>
{
    let response = ScriptedResponse::sse_data([
        chunk(json!({"role": "assistant", "reasoning_content": "Hmm, "}), None),
        chunk(json!({"reasoning_content": "France."}), None),
        chunk(json!({"content": "Paris"}), None),
        // Usage in the same chunk as the finish reason, and no [DONE]: the
        // finish reason alone says the answer is whole.
        json!({"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})
        .to_string(),
    ]);
    let server = ScriptedServer::with_responses([response]).await?;
    let provider = ChatProvider::new(config(&server.url()));
    let (events, error) = split(collect(provider.stream(request())).await);
    assert_eq!(error, None);
    assert_eq!(
        describe(&events),
        vec![
            "created Some(\"chatcmpl-1\")",
            "added 0 reasoning #0 Some([])",
            "reasoning #0 0 \"Hmm, \"",
            "reasoning #0 0 \"France.\"",
            "done 0 reasoning #0 Some([ReasoningText { text: \"Hmm, France.\" }])",
            "added 1 message #1 Some(\"in_progress\") []",
            "text #1 1 \"Paris\"",
            // Cut by the token limit: the message is not finished.
            "done 1 message #1 Some(\"incomplete\") [OutputText { text: \"Paris\", annotations: [] }]",
            "completed Some(\"chatcmpl-1\") Some((9, 0, 3, 12)) Some(\"max_output_tokens\")",
        ]
    );
    assert_eq!(streamed_text(&events), "Paris");
    assert_eq!(usage_of(&events).map(|u| u.output_tokens), Some(3));
    Ok(())
}

#[tokio::test]
async fn previous_response_id_is_refused_without_a_request() -> anyhow::Result<()> {
    let server = ScriptedServer::start().await?;
    let provider = ChatProvider::new(config(&server.url()));
    let request = ModelRequest {
        previous_response_id: Some("resp_1".into()),
        ..request()
    };
    let (_, error) = split(collect(provider.stream(request)).await);
    assert!(
        matches!(error, Some(ModelError::InvalidRequest { .. })),
        "{error:?}"
    );
    assert!(server.requests().is_empty());
    Ok(())
}
