//! `views::select`: which records each view holds.

mod views_support;

use serde_json::json;
use spool_core::View;
use spool_core::views::select;
use spool_protocol::{Audience, ThreadItem};
use views_support::{agent, record, user};

fn ids(records: &[&spool_core::ItemRecord]) -> Vec<String> {
    records.iter().map(|r| r.item.id().to_owned()).collect()
}

fn mixed_thread() -> Vec<spool_core::ItemRecord> {
    vec![
        record("t1", 1, user("u1", "hi")),
        record(
            "t1",
            2,
            ThreadItem::Context {
                id: "ctx".into(),
                text: "the user is on the free plan".into(),
            },
        ),
        record(
            "t1",
            3,
            ThreadItem::Status {
                id: "st".into(),
                text: "thinking".into(),
            },
        ),
        record(
            "t1",
            4,
            ThreadItem::Component {
                id: "card".into(),
                name: "Card".into(),
                props: json!({"title": "x"}),
            },
        ),
        record(
            "t1",
            5,
            ThreadItem::StepError {
                id: "se".into(),
                message: "retrying".into(),
            },
        ),
        record("t1", 6, agent("a1", "hello")),
    ]
}

#[test]
fn all_is_every_record_in_ordinal_order() {
    let mut records = mixed_thread();
    records.reverse();
    let all = select(&records, View::All);
    assert_eq!(ids(&all), ["u1", "ctx", "st", "card", "se", "a1"]);
}

#[test]
fn client_view_hides_context_and_status() {
    let records = mixed_thread();
    assert_eq!(
        ids(&select(&records, View::Client)),
        ["u1", "card", "se", "a1"]
    );
}

#[test]
fn client_view_hides_context_even_when_marked_for_the_client() {
    let mut records = mixed_thread();
    records[1].envelope.audience = Audience::BOTH;
    assert!(!ids(&select(&records, View::Client)).contains(&"ctx".to_owned()));
}

#[test]
fn the_envelope_audience_overrides_the_default() {
    let mut records = mixed_thread();
    // A producer hides a message from the UI and shows a component to the
    // model; the component still produces no model input, so it stays out.
    records[0].envelope.audience = Audience::LLM_ONLY;
    records[3].envelope.audience = Audience::BOTH;
    assert_eq!(ids(&select(&records, View::Client)), ["card", "se", "a1"]);
    assert_eq!(ids(&select(&records, View::Llm)), ["u1", "ctx", "a1"]);
}

#[test]
fn llm_view_records_hide_ui_items_and_start_at_the_latest_compaction() {
    let mut records = mixed_thread();
    assert_eq!(ids(&select(&records, View::Llm)), ["u1", "ctx", "a1"]);
    records.push(record(
        "t2",
        7,
        ThreadItem::ContextCompaction {
            id: "cc".into(),
            summary: Some("they said hi".into()),
            replaces: None,
        },
    ));
    records.push(record("t2", 8, user("u2", "again")));
    assert_eq!(ids(&select(&records, View::Llm)), ["cc", "u2"]);
}
