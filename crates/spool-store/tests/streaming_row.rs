//! A long streamed item: its row is not rewritten for every group commit of
//! its deltas (that would be quadratic in its length), yet every read sees
//! it exactly as the log reduces to, and a writer that reloads the thread
//! continues from the right content.

mod common;

use common::backend::{TestStore, quote};
use common::*;
use spool_core::View;
use spool_protocol::ItemStatus;
use spool_store::Store;

/// The stored row of `item_id`: its seq, and whether its text is empty.
fn row_seq_and_empty(ts: &TestStore, item_id: &str) -> (i64, bool) {
    let of = format!("FROM items WHERE item_id = {}", quote(item_id));
    let seq = ts.count(&format!("SELECT seq {of}"));
    let empty = ts.count(&format!(
        "SELECT CASE WHEN item LIKE '%\"text\":\"\"%' THEN 1 ELSE 0 END {of}"
    ));
    (seq, empty == 1)
}

/// The stored row's text of a terminal agent message.
fn row_has_text(ts: &TestStore, item_id: &str, text: &str) -> bool {
    let sql = format!(
        "SELECT count(*) FROM items WHERE item_id = {} AND item LIKE {}",
        quote(item_id),
        quote(&format!("%\"text\":\"{text}\"%"))
    );
    ts.count(&sql) == 1
}

on_every_backend!(open_items_are_read_through_the_log_and_rows_written_on_lifecycle_only);

async fn open_items_are_read_through_the_log_and_rows_written_on_lifecycle_only(ts: TestStore) {
    let store = ts.store.clone();
    let thread = new_thread(&store, false).await;
    start_message(&store, &thread, "u1", "m1").await;
    let (started_seq, empty) = row_seq_and_empty(&ts, "m1");
    assert!(empty, "{}: the started row holds no text", ts.backend());

    let mut expected = String::new();
    for round in 0..20 {
        for i in 0..50 {
            let word = format!("w{round}.{i} ");
            expected.push_str(&word);
            store
                .append(&thread, vec![agent_delta(&thread, "u1", "m1", &word)])
                .await
                .unwrap();
        }
        // Each flush is a group commit covering the deltas so far.
        store.flush().await.unwrap();
    }

    // The row was written once, at item/started, and never for the deltas.
    assert_eq!(
        row_seq_and_empty(&ts, "m1"),
        (started_seq, true),
        "{}",
        ts.backend()
    );
    // Reads see the item as the log reduces to.
    let items = store.items(&thread, View::All).await.unwrap();
    let m1 = items.iter().find(|r| r.item.id() == "m1").unwrap();
    assert_eq!(m1.item, agent_message("m1", &expected));
    assert_eq!(m1.envelope.status, ItemStatus::InProgress);
    let reducer = store.reducer(&thread).await.unwrap();
    assert_eq!(
        reducer.item("m1").unwrap().item,
        agent_message("m1", &expected)
    );
    assert_eq!(
        m1.seq,
        reducer.last_seq(),
        "the caught-up seq is the last delta's"
    );
    // Closed and opened again, as a restart or another server does: the
    // open item is read through the log with its content.
    store.close().await.unwrap();
    let other = ts.reopen(Default::default()).await;
    let items = other.items(&thread, View::All).await.unwrap();
    let m1 = items.iter().find(|r| r.item.id() == "m1").unwrap();
    assert_eq!(m1.envelope.status, ItemStatus::InProgress);
    assert_eq!(m1.item, agent_message("m1", &expected));

    // Its writer loads the item with that content: on SQLite it goes on
    // streaming into it; on PostgreSQL its first write takes the thread
    // over, which ends the item incomplete, the row holding the whole text.
    let tail = other
        .append(&thread, vec![agent_delta(&thread, "u1", "m1", "tail")])
        .await;
    match ts.backend() {
        "sqlite" => {
            tail.unwrap();
            expected.push_str("tail");
            other.flush().await.unwrap(); // reads see committed events only
            let reloaded = other.reducer(&thread).await.unwrap();
            assert_eq!(
                reloaded.item("m1").unwrap().item,
                agent_message("m1", &expected)
            );
            // Completion writes the row, authoritative.
            other
                .append(
                    &thread,
                    vec![completed(&thread, "u1", agent_message("m1", "final"))],
                )
                .await
                .unwrap();
            assert!(row_has_text(&ts, "m1", "final"));
        }
        _ => {
            assert!(tail.is_err(), "the item was ended by the takeover");
            other.flush().await.unwrap();
            let items = other.items(&thread, View::All).await.unwrap();
            let m1 = items.iter().find(|r| r.item.id() == "m1").unwrap();
            assert_eq!(m1.envelope.status, ItemStatus::Incomplete);
            assert_eq!(m1.item, agent_message("m1", &expected));
            assert!(row_has_text(&ts, "m1", &expected));
        }
    }
}

#[tokio::test]
async fn a_crash_mid_stream_keeps_every_committed_delta() {
    let dir = tempfile::tempdir().unwrap();
    let thread;
    {
        let store = open(dir.path());
        thread = new_thread(&store, false).await;
        start_message(&store, &thread, "u1", "m1").await;
        for word in ["a", "b", "c"] {
            store
                .append(&thread, vec![agent_delta(&thread, "u1", "m1", word)])
                .await
                .unwrap();
        }
        store.flush().await.unwrap();
    }
    // A lone reopen recovers the turn: the item ends incomplete with the
    // text the deltas committed.
    let store = open(dir.path());
    let items = store.items(&thread, View::All).await.unwrap();
    let m1 = items.iter().find(|r| r.item.id() == "m1").unwrap();
    assert_eq!(m1.envelope.status, ItemStatus::Incomplete);
    assert_eq!(m1.item, agent_message("m1", "abc"));
}
