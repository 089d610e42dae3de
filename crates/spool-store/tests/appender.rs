//! The pipelined appender: order, coalescing, outcomes, refusals.

mod common;

use common::*;
use spool_core::View;
use spool_protocol::ServerNotification;
use spool_store::{Appended, Appender, Store};
use tokio::sync::mpsc;

#[tokio::test]
async fn pushes_keep_their_order_and_every_outcome_is_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
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

    let mut outcomes = Vec::new();
    while let Ok(a) = rx.try_recv() {
        outcomes.push(a);
    }
    // thread/started is seq 1; everything pushed follows, gap-free, in order.
    let seqs: Vec<u64> = outcomes.iter().filter_map(Appended::seq).collect();
    assert_eq!(seqs, (2..=2_005).collect::<Vec<u64>>());
    let streamed: String = outcomes
        .iter()
        .filter_map(|a| match a.notification() {
            ServerNotification::AgentMessageDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, expected);
    // Everything is committed once finish returned (the completion covers the deltas).
    let items = store.items(&thread, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("m1", &expected));
    assert_eq!(committed_events(dir.path(), &thread), 2_005);
}

#[tokio::test]
async fn a_refusal_stops_the_appender_and_stores_nothing_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let appender = Appender::spawn(store.clone(), thread.clone(), tx);
    appender.push(vec![turn_started(&thread, "u1")]).unwrap();
    // A delta for an item that was never started: a protocol violation.
    appender
        .push(vec![agent_delta(&thread, "u1", "ghost", "boo")])
        .unwrap();
    let err = appender.finish().await.unwrap_err();
    assert!(err.to_string().contains("ghost"), "{err}");
    store.flush().await.unwrap();
    let committed = committed_events(dir.path(), &thread);
    assert!(
        committed <= 2,
        "at most thread/started and turn/started are stored, not the refused delta: {committed}"
    );
}
