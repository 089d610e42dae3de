//! A commit that fails answers every caller it covered with the error,
//! stores nothing of theirs, and the store recovers once the cause is gone.

mod common;

use std::time::Duration;

use common::*;
use spool_core::View;
use spool_protocol::ServerNotification;
use spool_store::{Store, StoreError, StoreOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_fails_its_callers_and_the_store_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        busy_timeout: Duration::from_millis(50),
        delta_commit_delay: Duration::from_secs(3600),
        ..StoreOptions::default()
    };
    let store = open_with(dir.path(), options);
    let t = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    // Acknowledged, not yet committed: lost with the failed commit, as in
    // a crash.
    store
        .append(&t, vec![agent_delta(&t, "turn-1", "a1", "lost")])
        .await
        .unwrap();

    // Another process holds the write lock longer than the busy timeout.
    let blocker = raw(dir.path());
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let error = store
        .append(
            &t,
            vec![completed(&t, "turn-1", agent_message("a1", "lost"))],
        )
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Commit(_)), "{error}");
    assert!(error.to_string().contains("locked"), "{error}");
    blocker.execute_batch("ROLLBACK").unwrap();
    drop(blocker);

    // The writer reloaded the thread from what is committed: a1 is still
    // open, without the lost delta. Seq 4 was handed out (a client may
    // have seen "lost" under it), so it is never given to another event:
    // the log says the reserved range from 4 on was lost, then goes on.
    let appended = store
        .append(
            &t,
            vec![
                agent_delta(&t, "turn-1", "a1", "kept"),
                completed(&t, "turn-1", agent_message("a1", "kept")),
            ],
        )
        .await
        .unwrap();
    let lost_at = seqs(&appended)[0];
    assert!(lost_at > 4, "{appended:?}");
    assert_eq!(seqs(&appended), vec![lost_at, lost_at + 1, lost_at + 2]);
    let ServerNotification::ThreadEventsLost(lost) = appended[0].notification() else {
        panic!("expected thread/eventsLost first, got {:?}", appended[0]);
    };
    assert_eq!((lost.from_seq, lost.to_seq), (4, lost_at - 1));
    let items = store.items(&t, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("a1", "kept"));
    let events = store.events_after(&t, 0, 100).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, lost_at, lost_at + 1, lost_at + 2]
    );
}
