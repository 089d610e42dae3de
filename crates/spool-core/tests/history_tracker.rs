//! The tracker of server-managed history: each request carries exactly
//! what the provider does not hold, and only a stored response moves it.

mod views_support;

use std::collections::HashSet;

use serde_json::{Value, json};
use spool_core::ItemRecord;
use spool_core::llm::{HistoryCursor, Prepared, ReasoningIdPolicy, Response};
use spool_protocol::responses::ResponseItem;
use views_support::{agent, function_call, json as to_json, record, user, with_provider};

fn prepare(cursor: &HistoryCursor, records: &[ItemRecord]) -> Prepared {
    cursor.prepare(records, ReasoningIdPolicy::Preserve)
}

/// Acknowledges `prepared`, sent as is, by a stored response `id` that
/// produced `produced` (logged meanwhile, with `steers`) and made `calls`.
fn stored(
    cursor: &HistoryCursor,
    prepared: &Prepared,
    id: Option<&str>,
    logged_since: &[ItemRecord],
    calls: &[&str],
) -> HistoryCursor {
    let produced: HashSet<String> = logged_since
        .iter()
        .filter(|r| r.item.id().starts_with('a'))
        .map(|r| r.item.id().to_owned())
        .collect();
    cursor
        .acknowledge(
            &prepared.mark_sent(&prepared.input),
            Response {
                stored: id.is_some(),
                response_id: id.map(str::to_owned),
                logged_since,
                produced: &produced,
                calls: calls.iter().map(|c| c.to_string()).collect(),
            },
        )
        .unwrap_or_else(|| cursor.clone())
}

fn types(input: &[ResponseItem]) -> Vec<String> {
    to_json(input)
        .iter()
        .map(|item| {
            let kind = item["type"].as_str().unwrap_or("?").to_owned();
            match item.get("role").and_then(Value::as_str) {
                Some(role) => format!("{kind}:{role}"),
                None => kind,
            }
        })
        .collect()
}

#[test]
fn each_request_carries_only_what_the_provider_lacks() {
    let fresh = HistoryCursor::default();
    let u1 = record("t1", 1, user("u1", "weather?"));
    let first = prepare(&fresh, std::slice::from_ref(&u1));
    assert_eq!(types(&first.input), ["message:user"]);
    // The response asks for a call; its record is filed after it ended.
    let c1 = stored(&fresh, &first, Some("resp_1"), &[], &["call_1"]);
    assert_eq!(c1.previous_response_id.as_deref(), Some("resp_1"));
    let f2 = record("t1", 2, function_call("f2", "call_1", "sunny"));
    let second = prepare(&c1, &[u1.clone(), f2.clone()]);
    // The call is the provider's already: only its output goes.
    assert_eq!(
        to_json(&second.input),
        [json!({"type": "function_call_output", "call_id": "call_1", "output": "sunny"})]
    );
    let a3 = record("t1", 3, agent("a3", "It is sunny."));
    let c2 = stored(&c1, &second, Some("resp_2"), std::slice::from_ref(&a3), &[]);
    assert_eq!(c2.through_ordinal, 3);
    assert!(c2.held_calls.is_empty(), "{c2:?}");
    let u4 = record("t2", 4, user("u4", "and tomorrow?"));
    let third = prepare(&c2, &[u1, f2, a3, u4]);
    assert_eq!(types(&third.input), ["message:user"]);
}

#[test]
fn a_request_that_failed_or_was_not_stored_moves_nothing() {
    let c1 = HistoryCursor {
        previous_response_id: Some("resp_1".into()),
        through_ordinal: 1,
        ..Default::default()
    };
    let records = [
        record("t", 1, user("u1", "one")),
        record("t", 2, user("u2", "two")),
    ];
    let first = prepare(&c1, &records);
    let produced = HashSet::new();
    let not_stored = c1.acknowledge(
        &first.mark_sent(&first.input),
        Response {
            stored: false,
            response_id: None,
            logged_since: &[],
            produced: &produced,
            calls: vec!["call_x".into()],
        },
    );
    assert_eq!(not_stored, None);
    // The retry sends the same delta, chained to the same response.
    assert_eq!(prepare(&c1, &records), first);
    // A response without an id between two with ids: the chain holds.
    let a3 = record("t", 3, agent("a3", "ok"));
    let after = stored(&c1, &first, None, std::slice::from_ref(&a3), &[]);
    assert_eq!(after, c1);
    let records = [records[0].clone(), records[1].clone(), a3];
    let next = prepare(&after, &records);
    assert_eq!(types(&next.input), ["message:user", "message:assistant"]);
    let c3 = stored(&after, &next, Some("resp_3"), &[], &[]);
    assert_eq!(c3.previous_response_id.as_deref(), Some("resp_3"));
    assert_eq!(c3.through_ordinal, 3);
}

