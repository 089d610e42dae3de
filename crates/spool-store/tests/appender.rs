//! The pipelined appender: order, coalescing, outcomes, refusals, syncs,
//! and a store closed under it, on both backends.

mod common;

use std::time::Duration;

use common::backend::TestStore;
use common::*;
use spool_core::View;
use spool_protocol::ServerNotification;
use spool_store::{Appended, Appender, Store, StoreOptions};
use tokio::sync::mpsc;

on_every_backend!(
    pushes_keep_their_order_and_every_outcome_is_forwarded,
    a_refusal_stops_the_appender_and_stores_nothing_of_its_batch,
    a_sync_waits_for_the_lifecycle_events_pushed_before_it,
    appenders_of_many_threads_at_once_keep_each_threads_order with quick_commits,
    an_appender_on_a_closed_store_fails_instead_of_waiting,
);

/// Deltas committed every millisecond: SQLite's writer lends its
/// connection to the commit thread often, so appends meet it away.
fn quick_commits() -> StoreOptions {
    StoreOptions {
        delta_commit_delay: Duration::from_millis(1),
        ..StoreOptions::default()
    }
}

/// What has been forwarded so far.
fn forwarded(rx: &mut mpsc::UnboundedReceiver<Appended>) -> Vec<Appended> {
    let mut outcomes = Vec::new();
    while let Ok(a) = rx.try_recv() {
        outcomes.push(a);
    }
    outcomes
}

