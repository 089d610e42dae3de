//! The Responses provider against a scripted SSE server on a real socket.

mod common;

use common::{collect, config, item, request, split};
use serde_json::{Value, json};
use spool_model::{ModelEvent, ModelProvider, ResponsesProvider};
use spool_protocol::TokenUsageBreakdown;
use spool_testkit::{ScriptedResponse, ScriptedServer};

fn ev(name: &str, mut data: Value) -> (String, Value) {
    data["type"] = json!(name);
    (name.to_owned(), data)
}

#[tokio::test]
async fn reasoning_message_and_function_call_normalize_exactly() -> anyhow::Result<()> {
    let reasoning_done = json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "enc",
        "summary": [{"type": "summary_text", "text": "Thinking hard"}]});
    let message_done = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "status": "completed", "content": [{"type": "output_text", "text": "Let me check.",
        "annotations": [], "logprobs": []}]});
    let call_done = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"});
    let events = vec![
        ev(
            "response.created",
            json!({"sequence_number": 0,
            "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        ),
        ev(
            "response.in_progress",
            json!({"response": {"id": "resp_1"}}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        ),
        ev(
            "response.reasoning_summary_part.added",
            json!({"item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        ),
        ev(
            "response.reasoning_summary_text.delta",
            json!({"item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "delta": "Thinking "}),
        ),
        ev(
            "response.reasoning_summary_text.delta",
            json!({"item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "delta": "hard"}),
        ),
        ev(
            "response.reasoning_summary_text.done",
            json!({"item_id": "rs_1", "text": "Thinking hard"}),
        ),
        ev(
            "response.reasoning_summary_part.done",
            json!({"item_id": "rs_1", "summary_index": 0}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": reasoning_done}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 1, "item": {"type": "message",
            "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        ev(
            "response.content_part.added",
            json!({"item_id": "msg_1", "output_index": 1,
            "content_index": 0, "part": {"type": "output_text", "text": ""}}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "msg_1", "output_index": 1,
            "content_index": 0, "delta": "Let me ", "logprobs": []}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "msg_1", "output_index": 1,
            "content_index": 0, "delta": "check", "logprobs": []}),
        ),
        ev(
            "response.output_text.done",
            json!({"item_id": "msg_1", "text": "Let me check"}),
        ),
        ev("response.content_part.done", json!({"item_id": "msg_1"})),
        ev(
            "response.output_item.done",
            json!({"output_index": 1, "item": message_done}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 2, "item": {"type": "function_call",
            "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "",
            "status": "in_progress"}}),
        ),
        ev(
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_1", "output_index": 2,
            "delta": "{\"city\":"}),
        ),
        ev(
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_1", "output_index": 2,
            "delta": "\"Paris\"}"}),
        ),
        ev(
            "response.function_call_arguments.done",
            json!({"item_id": "fc_1",
            "arguments": "{\"city\":\"Paris\"}"}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 2, "item": call_done}),
        ),
        ev(
            "response.completed",
            json!({"response": {"id": "resp_1", "status": "completed",
            "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100},
                "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 12},
                "total_tokens": 160}}}),
        ),
    ];
    let server = ScriptedServer::with_responses([ScriptedResponse::sse(events)]).await?;
    let provider = ResponsesProvider::new(config(&server.url()));
    let (events, error) = split(collect(provider.stream(request())).await);
    assert_eq!(error, None);

    let expected = vec![
        ModelEvent::Created {
            response_id: Some("resp_1".into()),
        },
        ModelEvent::OutputItemAdded {
            output_index: 0,
            item: item(json!({"type": "reasoning", "id": "rs_1", "summary": []})),
        },
        ModelEvent::ReasoningSummaryPartAdded {
            item_id: "rs_1".into(),
            summary_index: 0,
        },
        ModelEvent::ReasoningSummaryDelta {
            item_id: "rs_1".into(),
            summary_index: 0,
            delta: "Thinking ".into(),
        },
        ModelEvent::ReasoningSummaryDelta {
            item_id: "rs_1".into(),
            summary_index: 0,
            delta: "hard".into(),
        },
        ModelEvent::OutputItemDone {
            output_index: 0,
            item: item(reasoning_done.clone()),
            raw: reasoning_done,
        },
        ModelEvent::OutputItemAdded {
            output_index: 1,
            item: item(
                json!({"type": "message", "id": "msg_1", "role": "assistant",
                "status": "in_progress", "content": []}),
            ),
        },
        ModelEvent::OutputTextDelta {
            item_id: "msg_1".into(),
            output_index: 1,
            delta: "Let me ".into(),
        },
        ModelEvent::OutputTextDelta {
            item_id: "msg_1".into(),
            output_index: 1,
            delta: "check".into(),
        },
        // The final text differs from the deltas ("check" vs "check."):
        // the done item is what counts, and it arrives untouched.
        ModelEvent::OutputItemDone {
            output_index: 1,
            item: item(message_done.clone()),
            raw: message_done,
        },
        ModelEvent::OutputItemAdded {
            output_index: 2,
            item: item(
                json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                "name": "get_weather", "arguments": "", "status": "in_progress"}),
            ),
        },
        ModelEvent::FunctionCallArgumentsDelta {
            item_id: "fc_1".into(),
            output_index: 2,
            delta: "{\"city\":".into(),
        },
        ModelEvent::FunctionCallArgumentsDelta {
            item_id: "fc_1".into(),
            output_index: 2,
            delta: "\"Paris\"}".into(),
        },
        ModelEvent::OutputItemDone {
            output_index: 2,
            item: item(call_done.clone()),
            raw: call_done,
        },
        ModelEvent::Completed {
            response_id: Some("resp_1".into()),
            usage: Some(TokenUsageBreakdown {
                cache_write_input_tokens: Default::default(),
                total_tokens: 160,
                input_tokens: 120,
                cached_input_tokens: 100,
                output_tokens: 40,
                reasoning_output_tokens: 12,
            }),
            incomplete_reason: None,
        },
    ];
    assert_eq!(events, expected);

    // What went over the wire.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/responses")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        sent.body,
        json!({
            "model": "test-model",
            "instructions": "Be helpful.",
            "input": [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "What is the weather in Paris?"}]}],
            "tools": [{"type": "function", "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": false}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "stream": true,
        })
    );
    Ok(())
}

