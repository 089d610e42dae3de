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
use crate::thread_state::pending::Source;
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

/// Each `events` row of thread `t`: its seq, method and payload length.
fn event_rows(conn: &rusqlite::Connection, t: &str) -> Vec<(i64, String, i64)> {
    conn.prepare(
        "SELECT seq, method, length(payload) FROM events WHERE thread_id = ?1 ORDER BY seq",
    )
    .unwrap()
    .query_map([t], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// A turn started with two items born complete, "gone" and "kept"; and
/// the removal of "gone".
fn two_items_then_a_removal(t: &str) -> (Vec<ServerNotification>, ServerNotification) {
    let mut first = vec![turn_started(t, "u1")];
    first.extend(born(t, "u1", "gone"));
    first.extend(born(t, "u1", "kept"));
    let removal = ServerNotification::ItemRemoved(ItemRemovedNotification {
        thread_id: t.to_owned(),
        turn_id: "u1".to_owned(),
        item_id: "gone".to_owned(),
    });
    (first, removal)
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

    let (first, removal) = two_items_then_a_removal(&t);
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

    let rows = event_rows(&conn, &t);
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

/// What one batch of `appends` on a fresh thread (the same record each
/// time) writes: the `events` rows' seq, method and payload length, and
/// the events read back. Every append is made with `echo`; a refused one
/// has the thread rebuilt, as the writer does.
fn batch_of(
    thread: &(crate::types::ThreadRecord, String, i64),
    appends: &[Vec<ServerNotification>],
    echo: bool,
) -> (Vec<(i64, String, i64)>, Vec<ThreadEvent>) {
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open_writer(&dir.path().join("spool.db"), &StoreOptions::default()).unwrap();
    let (record, started_json, at_ms) = thread.clone();
    let t = record.thread.id.clone();
    let mut threads = Threads::default();
    threads.insert(t.clone(), ThreadState::created(record, started_json, at_ms));
    let state = threads.get_mut(&t).unwrap();
    for notifications in appends {
        let incoming = prepare_append(&t, notifications.clone()).unwrap();
        if let Err(refusal) = state.append(Some(&conn), &t, incoming, at_ms, echo) {
            assert!(refusal.reducer_dirty, "{}", refusal.error);
            state.rebuild(&conn, &t).unwrap();
        }
    }
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    batch::write_thread(&conn, &t, state).unwrap();
    conn.execute_batch("COMMIT").unwrap();
    (
        event_rows(&conn, &t),
        read_events_after(&conn, &t, 0, 100).unwrap(),
    )
}

/// An appender that asks for nothing back has the reducer's record take
/// each item born complete whole, its log row's body left to that record
/// until the batch is written. Whatever comes after it in the batch — a
/// removal or a clear, which drop records, or a refused append, which
/// rebuilds the reducer — the batch writes the same rows and reads give
/// the same events as when every append asked for its events back (and
/// so kept a copy of each completion).
#[test]
fn a_completion_left_to_its_record_writes_what_a_copy_would() {
    let thread = new_thread_record(NewThread::new("openai", "/w")).unwrap();
    let t = thread.0.thread.id.clone();
    let (first, removal) = two_items_then_a_removal(&t);
    // Refused at "kept", a duplicate, after "more" was applied.
    let mut refused = born(&t, "u1", "more").to_vec();
    refused.extend(born(&t, "u1", "kept"));
    let completed = ServerNotification::TurnCompleted(spool_protocol::TurnCompletedNotification {
        thread_id: t.clone(),
        turn: Turn::new("u1".to_owned(), TurnStatus::Completed),
    });
    let cleared = ServerNotification::ThreadCleared(spool_protocol::ThreadClearedNotification {
        thread_id: t.clone(),
    });
    let first_alone = first.clone();
    let cases: [Vec<Vec<ServerNotification>>; 4] = [
        vec![first.clone()],
        vec![first.clone(), vec![removal]],
        vec![first.clone(), refused],
        vec![first, vec![completed, cleared]],
    ];
    for appends in cases {
        let copied = batch_of(&thread, &appends, true);
        let taken = batch_of(&thread, &appends, false);
        assert_eq!(taken, copied, "{appends:?}");
    }
    // Taken whole, not copied: the rows of the first append hold no event.
    let (record, started_json, at_ms) = thread.clone();
    let mut state = ThreadState::created(record, started_json, at_ms);
    let incoming = prepare_append(&t, first_alone).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conn = schema::open_writer(&dir.path().join("spool.db"), &StoreOptions::default()).unwrap();
    let accepted = state.append(Some(&conn), &t, incoming, at_ms, false);
    assert!(accepted.is_ok());
    let in_record: Vec<u64> = state
        .pending
        .events
        .iter()
        .filter(|row| matches!(row.source, Source::InRecord))
        .map(|row| row.seq)
        .collect();
    assert_eq!(in_record, [4, 6]);
}
