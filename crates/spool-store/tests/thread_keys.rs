//! SQLite keys a thread's rows by a small integer of the thread's
//! (`src/sqlite/keys.rs`), never given twice: not even a deleted thread's
//! key comes back, so a writer that still holds a deleted thread's state
//! cannot write into another thread's rows.

mod common;

use common::*;
use spool_store::Store;

fn key_of(dir: &std::path::Path, thread: &str) -> i64 {
    raw(dir)
        .query_row("SELECT key FROM threads WHERE id = ?1", [thread], |row| {
            row.get(0)
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_threads_key_is_never_given_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let first = new_thread(&store, false).await;
    let newest = new_thread(&store, false).await;
    let (first_key, newest_key) = (key_of(dir.path(), &first), key_of(dir.path(), &newest));
    assert!(newest_key > first_key);
    store.delete_thread(&newest).await.unwrap();
    let after = new_thread(&store, false).await;
    assert!(key_of(dir.path(), &after) > newest_key);
    // Nor after the store is opened again.
    store.delete_thread(&after).await.unwrap();
    store.close().await.unwrap();
    let store = open(dir.path());
    let reopened = new_thread(&store, false).await;
    assert!(key_of(dir.path(), &reopened) > newest_key + 1);
    store.close().await.unwrap();
}