#[tokio::test]
async fn unknown_events_and_fields_are_skipped_and_hosted_items_pass_through() -> anyhow::Result<()>
{
    let search = json!({"type": "web_search_call", "id": "ws_1", "status": "completed",
        "action": {"type": "search", "query": "paris weather"}, "future_field": 1});
    let response = ScriptedResponse::event_stream()
        // Unnamed keep-alive comment and an unknown named event with non-JSON data.
        .chunk(": keep-alive\n\n")
        .chunk("event: response.future_thing\ndata: not json at all\n\n")
        .sse_event("response.created", &json!({"type": "response.created",
            "response": {"id": "resp_2", "brand_new": {"x": 1}}}))
        .sse_event("response.future_event", &json!({"type": "response.future_event", "x": 1}))
        .sse_event("response.output_item.added", &json!({"type": "response.output_item.added",
            "output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}}))
        .sse_event("response.web_search_call.searching", &json!({"type": "response.web_search_call.searching",
            "item_id": "ws_1", "output_index": 0}))
        .sse_event("response.output_item.done", &json!({"type": "response.output_item.done",
            "output_index": 0, "item": search}))
        // An item type spool does not model at all: kept as raw JSON.
        .sse_event("response.output_item.done", &json!({"type": "response.output_item.done",
            "output_index": 1, "item": {"type": "image_generation_call", "id": "ig_1"}}))
        .sse_event("response.completed", &json!({"type": "response.completed",
            "response": {"id": "resp_2", "status": "completed"}}));
    let server = ScriptedServer::with_responses([response]).await?;
    let provider = ResponsesProvider::new(config(&server.url()));
    let (events, error) = split(collect(provider.stream(request())).await);
    assert_eq!(error, None);
    assert_eq!(
        events[0],
        ModelEvent::Created {
            response_id: Some("resp_2".into())
        }
    );
    assert!(matches!(
        &events[1],
        ModelEvent::OutputItemAdded {
            output_index: 0,
            ..
        }
    ));
    assert_eq!(
        events[2],
        ModelEvent::OutputItemDone {
            output_index: 0,
            item: item(search.clone()),
            raw: search
        }
    );
    assert!(matches!(
        &events[2],
        ModelEvent::OutputItemDone {
            item: spool_protocol::responses::ResponseItem::Known(
                spool_protocol::responses::KnownResponseItem::WebSearchCall { .. }
            ),
            ..
        }
    ));
    // A done without an added is announced first, so it still starts.
    assert!(matches!(
        &events[3],
        ModelEvent::OutputItemAdded {
            output_index: 1,
            item: spool_protocol::responses::ResponseItem::Other(_)
        }
    ));
    assert!(matches!(
        &events[4],
        ModelEvent::OutputItemDone {
            output_index: 1,
            ..
        }
    ));
    assert_eq!(
        events[5],
        ModelEvent::Completed {
            response_id: Some("resp_2".into()),
            usage: None,
            incomplete_reason: None
        }
    );
    assert_eq!(events.len(), 6);
    Ok(())
}

/// llama.cpp sends no `output_index` and no `sequence_number`; ids alone
/// must be enough. `response.incomplete` is a completion with a reason.
#[tokio::test]
async fn items_without_output_index_and_incomplete_responses() -> anyhow::Result<()> {
    let events = vec![
        ev("response.created", json!({"response": {"id": "resp_3"}})),
        ev(
            "response.output_item.added",
            json!({"item": {"type": "message", "id": "m1",
            "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "m1", "delta": "Hi"}),
        ),
        ev(
            "response.output_item.done",
            json!({"item": {"type": "message", "id": "m1",
            "role": "assistant", "status": "incomplete",
            "content": [{"type": "output_text", "text": "Hi"}]}}),
        ),
        ev(
            "response.output_item.added",
            json!({"item": {"type": "reasoning", "id": "r1"}}),
        ),
        ev(
            "response.reasoning_text.delta",
            json!({"item_id": "r1", "content_index": 0, "delta": "hm"}),
        ),
        ev(
            "response.output_item.done",
            json!({"item": {"type": "reasoning", "id": "r1",
            "content": [{"type": "reasoning_text", "text": "hm"}]}}),
        ),
        ev(
            "response.incomplete",
            json!({"response": {"id": "resp_3", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}}}),
        ),
    ];
    let server = ScriptedServer::with_responses([ScriptedResponse::sse(events)]).await?;
    let provider = ResponsesProvider::new(config(&server.url()));
    let (events, error) = split(collect(provider.stream(request())).await);
    assert_eq!(error, None);
    assert_eq!(
        events[2],
        ModelEvent::OutputTextDelta {
            item_id: "m1".into(),
            output_index: 0,
            delta: "Hi".into()
        }
    );
    assert!(matches!(
        &events[3],
        ModelEvent::OutputItemDone {
            output_index: 0,
            ..
        }
    ));
    assert!(matches!(
        &events[4],
        ModelEvent::OutputItemAdded {
            output_index: 1,
            ..
        }
    ));
    assert_eq!(
        events[5],
        ModelEvent::ReasoningTextDelta {
            item_id: "r1".into(),
            content_index: 0,
            delta: "hm".into()
        }
    );
    assert!(matches!(
        &events[6],
        ModelEvent::OutputItemDone {
            output_index: 1,
            ..
        }
    ));
    assert!(matches!(
        &events[7],
        ModelEvent::Completed { incomplete_reason: Some(r), usage: Some(u), .. }
            if r == "max_output_tokens" && u.total_tokens == 6
    ));
    Ok(())
}
