//! The writer's thread state and batch on a real file, below the channel:
//! what one batch that holds several appends writes. (Which appends share
//! a batch depends on timing through the channel; here it is fixed.)

use spool_protocol::{
    Audience, ItemCompletedNotification, ItemEnvelope, ItemRemovedNotification,
    ItemStartedNotification, ItemStatus, ServerNotification, ThreadEvent, ThreadItem, Turn,
    TurnStartedNotification, TurnStatus, UserInput,
};

use super::{Threads, batch};
use crate::options::StoreOptions;
use crate::sqlite::reads::read_events_after;
use crate::sqlite::schema;
use crate::thread_state::ThreadState;
use crate::thread_state::prepare::{new_thread_record, prepare_append};
use crate::types::NewThread;

fn born(thread: &str, turn: &str, id: &str) -> [ServerNotification; 2] {
    let item = ThreadItem::UserMessage {
        client_id: None,
        id: id.to_owned(),
        content: vec![UserInput::text("hello")],
    };
    let envelope = ItemEnvelope::started("user", Audience::BOTH, 1_700_000_000_000);
    let completed = ItemCompletedNotification {
        item: item.clone(),
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        completed_at_ms: envelope.started_at_ms,
        envelope: Some(ItemEnvelope {
            status: ItemStatus::Completed,
            completed_at_ms: Some(envelope.started_at_ms),
            ..envelope.clone()
        }),
    };
    let started = ItemStartedNotification {
        item,
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        started_at_ms: envelope.started_at_ms,
        envelope: Some(envelope),
    };
    [
        ServerNotification::ItemStarted(started),
        ServerNotification::ItemCompleted(completed),
    ]
}

fn turn_started(thread: &str, turn: &str) -> ServerNotification {
    ServerNotification::TurnStarted(TurnStartedNotification {
        thread_id: thread.to_owned(),
        turn: Turn::new(turn.to_owned(), TurnStatus::InProgress),
    })
}

/// An item recorded by one append and removed by the next, both in one
/// batch: when the batch is written the item has no row, so its log row
/// keeps its body (`item/recorded`), and reads give back the appended
/// events. A second item, kept, leaves its body to its row.
#[test]
fn an_item_removed_later_in_its_batch_keeps_its_body_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open_writer(&dir.path().join("spool.db"), &StoreOptions::default()).unwrap();
    let (record, started_json, at_ms) = new_thread_record(NewThread::new("openai", "/w")).unwrap();
    let t = record.thread.id.clone();
    let mut threads = Threads::default();
    threads.insert(t.clone(), ThreadState::created(record, started_json, at_ms));
    let state = threads.get_mut(&t).unwrap();

    let mut first = vec![turn_started(&t, "u1")];
    first.extend(born(&t, "u1", "gone"));
    first.extend(born(&t, "u1", "kept"));
    let removal = ServerNotification::ItemRemoved(ItemRemovedNotification {
        thread_id: t.clone(),
        turn_id: "u1".to_owned(),
        item_id: "gone".to_owned(),
    });
    let mut appended: Vec<ThreadEvent> = Vec::new();
    for notifications in [first, vec![removal]] {
        let incoming = prepare_append(&t, notifications).unwrap();
        match state.append(Some(&conn), &t, incoming, at_ms, true) {
            Ok(accepted) => appended.extend(
                accepted
                    .appended
                    .into_iter()
                    .filter_map(|a| a.event().cloned()),
            ),
            Err(refusal) => panic!("refused: {}", refusal.error),
        }
    }
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    batch::write_thread(&conn, &t, threads.get_mut(&t).unwrap()).unwrap();
    conn.execute_batch("COMMIT").unwrap();

    let rows: Vec<(i64, String, i64)> = conn
        .prepare(
            "SELECT seq, method, length(payload) FROM events WHERE thread_id = ?1 ORDER BY seq",
        )
        .unwrap()
        .query_map([&t], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let methods: Vec<(i64, &str)> = rows.iter().map(|(s, m, _)| (*s, m.as_str())).collect();
    assert_eq!(
        methods,
        [
            (1, "thread/started"),
            (2, "turn/started"),
            (4, "item/recorded"),
            (6, "item/projected"),
            (7, "item/removed")
        ]
    );
    assert!(rows[2].2 > 0 && rows[3].2 == 0, "{rows:?}");

    let mut expected = read_events_after(&conn, &t, 0, 1).unwrap(); // thread/started
    expected.extend(appended);
    assert_eq!(read_events_after(&conn, &t, 0, 100).unwrap(), expected);
}
