//! Protocol violations are refused whole, store nothing, and leave the
//! store working for every other append.

mod common;

use common::backend::TestStore;
use common::*;
use spool_core::{ReduceError, View};
use spool_protocol::ServerNotification;
use spool_store::{Store, StoreError, StoreOptions};

fn reduce_error(error: &StoreError) -> &ReduceError {
    match error {
        StoreError::Refused { source, .. } => source,
        other => panic!("expected a refusal, got {other}"),
    }
}

on_every_backend!(
    a_delta_after_completion_and_a_second_completion_are_refused,
    other_appends_in_the_same_batch_are_unaffected,
    starts_of_stored_ids_are_refused_after_the_writer_dropped_them,
    appends_that_are_not_the_threads_are_refused_before_the_writer,
);

async fn a_delta_after_completion_and_a_second_completion_are_refused(ts: TestStore) {
    let store = &ts.store;
    let t = new_thread(store, false).await;
    store
        .append(&t, vec![turn_started(&t, "turn-1")])
        .await
        .unwrap();
    store
        .append(&t, streamed_message(&t, "turn-1", "a1", "done"))
        .await
        .unwrap();
    store.flush().await.unwrap();
    let before = store.events_after(&t, 0, 1000).await.unwrap();
    let items_before = store.items(&t, View::All).await.unwrap();

    let error = store
        .append(&t, vec![agent_delta(&t, "turn-1", "a1", "more")])
        .await
        .unwrap_err();
    assert!(
        matches!(reduce_error(&error), ReduceError::ItemTerminal { item_id, .. } if item_id == "a1"),
        "{error}"
    );
    let error = store
        .append(
            &t,
            vec![completed(&t, "turn-1", agent_message("a1", "again"))],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(reduce_error(&error), ReduceError::ItemTerminal { .. }),
        "{error}"
    );

    store.flush().await.unwrap();
    assert_eq!(store.events_after(&t, 0, 1000).await.unwrap(), before);
    assert_eq!(store.items(&t, View::All).await.unwrap(), items_before);

    // The thread goes on with the next seq.
    let appended = store
        .append(&t, vec![turn_completed(&t, "turn-1")])
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![before.len() as u64 + 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_append_stores_none_of_its_events() {
    let dir = tempfile::tempdir().unwrap();
    // Deltas stay uncommitted until a lifecycle event or flush commits them.
    let options = StoreOptions {
        delta_commit_delay: std::time::Duration::from_secs(3600),
        ..StoreOptions::default()
    };
    let store = open_with(dir.path(), options);
    let t = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    // Deltas accepted but not yet committed must survive the refusal of a
    // later append in the same batch.
    store
        .append(&t, vec![agent_delta(&t, "turn-1", "a1", "kept ")])
        .await
        .unwrap();
    assert_eq!(committed_events(dir.path(), &t), 3, "the delta is pending");

    // Its first three events are fine; the fourth completes a1 twice.
    let error = store
        .append(
            &t,
            vec![
                agent_delta(&t, "turn-1", "a1", "dropped "),
                started(&t, "turn-1", agent_message("a2", "")),
                completed(&t, "turn-1", agent_message("a1", "final")),
                completed(&t, "turn-1", agent_message("a1", "twice")),
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::Refused {
                index: 3,
                method: "item/completed",
                ..
            }
        ),
        "{error}"
    );

    store.flush().await.unwrap();
    let events = store.events_after(&t, 0, 100).await.unwrap();
    assert_eq!(
        events.len(),
        4,
        "thread/started, turn, a1 started, one delta"
    );
    let items = store.items(&t, View::All).await.unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].item, agent_message("a1", "kept "));

    // The writer forgot the refused events: a2 is unknown, a1 still open.
    let error = store
        .append(&t, vec![agent_delta(&t, "turn-1", "a2", "x")])
        .await
        .unwrap_err();
    assert!(
        matches!(reduce_error(&error), ReduceError::UnknownItem { .. }),
        "{error}"
    );
    let appended = store
        .append(
            &t,
            vec![
                agent_delta(&t, "turn-1", "a1", "and more"),
                completed(&t, "turn-1", agent_message("a1", "kept and more")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![5, 6]);
}

async fn other_appends_in_the_same_batch_are_unaffected(ts: TestStore) {
    let store = &ts.store;
    let good = new_thread(store, false).await;
    let bad = new_thread(store, false).await;
    for t in [&good, &bad] {
        store
            .append(t, vec![turn_started(t, "turn-1")])
            .await
            .unwrap();
    }
    // Many appends in flight at once land in the same batches.
    let mut tasks = Vec::new();
    for n in 0..20 {
        let store = store.clone();
        let (good, bad) = (good.clone(), bad.clone());
        tasks.push(tokio::spawn(async move {
            let item = format!("a{n}");
            let ok = store
                .append(&good, streamed_message(&good, "turn-1", &item, "fine"))
                .await;
            let refused = store
                .append(
                    &bad,
                    vec![agent_delta(&bad, "turn-1", &item, "no such item")],
                )
                .await;
            (ok.is_ok(), refused.is_err())
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), (true, true));
    }
    assert_eq!(store.items(&good, View::All).await.unwrap().len(), 20);
    assert_eq!(store.events_after(&bad, 0, 100).await.unwrap().len(), 2);
}

/// Which refusal an append must get.
type Expect = fn(&ReduceError) -> bool;

async fn starts_of_stored_ids_are_refused_after_the_writer_dropped_them(ts: TestStore) {
    let store = ts.store.clone();
    let t = new_thread(&store, false).await;
    store
        .append(&t, vec![turn_started(&t, "turn-1")])
        .await
        .unwrap();
    // Enough closed items that the writer compacts its state.
    for n in 0..100 {
        let id = format!("a{n}");
        store
            .append(
                &t,
                vec![
                    started(&t, "turn-1", agent_message(&id, "")),
                    completed(&t, "turn-1", agent_message(&id, "x")),
                ],
            )
            .await
            .unwrap();
    }
    store
        .append(&t, vec![turn_completed(&t, "turn-1")])
        .await
        .unwrap();
    let last = store.thread(&t).await.unwrap().unwrap().last_seq;

    let checks: Vec<(Vec<ServerNotification>, Expect)> = vec![
        (vec![turn_started(&t, "turn-1")], |e| {
            matches!(e, ReduceError::DuplicateTurn { .. })
        }),
        (vec![agent_delta(&t, "turn-1", "a0", "x")], |e| {
            matches!(e, ReduceError::ItemTerminal { .. })
        }),
        (vec![turn_completed(&t, "turn-1")], |e| {
            matches!(e, ReduceError::TurnAlreadyCompleted { .. })
        }),
        (
            vec![
                turn_started(&t, "turn-2"),
                started(&t, "turn-2", agent_message("a0", "")),
            ],
            |e| matches!(e, ReduceError::DuplicateItem { .. }),
        ),
        (vec![started(&t, "turn-1", agent_message("b", ""))], |e| {
            matches!(e, ReduceError::TurnNotActive { .. })
        }),
    ];
    for (events, expected) in checks {
        let error = store.append(&t, events).await.unwrap_err();
        assert!(expected(reduce_error(&error)), "{error}");
    }
    store.flush().await.unwrap();
    assert_eq!(store.thread(&t).await.unwrap().unwrap().last_seq, last);

    // The greatest stored ids, in this process and after a reopen (the
    // writer skips the probe only for ids above every stored one).
    let greatest = || {
        vec![
            (vec![turn_started(&t, "turn-1")], "turn-1"),
            (
                vec![
                    turn_started(&t, "turn-9"),
                    started(&t, "turn-9", agent_message("a99", "")),
                ],
                "a99",
            ),
        ]
    };
    for (events, id) in greatest() {
        let error = store.append(&t, events).await.unwrap_err();
        assert!(is_duplicate(reduce_error(&error)), "{id}: {error}");
    }
    store.close().await.unwrap();
    drop(store);
    let store = ts.reopen(StoreOptions::default()).await;
    for (events, id) in greatest() {
        let error = store.append(&t, events).await.unwrap_err();
        assert!(
            is_duplicate(reduce_error(&error)),
            "reopened, {id}: {error}"
        );
    }
    assert_eq!(store.thread(&t).await.unwrap().unwrap().last_seq, last);
}

fn is_duplicate(error: &ReduceError) -> bool {
    matches!(
        error,
        ReduceError::DuplicateItem { .. } | ReduceError::DuplicateTurn { .. }
    )
}

async fn appends_that_are_not_the_threads_are_refused_before_the_writer(ts: TestStore) {
    let store = &ts.store;
    let t = new_thread(store, false).await;
    let error = store
        .append(&t, vec![turn_started("someone-else", "turn-1")])
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::ThreadMismatch { index: 0, .. }),
        "{error}"
    );
    let started_again = store
        .events_after(&t, 0, 1)
        .await
        .unwrap()
        .remove(0)
        .payload;
    let error = store.append(&t, vec![started_again]).await.unwrap_err();
    assert!(
        matches!(error, StoreError::ThreadStartedAppended { index: 0 }),
        "{error}"
    );
}
