//! Unit tests of the mapping from provider events to item events, checked
//! by feeding the result through the reducer.

use serde_json::json;
use spool_core::ThreadReducer;
use spool_model::ModelEvent;
use spool_protocol::responses::{ContentItem, KnownResponseItem, ResponseItem};
use spool_protocol::*;

use super::OutputMapper;

const T: &str = "t";
const U: &str = "u";

fn message(id: &str, text: &str) -> ResponseItem {
    ResponseItem::Known(KnownResponseItem::Message {
        id: Some(id.into()),
        role: "assistant".into(),
        content: if text.is_empty() {
            vec![]
        } else {
            vec![ContentItem::OutputText {
                text: text.into(),
                annotations: vec![],
            }]
        },
        status: None,
    })
}

/// A reducer with turn `U` started, and a way to feed it payloads.
struct Harness {
    reducer: ThreadReducer,
    seq: u64,
}

impl Harness {
    fn new() -> Self {
        let mut h = Harness {
            reducer: ThreadReducer::new(T),
            seq: 0,
        };
        h.apply(vec![ServerNotification::TurnStarted(
            TurnStartedNotification {
                thread_id: T.into(),
                turn: Turn {
                    items_view: Default::default(),
                    id: U.into(),
                    items: vec![],
                    status: TurnStatus::InProgress,
                    error: None,
                    started_at: None,
                    completed_at: None,
                    duration_ms: None,
                    token_usage: None,
                },
            },
        )]);
        h
    }
    fn apply(&mut self, payloads: Vec<ServerNotification>) {
        for payload in payloads {
            self.seq += 1;
            self.reducer
                .apply(&ThreadEvent {
                    thread_id: T.into(),
                    seq: self.seq,
                    at_ms: 0,
                    payload,
                })
                .expect("the mapper emits valid events");
        }
    }
}

#[test]
fn a_message_streams_and_completes_with_the_final_text() {
    let mut h = Harness::new();
    let mut m = OutputMapper::new(T, U, "assistant");
    let mut emitted = Vec::new();
    for e in [
        ModelEvent::Created {
            response_id: Some("resp_1".into()),
        },
        ModelEvent::OutputItemAdded {
            output_index: 0,
            item: message("msg_1", ""),
        },
        ModelEvent::OutputTextDelta {
            item_id: "msg_1".into(),
            output_index: 0,
            delta: "Par".into(),
        },
        ModelEvent::OutputTextDelta {
            item_id: "msg_1".into(),
            output_index: 0,
            delta: "is".into(),
        },
        ModelEvent::OutputItemDone {
            output_index: 0,
            item: message("msg_1", "Paris."),
            raw: json!({"type": "message", "id": "msg_1", "extra": 1}),
        },
    ] {
        let out = m.on_event(e, 5);
        emitted.extend(out.iter().map(|n| n.method()));
        h.apply(out);
    }
    assert_eq!(
        emitted,
        [
            "item/started",
            "item/agentMessage/delta",
            "item/agentMessage/delta",
            "item/completed"
        ]
    );
    let items = h.reducer.items();
    assert_eq!(items.len(), 1);
    assert!(matches!(&items[0].item, ThreadItem::AgentMessage { text, .. } if text == "Paris."));
    assert_eq!(items[0].envelope.status, ItemStatus::Completed);
    assert_eq!(items[0].envelope.provenance.agent, "assistant");
    assert_eq!(
        items[0].envelope.provider_data.as_deref(),
        Some(&json!({"type": "message", "id": "msg_1", "extra": 1})),
        "the provider's raw item is kept"
    );
    assert_ne!(items[0].item.id(), "msg_1", "spool ids are its own");
}

#[test]
fn reasoning_and_function_calls_map_to_their_kinds() {
    let mut h = Harness::new();
    let mut m = OutputMapper::new(T, U, "assistant");
    let reasoning = |summary: &[&str]| {
        ResponseItem::Known(KnownResponseItem::Reasoning {
            id: "rs_1".into(),
            summary: summary
                .iter()
                .map(
                    |s| spool_protocol::responses::ReasoningSummaryPart::SummaryText {
                        text: (*s).into(),
                    },
                )
                .collect(),
            content: None,
            encrypted_content: None,
        })
    };
    let call = |args: &str| {
        ResponseItem::Known(KnownResponseItem::FunctionCall {
            id: Some("fc_1".into()),
            call_id: "call_1".into(),
            name: "lookup".into(),
            arguments: args.into(),
            status: None,
        })
    };
    for e in [
        ModelEvent::OutputItemAdded {
            output_index: 0,
            item: reasoning(&[]),
        },
        ModelEvent::ReasoningSummaryPartAdded {
            item_id: "rs_1".into(),
            summary_index: 0,
        },
        ModelEvent::ReasoningSummaryDelta {
            item_id: "rs_1".into(),
            summary_index: 0,
            delta: "think".into(),
        },
        ModelEvent::OutputItemDone {
            output_index: 0,
            item: reasoning(&["thought"]),
            raw: json!({}),
        },
        ModelEvent::OutputItemAdded {
            output_index: 1,
            item: call(""),
        },
        ModelEvent::FunctionCallArgumentsDelta {
            item_id: "fc_1".into(),
            output_index: 1,
            delta: "{\"q\":".into(),
        },
        ModelEvent::OutputItemDone {
            output_index: 1,
            item: call("{\"q\":1}"),
            raw: json!({"call_id": "call_1"}),
        },
    ] {
        let out = m.on_event(e, 1);
        h.apply(out);
    }
    let items = h.reducer.items();
    assert!(
        matches!(&items[0].item, ThreadItem::Reasoning { summary, .. } if summary == &["thought"])
    );
    // The call stays open until someone answers it.
    assert_eq!(items[1].envelope.status, ItemStatus::InProgress);
    let pending = m.take_pending_calls();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].name_and_arguments(), ("lookup", "{\"q\":1}"));
    let done = pending.into_iter().next().unwrap().complete(
        FunctionCallStatus::Completed,
        "42".into(),
        3,
        9,
    );
    h.apply(vec![done]);
    let call = &h.reducer.items()[1];
    assert_eq!(call.envelope.status, ItemStatus::Completed);
    assert!(matches!(
        &call.item,
        ThreadItem::FunctionCall { call_id, output: Some(o), status: FunctionCallStatus::Completed, .. }
            if call_id == "call_1" && o == "42"
    ));
}

