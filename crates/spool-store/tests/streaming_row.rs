//! A long streamed item: its row is not rewritten for every group commit of
//! its deltas (that would be quadratic in its length), yet every read sees
//! it exactly as the log reduces to, and a writer that reloads the thread
//! continues from the right content.

mod common;

use common::*;
use spool_core::View;
use spool_protocol::{ItemStatus, ThreadItem};
use spool_store::Store;

fn row_text_and_seq(dir: &std::path::Path, item_id: &str) -> (String, i64) {
    let raw = raw(dir);
    let (item, seq): (String, i64) = raw
        .query_row(
            "SELECT item, seq FROM items WHERE item_id = ?1",
            [item_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let item: ThreadItem = serde_json::from_str(&item).unwrap();
    let ThreadItem::AgentMessage { text, .. } = item else {
        panic!("not a message")
    };
    (text, seq)
}

#[tokio::test]
async fn open_items_are_read_through_the_log_and_rows_written_on_lifecycle_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    start_message(&store, &thread, "u1", "m1").await;
    let (_, started_seq) = row_text_and_seq(dir.path(), "m1");

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
        row_text_and_seq(dir.path(), "m1"),
        (String::new(), started_seq)
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

    // A second store on the file (the first stays open: nothing is
    // recovered) loads the open item with its content and goes on.
    let other = open(dir.path());
    other
        .append(&thread, vec![agent_delta(&thread, "u1", "m1", "tail")])
        .await
        .unwrap();
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
    let (text, _) = row_text_and_seq(dir.path(), "m1");
    assert_eq!(text, "final");
    drop(other);
    drop(store);
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
