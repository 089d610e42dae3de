//! Items born complete: an `item/started` whose `item/completed` follows
//! in the same append, saying nothing more, is one row of the log, and
//! every read gives back exactly the two events that were appended. When
//! the completion is exactly the item's projection row, that row holds the
//! body and the log row none; a removal gives the log row its body back.

mod common;

use common::*;
use serde_json::json;
use spool_protocol::{ItemRemovedNotification, ServerNotification, ThreadEvent};
use spool_store::{Store, StoreError, ToAppend};

/// A fresh store with one thread whose turn `u1` has started.
async fn thread_in_a_turn() -> (tempfile::TempDir, spool_store::SqliteStore, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    store
        .append(&t, vec![turn_started(&t, "u1")])
        .await
        .unwrap();
    (dir, store, t)
}

fn rows_named(dir: &std::path::Path, thread: &str, method: &str) -> i64 {
    raw(dir)
        .query_row(
            "SELECT count(*) FROM events WHERE thread_id = ?1 AND method = ?2",
            [thread, method],
            |row| row.get(0),
        )
        .unwrap()
}

fn payload_bytes(dir: &std::path::Path, thread: &str, method: &str) -> i64 {
    raw(dir)
        .query_row(
            "SELECT coalesce(sum(length(payload)), 0) FROM events \
             WHERE thread_id = ?1 AND method = ?2",
            [thread, method],
            |row| row.get(0),
        )
        .unwrap()
}