#[test]
fn input_logged_while_the_model_answered_is_sent_next() {
    let fresh = HistoryCursor::default();
    let u1 = record("t", 1, user("u1", "write a poem"));
    let first = prepare(&fresh, std::slice::from_ref(&u1));
    // A steer lands between the response's two messages.
    let since = [
        record("t", 2, agent("a2", "Roses")),
        record("t", 3, user("u3", "about the sea")),
        record("t", 4, agent("a4", "are red")),
    ];
    let c1 = stored(&fresh, &first, Some("resp_1"), &since, &[]);
    assert_eq!(c1.through_ordinal, 4);
    assert_eq!(c1.unsent.len(), 1, "{c1:?}");
    let all: Vec<ItemRecord> = std::iter::once(u1).chain(since).collect();
    let next = prepare(&c1, &all);
    assert_eq!(
        to_json(&next.input),
        [json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "about the sea"}]})]
    );
    let c2 = stored(&c1, &next, Some("resp_2"), &[], &[]);
    assert!(c2.unsent.is_empty(), "{c2:?}");
}

#[test]
fn the_marks_are_what_the_input_filter_let_through() {
    let fresh = HistoryCursor::default();
    let records = [
        record("t", 1, user("u1", "keep")),
        record("t", 2, user("u2", "held back")),
    ];
    let prepared = prepare(&fresh, &records);
    // The filter drops the second message and rewrites the first.
    let mut rewritten = to_json(&prepared.input[..1]);
    rewritten[0]["content"][0]["text"] = json!("keep (filtered)");
    let sent: Vec<ResponseItem> = rewritten
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    let produced = HashSet::new();
    let c1 = fresh
        .acknowledge(
            &prepared.mark_sent(&sent),
            Response {
                stored: true,
                response_id: Some("resp_1".into()),
                logged_since: &[],
                produced: &produced,
                calls: Vec::new(),
            },
        )
        .unwrap();
    let next = prepare(&c1, &records);
    assert_eq!(
        to_json(&next.input),
        [json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "held back"}]})]
    );
}

#[test]
fn duplicates_go_once_by_provider_id_then_by_call_id() {
    let raw = |ordinal: u64, id: &str, item: Value| {
        with_provider(
            record("t", ordinal, user(id, "")),
            json!({ "inputItem": item }),
        )
    };
    let records = [
        raw(
            1,
            "x1",
            json!({"type": "reasoning", "id": "rs_1", "summary": []}),
        ),
        raw(
            2,
            "x2",
            json!({"type": "reasoning", "id": "rs_1", "summary": []}),
        ),
        raw(
            3,
            "x3",
            json!({"type": "function_call_output", "call_id": "c", "output": "1"}),
        ),
        raw(
            4,
            "x4",
            json!({"type": "function_call_output", "call_id": "c", "output": "1"}),
        ),
    ];
    let prepared = prepare(&HistoryCursor::default(), &records);
    assert_eq!(
        types(&prepared.input),
        ["reasoning", "function_call_output"]
    );
}

#[test]
fn the_cursor_round_trips_through_json() {
    let cursor = HistoryCursor {
        previous_response_id: Some("resp_9".into()),
        through_ordinal: 42,
        unsent: vec![spool_core::llm::PartKey {
            item_id: "u".into(),
            part: 0,
        }],
        held_calls: vec!["call_1".into()],
    };
    let text = serde_json::to_string(&cursor).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"previousResponseId": "resp_9", "throughOrdinal": 42,
               "unsent": [{"itemId": "u", "part": 0}], "heldCalls": ["call_1"]})
    );
    assert_eq!(
        serde_json::from_str::<HistoryCursor>(&text).unwrap(),
        cursor
    );
}
