//! A row that cannot be decoded is a clear error naming where it is: never
//! a panic, never silently skipped.

mod common;

use common::*;
use spool_core::View;
use spool_store::{Store, StoreError};

async fn thread_with_history(dir: &std::path::Path) -> String {
    let store = open(dir);
    let t = new_thread(&store, false).await;
    store
        .append(&t, vec![turn_started(&t, "turn-1")])
        .await
        .unwrap();
    store
        .append(&t, streamed_message(&t, "turn-1", "a1", "hello there"))
        .await
        .unwrap();
    store.close().await.unwrap();
    t
}

fn corrupt_row(error: &StoreError) -> &spool_store::CorruptRow {
    error
        .corrupt_row()
        .unwrap_or_else(|| panic!("expected a corrupt row error, got {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_event_payload_names_the_table_thread_and_seq() {
    let dir = tempfile::tempdir().unwrap();
    let t = thread_with_history(dir.path()).await;
    raw(dir.path())
        .execute(
            "UPDATE events SET payload = '{\"method\": \"item/started\", \"params\": {' \
             WHERE thread_id = ?1 AND seq = 3",
            [&t],
        )
        .unwrap();

    let store = open(dir.path());
    // Events before the corrupt one still read.
    assert_eq!(store.events_after(&t, 0, 2).await.unwrap().len(), 2);
    let error = store.events_after(&t, 0, 100).await.unwrap_err();
    let row = corrupt_row(&error);
    assert_eq!(row.table, "events");
    assert_eq!(row.thread_id, t);
    assert_eq!(row.seq, Some(3));
    assert_eq!(row.column, "payload");
    let message = error.to_string();
    assert!(message.contains("events"), "{message}");
    assert!(message.contains(&t), "{message}");
    assert!(message.contains("seq 3"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_item_names_the_thread_seq_and_item() {
    let dir = tempfile::tempdir().unwrap();
    let t = thread_with_history(dir.path()).await;
    raw(dir.path())
        .execute(
            "UPDATE items SET item = 'not json' WHERE thread_id = ?1 AND item_id = 'a1'",
            [&t],
        )
        .unwrap();

    let store = open(dir.path());
    let error = store.items(&t, View::All).await.unwrap_err();
    let row = corrupt_row(&error);
    assert_eq!(row.table, "items");
    assert_eq!(row.thread_id, t);
    assert_eq!(row.item_id.as_deref(), Some("a1"));
    assert!(row.seq.is_some());
    let message = error.to_string();
    assert!(message.contains("item a1"), "{message}");
    assert!(
        message.contains(&format!("seq {}", row.seq.unwrap())),
        "{message}"
    );

    // The reducer view reads the same rows and fails the same way.
    let error = store.reducer(&t).await.unwrap_err();
    assert_eq!(corrupt_row(&error).item_id.as_deref(), Some("a1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_open_item_stops_appends_to_its_thread_with_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    let other = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    store.close().await.unwrap();
    drop(store);
    raw(dir.path())
        .execute(
            "UPDATE items SET envelope = '[]' WHERE thread_id = ?1 AND item_id = 'a1'",
            [&t],
        )
        .unwrap();

    // The writer loads open items to validate appends: it reports the row.
    let store = open(dir.path());
    let error = store
        .append(&t, vec![agent_delta(&t, "turn-1", "a1", "x")])
        .await
        .unwrap_err();
    let row = corrupt_row(&error);
    assert_eq!((row.table, row.column), ("items", "envelope"));
    // Other threads are unaffected.
    store
        .append(&other, vec![turn_started(&other, "turn-1")])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_turn_status_names_the_turn_row() {
    let dir = tempfile::tempdir().unwrap();
    let t = thread_with_history(dir.path()).await;
    raw(dir.path())
        .execute(
            "UPDATE items SET status = 'sideways' WHERE thread_id = ?1 AND is_turn = 1",
            [&t],
        )
        .unwrap();
    let store = open(dir.path());
    let error = store.turns(&t).await.unwrap_err();
    let row = corrupt_row(&error);
    assert_eq!((row.table, row.column), ("items", "status"));
    assert_eq!(row.seq, Some(2));
    assert!(error.to_string().contains("sideways"), "{error}");
}
