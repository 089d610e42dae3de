//! Checkpoints run on the store's checkpoint thread, not in the writer's
//! commits: once the WAL is as long as SQLite's own threshold, the
//! database file takes its pages while the store is open, long before the
//! writer's backstop would, and the WAL still goes away with the store.

mod common;

use std::time::{Duration, Instant};

use common::*;
use spool_store::Store;

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_reach_the_database_file_while_the_store_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_path(dir.path());
    let wal = dir.path().join("spool.db-wal");
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    start_message(&store, &thread, "t1", "m1").await;
    let before = file_len(&db);

    // 600 commits of a 4 KB delta each: some 2.4 MB and 1,200–1,800
    // pages of WAL, past the length from which commits nudge the thread
    // (1,000 pages, SQLite's default) and below the writer's backstop
    // (8,000), so only the checkpoint thread copies them.
    let text = "x".repeat(4096);
    for _ in 0..600 {
        store
            .append(&thread, vec![agent_delta(&thread, "t1", "m1", &text)])
            .await
            .unwrap();
        store.flush().await.unwrap();
    }
    assert!(file_len(&wal) > 0, "the commits went to the WAL");

    // The thread checkpoints within its interval of the nudge, copying at
    // least the first 1,000 pages: some 400 commits, each with a page of
    // its own (the delta's overflow page), 1.6 MB. What the WAL took after
    // a checkpoint that copied everything starts it over, and waits for
    // the next 1,000 pages. The deadline is for a loaded machine, not a
    // target.
    let deadline = Instant::now() + Duration::from_secs(30);
    while file_len(&db) < before + 1024 * 1024 {
        assert!(
            Instant::now() < deadline,
            "the database file stayed at {} bytes (from {before}): nothing was checkpointed",
            file_len(&db)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    drop(store);
    assert!(
        !wal.exists(),
        "the writer's connection closes last and takes the WAL with it"
    );
    assert_eq!(committed_events(dir.path(), &thread), 1 + 2 + 600);
}
