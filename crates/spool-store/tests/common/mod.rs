//! Builders shared by the store tests: stores in temp dirs and the
//! notifications of a turn.

#![allow(dead_code)] // each test binary uses a different subset

pub mod backend;

use std::path::{Path, PathBuf};

use spool_protocol::{
    Audience, ItemCompletedNotification, ItemEnvelope, ItemStartedNotification, ItemStatus,
    ServerNotification, TextDeltaNotification, ThreadEvent, ThreadItem, Turn,
    TurnCompletedNotification, TurnStartedNotification, TurnStatus, UserInput,
};
use spool_store::{NewThread, SqliteStore, Store, StoreOptions};

pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("spool.db")
}

pub fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(db_path(dir), StoreOptions::default()).expect("open store")
}

/// A handle held open across a test's reopen, so that the reopen is not
/// the only handle on the file and recovers nothing (crash recovery runs
/// only for an opener that is alone, see `recovery.rs`). For tests of what
/// a reopen keeps, such as turns still in progress; recovery has its own.
pub fn keep_open(dir: &Path) -> SqliteStore {
    open(dir)
}

pub fn open_with(dir: &Path, options: StoreOptions) -> SqliteStore {
    SqliteStore::open(db_path(dir), options).expect("open store")
}

/// A raw connection to the file, outside the store: it sees only what is
/// committed.
pub fn raw(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db_path(dir)).expect("raw connection")
}

/// A store at `dir` holding one session, `s1`, with one user message added
/// through the Session API, closed: ready for a test to damage its rows.
pub async fn one_session_item(dir: &Path) {
    let store = open(dir);
    let session = spool_store::Session::open(store.clone(), "s1")
        .await
        .unwrap();
    session
        .add_items(vec![serde_json::json!({"role": "user", "content": "hi"})])
        .await
        .unwrap();
    drop(session);
    store.close().await.unwrap();
}

/// Committed events of a thread, counted by a raw connection (a row of an
/// item born complete, with its body or without, stands for its start and
/// its completion).
pub fn committed_events(dir: &Path, thread_id: &str) -> u64 {
    let count: i64 = raw(dir)
        .query_row(
            "SELECT coalesce(sum(CASE WHEN method IN ('item/recorded', 'item/projected') \
             THEN 2 ELSE 1 END), 0) \
             FROM events WHERE thread_id = ?1",
            [thread_id],
            |row| row.get(0),
        )
        .expect("count events");
    count as u64
}

pub async fn new_thread(store: &impl Store, dev_mode: bool) -> String {
    let new = NewThread {
        dev_mode,
        ..NewThread::new("openai", "/work")
    };
    store
        .create_thread(new)
        .await
        .expect("create thread")
        .thread
        .id
}

pub fn turn_started(thread: &str, turn: &str) -> ServerNotification {
    ServerNotification::TurnStarted(TurnStartedNotification {
        thread_id: thread.to_owned(),
        turn: turn_value(turn, TurnStatus::InProgress),
    })
}

pub fn turn_completed(thread: &str, turn: &str) -> ServerNotification {
    ServerNotification::TurnCompleted(TurnCompletedNotification {
        thread_id: thread.to_owned(),
        turn: turn_value(turn, TurnStatus::Completed),
    })
}

fn turn_value(id: &str, status: TurnStatus) -> Turn {
    Turn {
        items_view: Default::default(),
        id: id.to_owned(),
        items: Vec::new(),
        status,
        error: None,
        started_at: None,
        completed_at: None,
        duration_ms: None,
        token_usage: None,
    }
}

pub fn started(thread: &str, turn: &str, item: ThreadItem) -> ServerNotification {
    ServerNotification::ItemStarted(ItemStartedNotification {
        started_at_ms: Default::default(),
        item,
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        envelope: None,
    })
}

pub fn completed(thread: &str, turn: &str, item: ThreadItem) -> ServerNotification {
    ServerNotification::ItemCompleted(ItemCompletedNotification {
        completed_at_ms: Default::default(),
        item,
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        envelope: None,
    })
}

