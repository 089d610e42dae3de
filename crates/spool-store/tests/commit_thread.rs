//! Many threads streaming at once, with lifecycle events and refused
//! appends among their deltas: whether an append reaches the writer while
//! a `COMMIT` runs on the commit thread (and is taken at once, or kept for
//! when the connection is back) or not, every thread's log is exactly what
//! its appends were answered, in order, and survives a reopen.

mod common;

use common::*;
use spool_protocol::{ServerNotification, ThreadEvent};
use spool_store::{Appended, Store, StoreError};

const THREADS: usize = 24;
const DELTAS: usize = 120;

/// One thread's turn: a message streamed in appends of 1 to 4 deltas,
/// a user message born complete in the middle, a refused append that
/// mixes a good delta with a delta of the wrong kind, and the completions.
/// Returns every event the store answered as logged, in order, and the
/// message's text.
async fn stream(store: spool_store::SqliteStore, thread: String) -> (Vec<ThreadEvent>, String) {
    let mut logged = Vec::new();
    let mut keep = |appended: Vec<Appended>| {
        logged.extend(appended.into_iter().filter_map(|a| match a {
            Appended::Logged(event) => Some(event),
            Appended::Transient(_) => None,
        }));
    };
    let (t, m) = ("turn-1", "msg-1");
    keep(
        store
            .append(
                &thread,
                vec![
                    turn_started(&thread, t),
                    started(&thread, t, agent_message(m, "")),
                ],
            )
            .await
            .unwrap(),
    );
    let mut text = String::new();
    let mut sent = 0;
    let mut round = 0;
    while sent < DELTAS {
        round += 1;
        let n = (round % 4 + 1).min(DELTAS - sent);
        let words: Vec<String> = (sent..sent + n).map(|i| format!("w{i} ")).collect();
        let deltas = words
            .iter()
            .map(|word| agent_delta(&thread, t, m, word))
            .collect();
        keep(store.append(&thread, deltas).await.unwrap());
        text.extend(words);
        sent += n;
        if round == 10 {
            let user = format!("{thread}-user");
            keep(
                store
                    .append(
                        &thread,
                        vec![
                            started(&thread, t, user_message(&user, "hi")),
                            completed(&thread, t, user_message(&user, "hi")),
                        ],
                    )
                    .await
                    .unwrap(),
            );
        }
        if round == 20 {
            // The first delta fits, the second is a plan delta for an
            // agent message: all or nothing, so neither is stored.
            let refused = store
                .append(
                    &thread,
                    vec![
                        agent_delta(&thread, t, m, "never "),
                        ServerNotification::PlanDelta(spool_protocol::TextDeltaNotification {
                            thread_id: thread.clone(),
                            turn_id: t.to_owned(),
                            item_id: m.to_owned(),
                            delta: "wrong kind".to_owned(),
                        }),
                    ],
                )
                .await;
            assert!(
                matches!(refused, Err(StoreError::Refused { index: 1, .. })),
                "{refused:?}"
            );
        }
    }
    keep(
        store
            .append(
                &thread,
                vec![
                    completed(&thread, t, agent_message(m, &text)),
                    turn_completed(&thread, t),
                ],
            )
            .await
            .unwrap(),
    );
    (logged, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_log_exactly_what_was_answered() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mut threads = Vec::new();
    for _ in 0..THREADS {
        threads.push(new_thread(&store, false).await);
    }
    let tasks: Vec<_> = threads
        .iter()
        .map(|thread| tokio::spawn(stream(store.clone(), thread.clone())))
        .collect();
    let mut answered = Vec::new();
    for task in tasks {
        answered.push(task.await.unwrap());
    }
    store.close().await.unwrap();
    drop(store);

    let store = open(dir.path());
    for (thread, (logged, text)) in threads.iter().zip(&answered) {
        // thread/started is seq 1; everything after it is what the
        // appends were answered, seqs gap-free.
        let events = store.events_after(thread, 1, usize::MAX).await.unwrap();
        assert_eq!(&events, logged, "thread {thread}");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (2..2 + seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "thread {thread}");
        assert!(!text.contains("never"));
        let items = store.items(thread, spool_core::View::All).await.unwrap();
        let message = items.iter().find(|r| r.item.id() == "msg-1").unwrap();
        assert_eq!(message.item, agent_message("msg-1", text));
    }
    store.close().await.unwrap();
}
