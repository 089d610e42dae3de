//! A turn's start and completion, stored once: when `turn/started` says
//! only what the turn's row holds (its id and start time), and
//! `turn/completed` only what the finished turn's row holds, their log rows
//! keep no body of their own, and every read of the log gives back exactly
//! what was appended. A row whose turn row is gone or moved on is a corrupt
//! row, never a different event.

mod common;

use common::*;
use serde_json::json;
use spool_protocol::{
    ServerNotification, ThreadEvent, Turn, TurnCompletedNotification, TurnError,
    TurnStartedNotification, TurnStatus,
};
use spool_store::{Session, Store, StoreError};

const STARTED_AT: i64 = 1_700_000_000;

/// A turn's start as a Session API call writes it: the id and the start
/// time, nothing else.
fn plain_start(thread: &str, turn: &str) -> ServerNotification {
    let mut value = Turn::new(turn, TurnStatus::InProgress);
    value.started_at = Some(STARTED_AT);
    ServerNotification::TurnStarted(TurnStartedNotification {
        thread_id: thread.to_owned(),
        turn: value,
    })
}

/// A turn's completion that says every field the turn's row keeps.
fn full_completion(thread: &str, turn: &str, error: Option<TurnError>) -> ServerNotification {
    let status = match error {
        Some(_) => TurnStatus::Failed,
        None => TurnStatus::Completed,
    };
    let mut value = Turn::new(turn, status);
    value.error = error;
    value.started_at = Some(STARTED_AT);
    value.completed_at = Some(STARTED_AT + 2);
    value.duration_ms = Some(2_000);
    ServerNotification::TurnCompleted(TurnCompletedNotification {
        thread_id: thread.to_owned(),
        turn: value,
    })
}