fn removed(thread: &str, turn: &str, item: &str) -> ServerNotification {
    ServerNotification::ItemRemoved(ItemRemovedNotification {
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        item_id: item.to_owned(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_and_its_completion_are_one_row_and_read_back_as_two_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    let mut turn = vec![turn_started(&t, "u1")];
    turn.extend(born(&t, "u1", user_message("i1", "hello"), None));
    turn.extend(born(
        &t,
        "u1",
        agent_message("i2", "hi"),
        Some(json!({"inputItem": {"role": "assistant", "content": "hi"}})),
    ));
    turn.push(turn_completed(&t, "u1"));
    let appended = logged(store.append(&t, turn).await.unwrap());
    assert_eq!(seqs_of(&appended), (2..=7).collect::<Vec<_>>());

    // Both completions are what the item rows hold: the body is stored
    // once, in the item row.
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 2);
    assert_eq!(rows_named(dir.path(), &t, "item/recorded"), 0);
    assert_eq!(rows_named(dir.path(), &t, "item/started"), 0);
    assert_eq!(rows_named(dir.path(), &t, "item/completed"), 0);
    assert_eq!(payload_bytes(dir.path(), &t, "item/projected"), 0);
    assert_eq!(committed_events(dir.path(), &t), 7);

    let mut all = store.events_after(&t, 0, 1).await.unwrap(); // thread/started
    all.extend(appended);
    assert_reads_back(&store, &t, &all).await;
    // The thread's last seq is the completion's, and the log replays.
    assert_eq!(store.thread(&t).await.unwrap().unwrap().last_seq, 7);
    let mut replayed = spool_core::ThreadReducer::new(&t);
    replayed.apply_all(&all).unwrap();
    assert_eq!(replayed.items().len(), 2);

    // The same after a reopen, and the next event continues the seqs.
    store.close().await.unwrap();
    drop(store);
    let store = open(dir.path());
    assert_reads_back(&store, &t, &all).await;
    let more = logged(
        store
            .append(&t, vec![turn_started(&t, "u2")])
            .await
            .unwrap(),
    );
    assert_eq!(more[0].seq, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_that_say_more_or_stand_alone_keep_their_own_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    let mut all = store.events_after(&t, 0, 1).await.unwrap();

    // Provider data on the start: the completion does not imply it.
    let [started, completed] = born(&t, "u1", agent_message("i1", "a"), None);
    let ServerNotification::ItemStarted(mut with_data) = started else {
        unreachable!()
    };
    with_data.envelope.as_mut().unwrap().provider_data = Some(json!({"id": "rs_1"}).into());
    let turn = vec![
        turn_started(&t, "u1"),
        ServerNotification::ItemStarted(with_data),
        completed,
    ];
    all.extend(logged(store.append(&t, turn).await.unwrap()));

    // A start whose completion comes in a later append.
    let [started, completed] = born(&t, "u1", user_message("i2", "b"), None);
    all.extend(logged(store.append(&t, vec![started]).await.unwrap()));
    all.extend(logged(store.append(&t, vec![completed]).await.unwrap()));

    // A start with a different item than its completion.
    let [started, completed] = born(&t, "u1", agent_message("i3", "final"), None);
    let ServerNotification::ItemStarted(mut empty) = started else {
        unreachable!()
    };
    empty.item = agent_message("i3", "");
    let appended = store
        .append(
            &t,
            vec![
                ServerNotification::ItemStarted(empty),
                completed,
                turn_completed(&t, "u1"),
            ],
        )
        .await
        .unwrap();
    all.extend(logged(appended));

    assert_eq!(rows_named(dir.path(), &t, "item/recorded"), 0);
    assert_eq!(rows_named(dir.path(), &t, "item/started"), 3);
    assert_eq!(rows_named(dir.path(), &t, "item/completed"), 3);
    assert_reads_back(&store, &t, &all).await;
}

/// A refusal rebuilds the thread's reducer from the batch's pending events;
/// a start folded into its completion is not encoded by the caller, and
/// the rebuild takes it from the completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_in_the_batch_of_folded_starts_lose_nothing() {
    let (dir, store, t) = thread_in_a_turn().await;
    // Many appends in flight at once land in the same batches.
    let mut tasks = Vec::new();
    for n in 0..40 {
        let store = store.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let item = format!("a{n}");
            let ok = store.append(&t, born(&t, "u1", user_message(&item, "hi"), None).to_vec());
            // Refused at its last event, after the first two were applied:
            // the reducer is rebuilt from what the batch holds.
            let mut bad = born(&t, "u1", user_message(&format!("r{n}"), "no"), None).to_vec();
            bad.push(agent_delta(&t, "u1", "nothing", "x"));
            let refused = store.append(&t, bad);
            let (ok, refused) = tokio::join!(ok, refused);
            (logged(ok.unwrap()), refused.is_err())
        }));
    }
    let mut all = store.events_after(&t, 0, 2).await.unwrap();
    for task in tasks {
        let (events, refused) = task.await.unwrap();
        assert!(refused);
        all.extend(events);
    }
    all.sort_by_key(|event| event.seq);
    assert_eq!(seqs_of(&all), (1..=82).collect::<Vec<_>>());
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 40);
    assert_eq!(store.events_after(&t, 0, 1_000).await.unwrap(), all);
    assert_eq!(
        store.items(&t, spool_core::View::All).await.unwrap().len(),
        40
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_row_that_is_not_a_completion_is_a_corrupt_row() {
    let (dir, store, t) = thread_in_a_turn().await;
    store.close().await.unwrap();
    drop(store);
    raw(dir.path())
        .execute(
            "UPDATE events SET method = 'item/recorded' WHERE thread_id = ?1 AND seq = 2",
            [&t],
        )
        .unwrap();
    let store = keep_open(dir.path());
    // Read from before the start it would stand for, and from between the
    // two (where only the completion would be given back).
    for after in [0, 1] {
        match store.events_after(&t, after, 10).await {
            Err(StoreError::CorruptRow(row)) => {
                assert_eq!((row.table, row.seq), ("events", Some(2)));
                assert!(
                    row.cause.to_string().contains("turn/started"),
                    "{}",
                    row.cause
                );
            }
            other => panic!("after {after}: expected a corrupt row, got {other:?}"),
        }
    }
}

/// A completion that says more than the item row would (its own
/// completion time) keeps its body in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_the_item_row_cannot_say_keeps_its_payload() {
    let (dir, store, t) = thread_in_a_turn().await;
    let mut all = store.events_after(&t, 0, 10).await.unwrap();
    let [started, completed] = born(&t, "u1", user_message("i1", "hello"), None);
    let ServerNotification::ItemCompleted(mut completed) = completed else {
        unreachable!()
    };
    completed.completed_at_ms += 1;
    let pair = vec![started, ServerNotification::ItemCompleted(completed)];
    all.extend(logged(store.append(&t, pair).await.unwrap()));

    assert_eq!(rows_named(dir.path(), &t, "item/recorded"), 1);
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 0);
    assert_reads_back(&store, &t, &all).await;
}

