//! The envelope of an item a Session API caller adds is the one filing
//! gives it (completed when added, by the agent and for the audience its
//! kind names, its raw item as its only provider data): its row stores the
//! time alone, and reads build the envelope again. An envelope that says
//! anything more is stored as JSON; a time that is not one, or a time
//! without the raw item it is built with, is a corrupt row.

mod common;

use common::backend::TestStore;
use common::*;
use serde_json::{Value, json};
use spool_core::View;
use spool_store::{AnyStore, Session, SqliteStore, Store, StoreError};

/// `(envelope, input_item)` of every item row of `thread`, in order.
fn envelope_columns(dir: &std::path::Path, thread: &str) -> Vec<(String, Option<String>)> {
    let conn = raw(dir);
    let mut statement = conn
        .prepare(
            "SELECT envelope, input_item FROM items WHERE thread_id = ?1 AND NOT is_turn \
             ORDER BY ordinal",
        )
        .unwrap();
    statement
        .query_map([thread], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_items_envelope_is_stored_as_its_time_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let session: Session<SqliteStore> = Session::open(store.clone(), "s1").await.unwrap();
    let user = json!({"role": "user", "content": "Where is the log?"});
    let output = json!({"type": "function_call_output", "call_id": "c1", "output": "3 rows"});
    session
        .add_items(vec![user.clone(), output.clone()])
        .await
        .unwrap();
    store.close().await.unwrap();

    let columns = envelope_columns(dir.path(), "s1");
    assert_eq!(columns.len(), 2);
    let at_ms: i64 = columns[0].0.parse().expect("the envelope column is a time");
    assert_eq!(columns[1].0, columns[0].0, "one call, one time");
    assert!(at_ms > 1_700_000_000_000, "a unix time in ms, got {at_ms}");

    // What the envelopes are, written out here rather than computed by the
    // store's rule: a user message is the user's and seen by both; a tool
    // output is a component, unnamed agent, seen by both.
    let expected = [
        json!({"status": "completed", "startedAtMs": at_ms, "completedAtMs": at_ms,
            "provenance": {"agent": "user", "phase": "main"},
            "audience": {"client": true, "llm": true},
            "providerData": {"inputItem": user}}),
        json!({"status": "completed", "startedAtMs": at_ms, "completedAtMs": at_ms,
            "provenance": {"agent": "", "phase": "main"},
            "audience": {"client": true, "llm": true},
            "providerData": {"inputItem": output}}),
    ];
    let store = open(dir.path());
    let records = store.items("s1", View::All).await.unwrap();
    let envelopes: Vec<Value> = records
        .iter()
        .map(|record| serde_json::to_value(&record.envelope).unwrap())
        .collect();
    assert_eq!(envelopes, expected);
    let session: Session<SqliteStore> = Session::open(store.clone(), "s1").await.unwrap();
    assert_eq!(session.get_items(None).await.unwrap(), vec![user, output]);
    store.close().await.unwrap();
}

on_every_backend!(every_backend_reads_a_session_items_envelope_back_whole);

/// What the rows of either backend give back for a session item's
/// envelope: completed when added, by the agent and for the audience its
/// kind names (written out here), its raw item as its provider data.
async fn every_backend_reads_a_session_items_envelope_back_whole(ts: TestStore) {
    let store = &ts.store;
    let session: Session<AnyStore> = Session::open(store.clone(), "s1").await.unwrap();
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": []});
    session.add_items(vec![reasoning.clone()]).await.unwrap();
    let records = store.items("s1", View::All).await.unwrap();
    assert_eq!(records.len(), 1);
    let at_ms = records[0].envelope.started_at_ms;
    let expected = json!({"status": "completed", "startedAtMs": at_ms, "completedAtMs": at_ms,
        "provenance": {"agent": "", "phase": "main"},
        "audience": {"client": true, "llm": true},
        "providerData": {"inputItem": reasoning}});
    assert_eq!(
        serde_json::to_value(&records[0].envelope).unwrap(),
        expected
    );
    assert!(at_ms > 1_700_000_000_000, "a unix time in ms, got {at_ms}");
}

/// An envelope that says more than the rule (here: completed 3 ms after
/// it started, and provider data beside the raw item) keeps its JSON, and
/// reads back as appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_that_says_more_is_stored_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    let raw_item = json!({"role": "user", "content": "hi"});
    let cases = [
        ("i1", json!({ "inputItem": raw_item })),
        (
            "i2",
            json!({ "inputItem": raw_item, "responseId": "resp_1" }),
        ),
    ];
    let mut appended = vec![turn_started(&t, "u1")];
    for (id, data) in &cases {
        appended.extend(born(&t, "u1", user_message(id, "hi"), Some(data.clone())));
    }
    appended.push(turn_completed(&t, "u1"));
    let events = store.append(&t, appended).await.unwrap();
    let sent: Vec<Value> = events
        .iter()
        .filter_map(|appended| match appended.notification() {
            spool_protocol::ServerNotification::ItemCompleted(n) => {
                Some(serde_json::to_value(n.envelope.as_ref().unwrap()).unwrap())
            }
            _ => None,
        })
        .collect();
    store.close().await.unwrap();

    for (envelope, _) in envelope_columns(dir.path(), &t) {
        assert!(envelope.starts_with('{'), "stored as JSON: {envelope}");
    }
    let store = open(dir.path());
    let read: Vec<Value> = store
        .items(&t, View::All)
        .await
        .unwrap()
        .iter()
        .map(|record| serde_json::to_value(&record.envelope).unwrap())
        .collect();
    assert_eq!(read, sent);
}

/// A row whose envelope is neither JSON nor a time, or a time without the
/// raw item it is built with, is corrupt, and the read names the column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_that_is_no_time_or_lacks_its_raw_item_is_a_corrupt_row() {
    let damages = [
        (
            "UPDATE items SET envelope = '17x'",
            "neither JSON nor a time",
        ),
        ("UPDATE items SET envelope = ''", "neither JSON nor a time"),
        (
            "UPDATE items SET input_item = NULL, item = '{\"type\":\"userMessage\",\"id\":' || json_quote(item_id) || ',\"content\":[]}'",
            "no raw input item",
        ),
    ];
    for (damage, cause) in damages {
        let dir = tempfile::tempdir().unwrap();
        one_session_item(dir.path()).await;
        raw(dir.path()).execute(damage, []).unwrap();

        let store = keep_open(dir.path());
        match store.items("s1", View::All).await {
            Err(StoreError::CorruptRow(row)) => {
                assert_eq!((row.table, row.column), ("items", "envelope"), "{damage}");
                assert!(
                    row.cause.to_string().contains(cause),
                    "{damage}: {}",
                    row.cause
                );
            }
            other => panic!("{damage}: expected a corrupt row, got {other:?}"),
        }
    }
}