/// `(seq, method, payload)` of the thread's log rows about turns.
fn turn_rows(dir: &std::path::Path, thread: &str) -> Vec<(i64, String, String)> {
    let conn = raw(dir);
    let mut stmt = conn
        .prepare(
            "SELECT seq, method, payload FROM events WHERE thread_id = ?1 \
             AND method LIKE 'turn/%' ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([thread], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn thin(seq: i64, method: &str, payload: &str) -> (i64, String, String) {
    (seq, method.to_owned(), payload.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_says_only_its_row_is_read_back_from_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    // One turn in one append, as a Session API call makes it; a failed one
    // whose start and items came in an earlier append than its end; and
    // the next turn's start, still open.
    let mut first = vec![plain_start(&t, "u1")];
    first.extend(born(&t, "u1", user_message("i1", "hello"), None));
    first.push(full_completion(&t, "u1", None));
    let mut all = store.events_after(&t, 0, 1).await.unwrap(); // thread/started
    all.extend(logged(store.append(&t, first).await.unwrap()));
    let mut second = vec![plain_start(&t, "u2")];
    second.extend(born(&t, "u2", user_message("i2", "again"), None));
    all.extend(logged(store.append(&t, second).await.unwrap()));
    let failed = full_completion(&t, "u2", Some(TurnError::new("the model went away", None)));
    all.extend(logged(store.append(&t, vec![failed]).await.unwrap()));
    all.extend(logged(
        store.append(&t, vec![plain_start(&t, "u3")]).await.unwrap(),
    ));
    let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());

    assert_eq!(
        turn_rows(dir.path(), &t),
        vec![
            thin(2, "turn/projected-start", ""),
            thin(5, "turn/projected-end", "2"),
            thin(6, "turn/projected-start", ""),
            thin(9, "turn/projected-end", "6"),
            thin(10, "turn/projected-start", ""),
        ]
    );
    assert_reads_back(&store, &t, &all).await;
    let mut replayed = spool_core::ThreadReducer::new(&t);
    replayed.apply_all(&all).unwrap();
    assert_eq!(replayed.turns().len(), 3);

    // The same after a reopen, whose recovery ends the open turn.
    store.close().await.unwrap();
    drop(store);
    let store = open(dir.path());
    let ended = store.events_after(&t, 10, 10).await.unwrap();
    match &ended[..] {
        [
            ThreadEvent {
                seq: 11,
                payload: ServerNotification::TurnCompleted(n),
                ..
            },
        ] => assert_eq!(
            (n.turn.id.as_str(), n.turn.status),
            ("u3", TurnStatus::Interrupted)
        ),
        other => panic!("expected u3's end, got {other:?}"),
    }
    all.extend(ended);
    assert_reads_back(&store, &t, &all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_says_more_than_its_row_keeps_its_own_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    // No start time (the row takes the event's), items listed on the
    // completion (the row keeps none), and a view the row does not say.
    let mut saying_more = Turn::new("u1", TurnStatus::Completed);
    saying_more.started_at = Some(STARTED_AT);
    saying_more.items_view = spool_protocol::TurnItemsView::Full;
    let completion = ServerNotification::TurnCompleted(TurnCompletedNotification {
        thread_id: t.clone(),
        turn: saying_more,
    });
    let mut all = store.events_after(&t, 0, 1).await.unwrap();
    all.extend(logged(
        store
            .append(&t, vec![turn_started(&t, "u1"), completion])
            .await
            .unwrap(),
    ));
    let rows = turn_rows(dir.path(), &t);
    assert_eq!(
        rows.iter()
            .map(|(seq, method, _)| (*seq, method.as_str()))
            .collect::<Vec<_>>(),
        vec![(2, "turn/started"), (3, "turn/completed")]
    );
    assert!(rows.iter().all(|(_, _, payload)| payload.contains("u1")));
    assert_reads_back(&store, &t, &all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_call_leaves_its_turn_to_the_turn_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let session = Session::open(store.clone(), "s1").await.unwrap();
    let items = vec![
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": "hi"}),
    ];
    session.add_items(items.clone()).await.unwrap();
    session.add_items(items).await.unwrap();
    let methods: Vec<String> = turn_rows(dir.path(), "s1")
        .into_iter()
        .map(|(_, method, _)| method)
        .collect();
    assert_eq!(
        methods,
        [
            "turn/projected-start",
            "turn/projected-end",
            "turn/projected-start",
            "turn/projected-end"
        ]
    );
    // What the log gives back is the log a reducer accepts, turn by turn.
    let events = store.events_after("s1", 0, 100).await.unwrap();
    let mut replayed = spool_core::ThreadReducer::new("s1");
    replayed.apply_all(&events).unwrap();
    assert_eq!(replayed.turns().len(), 2);
    assert!(replayed.turns().iter().all(|t| t.status.is_terminal()));
    assert_eq!(session.get_items(None).await.unwrap().len(), 4);
}

/// A row whose turn row is gone, or no longer says what the row stood
/// for, is a corrupt row of the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_row_that_cannot_say_the_event_is_a_corrupt_row() {
    for (damage, seq) in [
        ("DELETE FROM items WHERE thread_id = ?1 AND is_turn = 1", 2),
        (
            "UPDATE items SET ordinal = ordinal + 1 WHERE thread_id = ?1 AND is_turn = 1",
            2,
        ),
        (
            "UPDATE items SET seq = seq + 5 WHERE thread_id = ?1 AND is_turn = 1",
            3,
        ),
        (
            "UPDATE items SET status = 'inProgress' WHERE thread_id = ?1 AND is_turn = 1",
            3,
        ),
        (
            "UPDATE events SET payload = 'two' WHERE thread_id = ?1 AND seq = 3",
            3,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let t = new_thread(&store, false).await;
        let turn = vec![plain_start(&t, "u1"), full_completion(&t, "u1", None)];
        store.append(&t, turn).await.unwrap();
        store.close().await.unwrap();
        drop(store);
        raw(dir.path()).execute(damage, [&t]).unwrap();
        let store = keep_open(dir.path());
        match store.events_after(&t, seq - 1, 1).await {
            Err(StoreError::CorruptRow(row)) => {
                assert_eq!((row.table, row.seq), ("events", Some(seq)), "{damage}");
                assert!(
                    row.cause.to_string().contains("turn/projected")
                        || row.cause.to_string().contains("the turn's row"),
                    "{damage}: {}",
                    row.cause
                );
            }
            other => panic!("{damage}: expected a corrupt row, got {other:?}"),
        }
    }
}
