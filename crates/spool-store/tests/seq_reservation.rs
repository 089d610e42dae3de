//! Seqs handed out to deltas before their commit are reserved durably
//! first (`thread_state/reserve.rs`): while a thread streams, its committed
//! reservation runs ahead of its log so deltas are still answered at once;
//! once nothing streams, or the store closes, no reservation is left, so a
//! clean stop voids nothing. (Crashes: `tests/crash/`.)

mod common;

use std::time::Duration;

use common::*;
use spool_store::{Store, StoreOptions};

/// The committed reservation of a thread, read from the file.
fn reserved(dir: &std::path::Path, thread: &str) -> Option<u64> {
    raw(dir)
        .query_row(
            "SELECT upto FROM seq_reservations WHERE thread_id = ?1",
            [thread],
            |row| row.get::<_, i64>(0),
        )
        .ok()
        .map(|upto| upto as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_thread_reserves_ahead_and_releases_when_done() {
    let dir = tempfile::tempdir().unwrap();
    // No timed commit: a delta is committed only by what comes after it.
    let options = StoreOptions {
        delta_commit_delay: Duration::from_secs(3600),
        ..StoreOptions::default()
    };
    let store = open_with(dir.path(), options);
    let t = new_thread(&store, false).await;
    assert_eq!(reserved(dir.path(), &t), None, "nothing streams yet");

    start_message(&store, &t, "turn-1", "a1").await; // seqs 2, 3
    let upto = reserved(dir.path(), &t).expect("a reservation once a turn runs");
    assert!(upto >= 3 + 1000, "reserved ahead of the log: {upto}");

    // Deltas within the reservation are answered before any commit.
    let appended = tokio::time::timeout(
        Duration::from_secs(10),
        store.append(&t, vec![agent_delta(&t, "turn-1", "a1", "hi")]),
    )
    .await
    .expect("answered without waiting for a commit")
    .unwrap();
    assert_eq!(seqs(&appended), [4]);
    assert_eq!(committed_events(dir.path(), &t), 3, "not committed yet");

    store
        .append(
            &t,
            vec![
                completed(&t, "turn-1", agent_message("a1", "hi")),
                turn_completed(&t, "turn-1"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        reserved(dir.path(), &t),
        None,
        "released when nothing streams"
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_store_mid_turn_releases_the_reservation_and_voids_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = {
        let store = open(dir.path());
        let t = new_thread(&store, false).await;
        start_message(&store, &t, "turn-1", "a1").await;
        store
            .append(&t, vec![agent_delta(&t, "turn-1", "a1", "kept")])
            .await
            .unwrap();
        assert!(reserved(dir.path(), &t).is_some());
        store.close().await.unwrap();
        t
    };
    assert_eq!(
        reserved(dir.path(), &t),
        None,
        "a closed store reserves nothing"
    );

    // The next open recovers the turn left open; every seq it handed out
    // was committed, so no range is voided.
    let store = open(dir.path());
    let events = store.events_after(&t, 0, 100).await.unwrap();
    let methods: Vec<_> = events.iter().map(|e| e.payload.method()).collect();
    assert_eq!(
        methods,
        [
            "thread/started",
            "turn/started",
            "item/started",
            "item/agentMessage/delta",
            "item/completed",
            "turn/completed"
        ]
    );
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    store.close().await.unwrap();
}