/// Removing an item (a pop, a revert) or clearing the thread deletes item
/// rows that are the body of log rows: the log rows get their body back
/// first, and the log reads back as it was appended, before and after a
/// reopen. An item removed in the batch that records it never leaves its
/// body to a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_give_the_log_its_bodies_back() {
    let (dir, store, t) = thread_in_a_turn().await;
    let mut all = store.events_after(&t, 0, 10).await.unwrap();
    for n in 0..4 {
        let data = Some(json!({"inputItem": {"role": "user", "content": format!("m{n}")}}));
        let pair = born(&t, "u1", user_message(&format!("i{n}"), "hello"), data);
        all.extend(logged(store.append(&t, pair.to_vec()).await.unwrap()));
    }
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 4);

    all.extend(logged(
        store
            .append(&t, vec![removed(&t, "u1", "i1")])
            .await
            .unwrap(),
    ));
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 3);
    assert_eq!(rows_named(dir.path(), &t, "item/recorded"), 1);
    assert_reads_back(&store, &t, &all).await;

    // Recorded and removed in one append: one batch.
    let mut appended = born(&t, "u1", user_message("i4", "gone"), None).to_vec();
    appended.push(removed(&t, "u1", "i4"));
    all.extend(logged(store.append(&t, appended).await.unwrap()));
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 3);
    assert_eq!(rows_named(dir.path(), &t, "item/recorded"), 2);

    let cleared = ServerNotification::ThreadCleared(spool_protocol::ThreadClearedNotification {
        thread_id: t.clone(),
    });
    let clear = vec![turn_completed(&t, "u1"), cleared];
    all.extend(logged(store.append(&t, clear).await.unwrap()));
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 0);
    assert_eq!(rows_named(dir.path(), &t, "item/recorded"), 5);
    assert_reads_back(&store, &t, &all).await;

    // An item started again after its removal: its new row is its new
    // completion's body, and the old log row keeps its own.
    let mut again = vec![turn_started(&t, "u2")];
    again.extend(born(&t, "u2", user_message("i1", "again"), None));
    again.push(turn_completed(&t, "u2"));
    all.extend(logged(store.append(&t, again).await.unwrap()));
    assert_eq!(rows_named(dir.path(), &t, "item/projected"), 1);

    store.close().await.unwrap();
    drop(store);
    let store = open(dir.path());
    assert_reads_back(&store, &t, &all).await;
    let mut replayed = spool_core::ThreadReducer::new(&t);
    replayed.apply_all(&all).unwrap();
    assert_eq!(replayed.items().len(), 1);
}

/// An `item/projected` row whose item row is gone or moved on is a corrupt
/// row of the log, never a silently different event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projected_row_without_its_body_is_a_corrupt_row() {
    for damage in [
        "DELETE FROM items WHERE thread_id = ?1 AND item_id = 'i1'",
        "UPDATE items SET seq = seq + 5 WHERE thread_id = ?1 AND item_id = 'i1'",
        "UPDATE items SET status = 'inProgress', \
         envelope = json_set(envelope, '$.status', 'inProgress', '$.completedAtMs', NULL) \
         WHERE thread_id = ?1 AND item_id = 'i1'",
    ] {
        let (dir, store, t) = thread_in_a_turn().await;
        let pair = born(&t, "u1", user_message("i1", "hello"), None);
        store.append(&t, pair.to_vec()).await.unwrap();
        store.close().await.unwrap();
        drop(store);
        raw(dir.path()).execute(damage, [&t]).unwrap();
        let store = keep_open(dir.path());
        match store.events_after(&t, 0, 10).await {
            Err(StoreError::CorruptRow(row)) => {
                assert_eq!((row.table, row.seq), ("events", Some(4)), "{damage}");
                assert!(
                    row.cause.to_string().contains("item/projected"),
                    "{}",
                    row.cause
                );
            }
            other => panic!("{damage}: expected a corrupt row, got {other:?}"),
        }
    }
}