fn streamed_text(outcomes: &[Appended]) -> String {
    outcomes
        .iter()
        .filter_map(|a| match a.notification() {
            ServerNotification::AgentMessageDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

async fn pushes_keep_their_order_and_every_outcome_is_forwarded(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let appender = Appender::spawn(store.clone(), thread.clone(), tx);
    appender
        .push(vec![
            turn_started(&thread, "u1"),
            started(&thread, "u1", agent_message("m1", "")),
        ])
        .unwrap();
    let mut expected = String::new();
    for i in 0..2_000 {
        let word = format!("{i} ");
        expected.push_str(&word);
        appender
            .push(vec![agent_delta(&thread, "u1", "m1", &word)])
            .unwrap();
    }
    appender
        .push(vec![
            completed(&thread, "u1", agent_message("m1", &expected)),
            turn_completed(&thread, "u1"),
        ])
        .unwrap();
    appender.finish().await.unwrap();

    let outcomes = forwarded(&mut rx);
    // thread/started is seq 1; everything pushed follows, gap-free, in order.
    let seqs: Vec<u64> = outcomes.iter().filter_map(Appended::seq).collect();
    assert_eq!(seqs, (2..=2_005).collect::<Vec<u64>>());
    assert_eq!(streamed_text(&outcomes), expected);
    // Everything is committed once finish returned (the completion covers the deltas).
    let items = store.items(&thread, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("m1", &expected));
    assert_eq!(ts.committed_events(&thread), 2_005);
}

async fn a_refusal_stops_the_appender_and_stores_nothing_of_its_batch(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let appender = Appender::spawn(store.clone(), thread.clone(), tx);
    appender.push(vec![turn_started(&thread, "u1")]).unwrap();
    // A delta for an item that was never started: a protocol violation.
    appender
        .push(vec![agent_delta(&thread, "u1", "ghost", "boo")])
        .unwrap();
    // Pushed behind the refused one, before anyone looked: never stored,
    // whether the push already saw the appender stopped or not.
    for i in 0..50 {
        let _ = appender.push(vec![started(
            &thread,
            "u1",
            agent_message(&format!("m{i}"), ""),
        )]);
    }
    let err = appender.finish().await.unwrap_err();
    assert!(err.to_string().contains("ghost"), "{err}");
    store.flush().await.unwrap();
    let committed = ts.committed_events(&thread);
    assert!(
        committed <= 2,
        "at most thread/started and turn/started are stored, not the refused delta: {committed}"
    );
    assert!(store.items(&thread, View::All).await.unwrap().is_empty());
}

async fn a_sync_waits_for_the_lifecycle_events_pushed_before_it(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let appender = Appender::spawn(store.clone(), thread.clone(), tx);
    for round in 0..20u64 {
        let turn = format!("u{round}");
        let item = format!("m{round}");
        appender
            .push(vec![
                turn_started(&thread, &turn),
                started(&thread, &turn, agent_message(&item, "")),
            ])
            .unwrap();
        appender
            .push(vec![agent_delta(&thread, &turn, &item, "hi")])
            .unwrap();
        appender.sync().await.unwrap();
        // Everything pushed before the sync has been forwarded (with the
        // last round's completion), and its lifecycle events are
        // committed: a read sees the open item.
        let outcomes = forwarded(&mut rx);
        let last_seq = 1 + 5 * round + 3;
        let seqs: Vec<u64> = outcomes.iter().filter_map(Appended::seq).collect();
        assert_eq!(seqs.last(), Some(&last_seq), "round {round}: {outcomes:?}");
        assert_eq!(seqs.len(), if round == 0 { 3 } else { 5 });
        let items = store.items(&thread, View::All).await.unwrap();
        assert_eq!(items.last().unwrap().item.id(), item.as_str());
        appender
            .push(vec![
                completed(&thread, &turn, agent_message(&item, "hi")),
                turn_completed(&thread, &turn),
            ])
            .unwrap();
    }
    appender.finish().await.unwrap();
    assert_eq!(forwarded(&mut rx).len(), 2);
    // 20 rounds of five events after thread/started.
    assert_eq!(ts.committed_events(&thread), 101);
}

async fn appenders_of_many_threads_at_once_keep_each_threads_order(ts: TestStore) {
    let store = &ts.store;
    let mut streams = Vec::new();
    for _ in 0..8 {
        let thread = new_thread(store, false).await;
        let store = store.clone();
        streams.push(tokio::spawn(async move {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let appender = Appender::spawn(store.clone(), thread.clone(), tx);
            let mut expected = String::new();
            for turn in 0..3 {
                let (turn, item) = (format!("u{turn}"), format!("m{turn}"));
                appender
                    .push(vec![
                        turn_started(&thread, &turn),
                        started(&thread, &turn, agent_message(&item, "")),
                    ])
                    .unwrap();
                let mut text = String::new();
                for i in 0..300 {
                    let word = format!("{i} ");
                    text.push_str(&word);
                    appender
                        .push(vec![agent_delta(&thread, &turn, &item, &word)])
                        .unwrap();
                    if i % 50 == 0 {
                        // Let the others in, and the commits happen.
                        tokio::task::yield_now().await;
                    }
                }
                appender
                    .push(vec![
                        completed(&thread, &turn, agent_message(&item, &text)),
                        turn_completed(&thread, &turn),
                    ])
                    .unwrap();
                expected.push_str(&text);
            }
            appender.finish().await.unwrap();
            (thread, expected, forwarded(&mut rx))
        }));
    }
    for stream in streams {
        let (thread, expected, outcomes) = stream.await.unwrap();
        // Three turns of 304 events each after thread/started.
        let seqs: Vec<u64> = outcomes.iter().filter_map(Appended::seq).collect();
        assert_eq!(seqs, (2..=913).collect::<Vec<u64>>(), "{thread}");
        assert_eq!(streamed_text(&outcomes), expected, "{thread}");
        assert_eq!(ts.committed_events(&thread), 913, "{thread}");
    }
}

async fn an_appender_on_a_closed_store_fails_instead_of_waiting(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let appender = Appender::spawn(store.clone(), thread.clone(), tx);
    appender.push(vec![turn_started(&thread, "u1")]).unwrap();
    appender.sync().await.unwrap();
    store.close().await.unwrap();
    // The push may be taken (and fail later) or refused at once; either
    // way nothing waits for a writer that is gone.
    let _ = appender.push(vec![started(&thread, "u1", agent_message("m1", ""))]);
    let finished = tokio::time::timeout(Duration::from_secs(30), appender.finish()).await;
    let err = finished
        .expect("finish returns once the store is closed")
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
}
