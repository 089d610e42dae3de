//! The persistence policy: `status` items are never stored;
//! `stateChange`/`resourceChange` only for threads in dev mode.

mod common;

use common::backend::TestStore;
use common::*;
use spool_core::View;
use spool_store::{Appended, Store};

on_every_backend!(status_items_are_never_stored_and_take_no_seq,);

async fn status_items_are_never_stored_and_take_no_seq(ts: TestStore) {
    let store = &ts.store;
    for dev_mode in [false, true] {
        let t = new_thread(store, dev_mode).await;
        let appended = store
            .append(
                &t,
                vec![
                    turn_started(&t, "turn-1"),
                    started(&t, "turn-1", status_item("s1", "thinking…")),
                    started(&t, "turn-1", agent_message("a1", "")),
                    completed(&t, "turn-1", status_item("s1", "done thinking")),
                    completed(&t, "turn-1", agent_message("a1", "hi")),
                ],
            )
            .await
            .unwrap();
        // Returned in order, the status events marked transient, and the
        // stored ones gap-free around them.
        assert_eq!(appended.len(), 5);
        assert!(matches!(appended[1], Appended::Transient(_)));
        assert!(matches!(appended[3], Appended::Transient(_)));
        assert_eq!(appended[1].notification().method(), "item/started");
        assert_eq!(seqs(&appended), vec![2, 3, 4]);

        let items = store.items(&t, View::All).await.unwrap();
        assert_eq!(
            items.iter().map(|r| r.item.id()).collect::<Vec<_>>(),
            vec!["a1"]
        );
        let events = store.events_after(&t, 0, 100).await.unwrap();
        assert_eq!(events.len(), 4);
        assert!(
            events
                .iter()
                .all(|e| !format!("{:?}", e.payload).contains("s1"))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changes_are_stored_only_in_dev_mode() {
    let dir = tempfile::tempdir().unwrap();
    // Another handle stays open: the reopen below must not recover turns.
    let _keeper = keep_open(dir.path());
    let store = open(dir.path());

    let plain = new_thread(&store, false).await;
    let appended = store
        .append(
            &plain,
            vec![
                turn_started(&plain, "turn-1"),
                started(&plain, "turn-1", state_change("sc1")),
                completed(&plain, "turn-1", state_change("sc1")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![2]);
    assert!(store.items(&plain, View::All).await.unwrap().is_empty());
    assert_eq!(store.events_after(&plain, 0, 100).await.unwrap().len(), 2);

    let dev = new_thread(&store, true).await;
    let appended = store
        .append(
            &dev,
            vec![
                turn_started(&dev, "turn-1"),
                started(&dev, "turn-1", state_change("sc1")),
                completed(&dev, "turn-1", state_change("sc1")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![2, 3, 4]);
    let items = store.items(&dev, View::All).await.unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].item, state_change("sc1"));
    assert!(store.thread(&dev).await.unwrap().unwrap().dev_mode);

    // The setting is stored with the thread: it holds after a reopen.
    store.close().await.unwrap();
    drop(store);
    let store = open(dir.path());
    let appended = store
        .append(&plain, vec![started(&plain, "turn-1", state_change("sc2"))])
        .await
        .unwrap();
    assert!(matches!(appended[0], Appended::Transient(_)));
    let appended = store
        .append(&dev, vec![started(&dev, "turn-1", state_change("sc2"))])
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![5]);
}