/// A pair that travels as its completion alone is refused as the two
/// events would be: a refusal of the start names the start's index and
/// method, and leaves nothing of the append behind.
#[tokio::test]
async fn a_refused_item_born_complete_is_named_by_its_start() {
    let (_dir, store, t) = thread_in_a_turn().await;
    store
        .append(&t, born(&t, "u1", user_message("a1", "hi"), None).to_vec())
        .await
        .unwrap();
    let before = store.events_after(&t, 0, 100).await.unwrap();
    let refusal = |error: StoreError| match error {
        StoreError::Refused {
            index,
            method,
            source,
        } => (index, method, source),
        other => panic!("expected a refusal, got {other:?}"),
    };

    let mut twice = born(&t, "u1", user_message("a2", "new"), None).to_vec();
    twice.extend(born(&t, "u1", user_message("a1", "again"), None));
    let (index, method, source) = refusal(store.append(&t, twice).await.unwrap_err());
    assert_eq!((index, method), (2, "item/started"));
    assert!(
        matches!(&source, spool_core::ReduceError::DuplicateItem { item_id } if item_id == "a1"),
        "{source:?}"
    );

    // Given as its completion alone, after a pair that folds: counted as
    // two entries, like that pair.
    let [_, elsewhere] = born(&t, "nope", user_message("a3", "lost"), None);
    let mut entries: Vec<ToAppend> = born(&t, "u1", user_message("a4", "ok"), None)
        .into_iter()
        .map(ToAppend::from)
        .collect();
    entries.push(completion_alone(elsewhere));
    let (index, method, source) = refusal(store.append_quiet(&t, entries).await.unwrap_err());
    assert_eq!((index, method), (2, "item/started"));
    assert!(
        matches!(&source, spool_core::ReduceError::UnknownTurn { turn_id, .. } if turn_id == "nope"),
        "{source:?}"
    );

    // A completion alone needs its envelope: the start is made from it.
    let [_, ServerNotification::ItemCompleted(mut bare)] =
        born(&t, "u1", user_message("a5", "bare"), None)
    else {
        unreachable!("born gives a start and a completion")
    };
    bare.envelope = None;
    let error = store
        .append_quiet(&t, vec![ToAppend::BornComplete(bare)])
        .await
        .unwrap_err();
    let (index, method, source) = refusal(error);
    assert_eq!((index, method), (0, "item/started"));
    assert!(
        matches!(&source, spool_core::ReduceError::NotBornComplete { item_id, .. } if item_id == "a5"),
        "{source:?}"
    );

    // A completion alone of another thread, checked before the writer.
    let [_, ServerNotification::ItemCompleted(mut stray)] =
        born(&t, "u1", user_message("a6", "stray"), None)
    else {
        unreachable!("born gives a start and a completion")
    };
    stray.thread_id = "another".to_owned();
    let [_, first] = born(&t, "u1", user_message("a7", "ok"), None);
    let entries = vec![completion_alone(first), ToAppend::BornComplete(stray)];
    match store.append_quiet(&t, entries).await.unwrap_err() {
        StoreError::ThreadMismatch { index, got, .. } => {
            assert_eq!((index, got.as_str()), (2, "another"))
        }
        other => panic!("expected a thread mismatch, got {other:?}"),
    }

    assert_eq!(store.events_after(&t, 0, 100).await.unwrap(), before);
}

/// `append_quiet` answers nothing, and stores and reads back exactly what
/// `append` would have handed back: each start and completion, in order,
/// under consecutive seqs, on both sides of a commit, whether an item born
/// complete was given as its start and completion or as its completion
/// alone.
#[tokio::test]
async fn a_quiet_append_stores_what_an_answered_one_hands_back() {
    let (_dir, store, t) = thread_in_a_turn().await;
    let mut notifications = born(&t, "u1", user_message("a1", "hi"), None).to_vec();
    notifications.push(started(&t, "u1", agent_message("m1", "")));
    notifications.push(completed(&t, "u1", agent_message("m1", "hello")));
    notifications.extend(born(
        &t,
        "u1",
        agent_message("a2", "whole"),
        Some(json!({"inputItem": {"role": "assistant", "content": "whole"}})),
    ));
    let answered = logged(store.append(&t, notifications.clone()).await.unwrap());
    let renamed: Vec<ServerNotification> = notifications
        .iter()
        .map(|n| {
            let mut value = serde_json::to_value(n).unwrap();
            let text = value
                .to_string()
                .replace("\"a1\"", "\"b1\"")
                .replace("\"m1\"", "\"n1\"")
                .replace("\"a2\"", "\"b2\"");
            value = serde_json::from_str(&text).unwrap();
            serde_json::from_value(value).unwrap()
        })
        .collect();
    // The first item as its completion alone, the rest as notifications
    // (the second pair does not fold, the third does).
    let mut entries: Vec<ToAppend> = vec![completion_alone(renamed[1].clone())];
    entries.extend(renamed[2..].iter().cloned().map(ToAppend::from));
    store.append_quiet(&t, entries).await.unwrap();

    let all = store.events_after(&t, 0, 100).await.unwrap();
    let quiet: Vec<&ThreadEvent> = all
        .iter()
        .filter(|e| e.seq > answered.last().unwrap().seq)
        .collect();
    assert_eq!(
        quiet.iter().map(|e| &e.payload).collect::<Vec<_>>(),
        renamed.iter().collect::<Vec<_>>()
    );
    let next = answered.last().unwrap().seq + 1;
    assert_eq!(
        quiet.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (next..next + renamed.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        &all[all.len() - 2 * renamed.len()..all.len() - renamed.len()],
        &answered[..]
    );
    assert_reads_back(&store, &t, &all).await;
}

/// An item born complete given as its completion alone.
fn completion_alone(completion: ServerNotification) -> ToAppend {
    match completion {
        ServerNotification::ItemCompleted(completed) => ToAppend::BornComplete(completed),
        other => panic!("not a completion: {}", other.method()),
    }
}

fn seqs_of(events: &[ThreadEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}