/// An item's start and completion as the Session API writes them: the
/// same item, the provider's data on the completion only.
pub fn born(
    thread: &str,
    turn: &str,
    item: ThreadItem,
    data: Option<serde_json::Value>,
) -> [ServerNotification; 2] {
    let envelope = ItemEnvelope::started("user", Audience::BOTH, 1_700_000_000_000);
    let started = ServerNotification::ItemStarted(ItemStartedNotification {
        item: item.clone(),
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        started_at_ms: envelope.started_at_ms,
        envelope: Some(envelope.clone()),
    });
    let completed = ServerNotification::ItemCompleted(ItemCompletedNotification {
        item,
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        completed_at_ms: envelope.started_at_ms + 3,
        envelope: Some(ItemEnvelope {
            status: ItemStatus::Completed,
            completed_at_ms: Some(envelope.started_at_ms + 3),
            provider_data: data.map(Into::into),
            ..envelope
        }),
    });
    [started, completed]
}

pub fn agent_message(id: &str, text: &str) -> ThreadItem {
    ThreadItem::AgentMessage {
        delivery: Default::default(),
        memory_citation: Default::default(),
        questions: Default::default(),
        id: id.to_owned(),
        text: text.to_owned(),
        phase: None,
    }
}

pub fn user_message(id: &str, text: &str) -> ThreadItem {
    ThreadItem::UserMessage {
        client_id: Default::default(),
        id: id.to_owned(),
        content: vec![UserInput::text(text)],
    }
}

pub fn status_item(id: &str, text: &str) -> ThreadItem {
    ThreadItem::Status {
        id: id.to_owned(),
        text: text.to_owned(),
    }
}

pub fn state_change(id: &str) -> ThreadItem {
    ThreadItem::StateChange {
        id: id.to_owned(),
        key: "counter".to_owned(),
        value: serde_json::json!(1),
    }
}

/// Starts turn `turn` and an empty agent message `item` in it, durably.
pub async fn start_message(store: &impl Store, thread: &str, turn: &str, item: &str) {
    spool_store::Store::append(
        store,
        thread,
        vec![
            turn_started(thread, turn),
            started(thread, turn, agent_message(item, "")),
        ],
    )
    .await
    .expect("start a turn and a message");
}

pub fn agent_delta(thread: &str, turn: &str, item: &str, delta: &str) -> ServerNotification {
    ServerNotification::AgentMessageDelta(TextDeltaNotification {
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        item_id: item.to_owned(),
        delta: delta.to_owned(),
    })
}

/// A whole agent message: started, one delta per word, completed.
pub fn streamed_message(
    thread: &str,
    turn: &str,
    item: &str,
    text: &str,
) -> Vec<ServerNotification> {
    let mut events = vec![started(thread, turn, agent_message(item, ""))];
    for word in text.split_inclusive(' ') {
        events.push(agent_delta(thread, turn, item, word));
    }
    events.push(completed(thread, turn, agent_message(item, text)));
    events
}

/// The seqs of what an append stored.
pub fn seqs(appended: &[spool_store::Appended]) -> Vec<u64> {
    appended.iter().filter_map(|a| a.seq()).collect()
}

/// Every read of the log from every cursor, in pages of every small size,
/// gives exactly the events after that cursor.
pub async fn assert_reads_back(store: &impl Store, thread: &str, all: &[ThreadEvent]) {
    let whole = store.events_after(thread, 0, 10_000).await.unwrap();
    for (got, appended) in whole.iter().zip(all) {
        assert_eq!(got, appended, "seq {}", appended.seq);
    }
    assert_eq!(
        whole
            .iter()
            .map(|e| (e.seq, e.payload.method()))
            .collect::<Vec<_>>(),
        all.iter()
            .map(|e| (e.seq, e.payload.method()))
            .collect::<Vec<_>>()
    );
    for after in 0..all.len() as u64 {
        let expected: Vec<_> = all.iter().filter(|e| e.seq > after).cloned().collect();
        for limit in 1..=3 {
            let mut got = Vec::new();
            let mut cursor = after;
            loop {
                let page = store.events_after(thread, cursor, limit).await.unwrap();
                assert!(
                    page.len() <= limit,
                    "a page of {} for limit {limit}",
                    page.len()
                );
                let Some(last) = page.last() else { break };
                cursor = last.seq;
                got.extend(page);
            }
            assert_eq!(got, expected, "after {after}, pages of {limit}");
        }
    }
}

/// The events an append handed back, each stored.
pub fn logged(appended: Vec<spool_store::Appended>) -> Vec<ThreadEvent> {
    appended
        .into_iter()
        .map(|a| a.event().cloned().expect("stored"))
        .collect()
}