#[test]
fn open_items_close_as_incomplete_with_what_streamed() {
    let mut h = Harness::new();
    let mut m = OutputMapper::new(T, U, "assistant");
    for e in [
        ModelEvent::OutputItemAdded {
            output_index: 0,
            item: message("msg_1", ""),
        },
        ModelEvent::OutputTextDelta {
            item_id: "msg_1".into(),
            output_index: 0,
            delta: "Half".into(),
        },
    ] {
        let out = m.on_event(e, 1);
        h.apply(out);
    }
    let closing = m.close_open(2);
    assert_eq!(closing.len(), 1);
    h.apply(closing);
    let item = &h.reducer.items()[0];
    assert_eq!(item.envelope.status, ItemStatus::Incomplete);
    assert!(matches!(&item.item, ThreadItem::AgentMessage { text, .. } if text == "Half"));
    assert!(m.close_open(3).is_empty());
}

#[test]
fn unknown_output_items_are_skipped() {
    let mut m = OutputMapper::new(T, U, "assistant");
    let other = ResponseItem::Other(json!({"type": "image_generation_call", "id": "ig_1"}));
    assert!(
        m.on_event(
            ModelEvent::OutputItemAdded {
                output_index: 0,
                item: other.clone()
            },
            1
        )
        .is_empty()
    );
    assert!(
        m.on_event(
            ModelEvent::OutputItemDone {
                output_index: 0,
                item: other,
                raw: json!({})
            },
            1
        )
        .is_empty()
    );
}

/// Regression (found by the `provider_events` fuzz target): a provider
/// that announces the same item twice made the mapper start a second
/// item under the same key and forget the first, which then stayed in
/// progress: the reducer refused to complete the turn.
#[tokio::test]
async fn an_item_added_twice_is_started_once() {
    // The fuzzer's input: two id-less `output_item.added` for output 0,
    // then the body ends.
    let body = "data:{\"x\":0,\"item\":{\"type\":\"reasoning\",\"\":[]},\"type\":\"response.output_item.added\"}\n\n\n\
        data: {\"output_index\":0,\"item\":{\"type\":\"reasoning\"},\"type\":\"response.output_item.added\"}\n\n\n\n";
    let items = spool_model::fuzzing::model_events(
        spool_model::fuzzing::Wire::Responses,
        vec![body.as_bytes().to_vec()],
    )
    .await;
    let added = items
        .iter()
        .filter(|i| matches!(i, Ok(ModelEvent::OutputItemAdded { .. })))
        .count();
    assert_eq!(added, 2, "{items:#?}");
    let mut h = Harness::new();
    let mut m = OutputMapper::new(T, U, "assistant");
    for event in items.into_iter().flatten() {
        let payloads = m.on_event(event, 1);
        h.apply(payloads);
    }
    h.apply(m.close_open(2));
    assert_eq!(h.reducer.items().len(), 1, "one item started");
    h.apply(vec![ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: T.into(),
            turn: Turn::new(U, TurnStatus::Failed),
        },
    )]);
    assert_eq!(h.reducer.turns()[0].status, TurnStatus::Failed);
}

#[test]
fn a_reasoning_event_for_a_message_is_dropped() {
    // The fuzzer's stream: a message (a refusal) announced, then a
    // reasoning summary part, a summary delta and a reasoning delta naming
    // it, then the body ends.
    let message: ResponseItem = serde_json::from_value(json!({"type": "message",
        "id": "item_0", "role": "assistant", "content": [{"type": "refusal", "refusal": ";"}]}))
    .unwrap();
    let events = vec![
        ModelEvent::OutputItemAdded {
            output_index: 0,
            item: message,
        },
        ModelEvent::ReasoningSummaryPartAdded {
            item_id: "item_0".into(),
            summary_index: 0,
        },
        ModelEvent::ReasoningSummaryDelta {
            item_id: "item_0".into(),
            summary_index: 0,
            delta: "x".into(),
        },
        ModelEvent::ReasoningTextDelta {
            item_id: "item_0".into(),
            content_index: 0,
            delta: "y".into(),
        },
    ];
    let mut h = Harness::new();
    let mut m = OutputMapper::new(T, U, "assistant");
    for event in events {
        let payloads = m.on_event(event, 1);
        h.apply(payloads);
    }
    h.apply(m.close_open(2));
    assert_eq!(h.reducer.items().len(), 1);
    h.apply(vec![ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: T.into(),
            turn: Turn::new(U, TurnStatus::Failed),
        },
    )]);
    assert_eq!(h.reducer.turns()[0].status, TurnStatus::Failed);
}
