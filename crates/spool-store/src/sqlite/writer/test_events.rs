//! The events the writer's tests append: a turn with one agent message,
//! streamed and completed, on a real store.

use std::path::Path;
use std::time::Duration;

use spool_protocol::{
    ItemCompletedNotification, ItemStartedNotification, ServerNotification, TextDeltaNotification,
    ThreadItem, Turn, TurnCompletedNotification, TurnStartedNotification, TurnStatus,
};

use crate::options::StoreOptions;
use crate::types::NewThread;
use crate::{Appended, SqliteStore, Store, StoreError};

/// Longer than any answer that does not wait for what a test holds takes.
pub(super) const PATIENCE: Duration = Duration::from_secs(20);

fn turn(id: &str, status: TurnStatus) -> Turn {
    Turn::new(id.to_owned(), status)
}

fn message(text: &str) -> ThreadItem {
    ThreadItem::AgentMessage {
        delivery: Default::default(),
        memory_citation: Default::default(),
        questions: Default::default(),
        id: "m".to_owned(),
        text: text.to_owned(),
        phase: None,
    }
}

pub(super) fn start(thread: &str) -> Vec<ServerNotification> {
    vec![
        ServerNotification::TurnStarted(TurnStartedNotification {
            thread_id: thread.to_owned(),
            turn: turn("u", TurnStatus::InProgress),
        }),
        ServerNotification::ItemStarted(ItemStartedNotification {
            started_at_ms: 0,
            item: message(""),
            thread_id: thread.to_owned(),
            turn_id: "u".to_owned(),
            envelope: None,
        }),
    ]
}

pub(super) fn delta(thread: &str, text: &str) -> Vec<ServerNotification> {
    vec![ServerNotification::AgentMessageDelta(
        TextDeltaNotification {
            thread_id: thread.to_owned(),
            turn_id: "u".to_owned(),
            item_id: "m".to_owned(),
            delta: text.to_owned(),
        },
    )]
}

pub(super) fn complete(thread: &str, text: &str) -> Vec<ServerNotification> {
    vec![ServerNotification::ItemCompleted(
        ItemCompletedNotification {
            completed_at_ms: 0,
            item: message(text),
            thread_id: thread.to_owned(),
            turn_id: "u".to_owned(),
            envelope: None,
        },
    )]
}

pub(super) fn end_turn(thread: &str) -> Vec<ServerNotification> {
    vec![ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: thread.to_owned(),
            turn: turn("u", TurnStatus::Completed),
        },
    )]
}

pub(super) async fn append(
    store: &SqliteStore,
    thread: &str,
    events: Vec<ServerNotification>,
) -> Result<Vec<Appended>, StoreError> {
    store.append(thread, events).await
}

/// A store on a file in `dir` whose deltas stay in their batch until
/// something else commits it, with `count` threads created.
pub(super) async fn store_with_threads(dir: &Path, count: usize) -> (SqliteStore, Vec<String>) {
    let options = StoreOptions {
        delta_commit_delay: Duration::from_secs(600),
        ..StoreOptions::default()
    };
    let store = SqliteStore::open(dir.join("spool.db"), options).unwrap();
    let mut threads = Vec::new();
    for _ in 0..count {
        let record = store
            .create_thread(NewThread::new("openai", "/w"))
            .await
            .unwrap();
        threads.push(record.thread.id);
    }
    (store, threads)
}

/// Closes `store`, reopens its file, and checks that each thread's log
/// holds exactly what its appends were answered, in order, seqs gap-free.
pub(super) async fn check_logs(
    store: SqliteStore,
    dir: &Path,
    answered: &[(&String, &Vec<Appended>)],
) {
    store.close().await.unwrap();
    drop(store);
    let store = SqliteStore::open(dir.join("spool.db"), StoreOptions::default()).unwrap();
    for (thread, answered) in answered {
        let logged: Vec<_> = answered.iter().filter_map(|a| a.event().cloned()).collect();
        let events = store.events_after(thread, 1, usize::MAX).await.unwrap();
        assert_eq!(events, logged, "thread {thread}");
        let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, (2..2 + seqs.len() as u64).collect::<Vec<_>>());
    }
    store.close().await.unwrap();
}
