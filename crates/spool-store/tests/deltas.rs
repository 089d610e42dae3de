//! Deltas are acknowledged with their seq before they are durable, and are
//! durable after `flush`, after the next lifecycle event, and within the
//! configured delay.

mod common;

use std::time::{Duration, Instant};

use common::*;
use spool_core::View;
use spool_store::{Store, StoreOptions};

/// A delay no test waits out: only flushes and lifecycle events commit.
fn deltas_wait_for_a_lifecycle_event() -> StoreOptions {
    StoreOptions {
        delta_commit_delay: Duration::from_secs(3600),
        ..StoreOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_are_acknowledged_before_durable_and_durable_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), deltas_wait_for_a_lifecycle_event());
    let t = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    assert_eq!(committed_events(dir.path(), &t), 3);

    let appended = store
        .append(
            &t,
            vec![
                agent_delta(&t, "turn-1", "a1", "Hello"),
                agent_delta(&t, "turn-1", "a1", ", world"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![4, 5], "acknowledged with their seqs");
    assert_eq!(committed_events(dir.path(), &t), 3, "not yet durable");
    assert_eq!(store.events_after(&t, 3, 10).await.unwrap(), vec![]);

    store.flush().await.unwrap();
    assert_eq!(committed_events(dir.path(), &t), 5);
    let events = store.events_after(&t, 3, 10).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![4, 5]);
    // The projection was updated by the same commit.
    let items = store.items(&t, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("a1", "Hello, world"));
    assert_eq!(items[0].seq, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_lifecycle_event_commits_the_deltas_before_it() {
    let dir = tempfile::tempdir().unwrap();
    // Another handle stays open: the reopen below must not recover turns.
    let _keeper = keep_open(dir.path());
    let t = {
        let store = open_with(dir.path(), deltas_wait_for_a_lifecycle_event());
        let t = new_thread(&store, false).await;
        start_message(&store, &t, "turn-1", "a1").await;
        for word in ["one ", "two ", "three"] {
            store
                .append(&t, vec![agent_delta(&t, "turn-1", "a1", word)])
                .await
                .unwrap();
        }
        assert_eq!(committed_events(dir.path(), &t), 3);

        // A lifecycle event on another thread commits them too: one
        // transaction covers everything assigned before it.
        let other = new_thread(&store, false).await;
        assert_eq!(committed_events(dir.path(), &t), 6);

        store
            .append(&t, vec![agent_delta(&t, "turn-1", "a1", "!")])
            .await
            .unwrap();
        let appended = store
            .append(
                &t,
                vec![completed(
                    &t,
                    "turn-1",
                    agent_message("a1", "one two three!"),
                )],
            )
            .await
            .unwrap();
        assert_eq!(seqs(&appended), vec![8]);
        assert_eq!(committed_events(dir.path(), &t), 8);
        drop(other);
        t
    };
    // Reopened, the file has every delta and the completed item.
    let store = open(dir.path());
    let events = store.events_after(&t, 0, 100).await.unwrap();
    assert_eq!(events.len(), 8);
    assert_eq!(events.iter().filter(|e| e.payload.is_delta()).count(), 4);
    let items = store.items(&t, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("a1", "one two three!"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_store_commits_pending_deltas() {
    let dir = tempfile::tempdir().unwrap();
    // Another handle stays open: the reopen below must not recover turns.
    let _keeper = keep_open(dir.path());
    let t = {
        let store = open_with(dir.path(), deltas_wait_for_a_lifecycle_event());
        let t = new_thread(&store, false).await;
        store
            .append(
                &t,
                vec![
                    turn_started(&t, "turn-1"),
                    started(&t, "turn-1", agent_message("a1", "")),
                    agent_delta(&t, "turn-1", "a1", "partial"),
                ],
            )
            .await
            .unwrap();
        store
            .append(&t, vec![agent_delta(&t, "turn-1", "a1", " text")])
            .await
            .unwrap();
        assert_eq!(committed_events(dir.path(), &t), 4);
        t
    };
    assert_eq!(committed_events(dir.path(), &t), 5);
    let store = open(dir.path());
    let items = store.items(&t, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("a1", "partial text"));
    assert!(!items[0].envelope.status.is_terminal());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_alone_are_committed_within_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        delta_commit_delay: Duration::from_millis(20),
        ..StoreOptions::default()
    };
    let store = open_with(dir.path(), options);
    let t = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    store
        .append(&t, vec![agent_delta(&t, "turn-1", "a1", "tick")])
        .await
        .unwrap();
    // Nothing to await here: the commit is the writer's timer. Poll the
    // file, with a generous bound for slow machines.
    let started = Instant::now();
    while committed_events(dir.path(), &t) < 4 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the delta was never committed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `Store::items` reads an in-progress item's row and then the deltas
/// committed after it: both in one snapshot. Read in two, a completion
/// committed in between looked like a row that missed its own lifecycle
/// event ("corrupt row"). Items are completed while another task reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_read_while_items_complete_are_one_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    store
        .append(&thread, vec![turn_started(&thread, "turn-1")])
        .await
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (store, thread, done) = (store.clone(), thread.clone(), done.clone());
        tokio::spawn(async move {
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                store.items(&thread, View::All).await.unwrap();
                reads += 1;
            }
            reads
        })
    };
    for k in 0..300 {
        let id = format!("m{k}");
        store
            .append(
                &thread,
                vec![started(&thread, "turn-1", agent_message(&id, ""))],
            )
            .await
            .unwrap();
        store
            .append(&thread, vec![agent_delta(&thread, "turn-1", &id, "x")])
            .await
            .unwrap();
        store
            .append(
                &thread,
                vec![completed(&thread, "turn-1", agent_message(&id, "x"))],
            )
            .await
            .unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.await.unwrap();
    assert!(reads > 0);
    store.close().await.unwrap();
}
