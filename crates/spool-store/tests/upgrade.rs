//! A file written by schema version 2 upgrades in place and reads exactly
//! as it did (see `upgrade_support` for how the fixture was made).

mod common;
mod session_support;
mod upgrade_support;

use common::*;
use spool_store::{SCHEMA_VERSION, Store};

const V2_DUMP: &str = include_str!("fixtures/v2.sql");
const V2_READS: &str = include_str!("fixtures/v2.reads.txt");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_file_upgrades_and_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    raw(dir.path()).execute_batch(V2_DUMP).unwrap();
    let version: i64 = raw(dir.path())
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 2);

    // Hold the store's lock as another process would, so opening recovers
    // nothing: the fixture's last turn is still streaming, and its item
    // must read as the log says (row plus committed deltas).
    let lock = std::fs::File::create(dir.path().join("spool.db.lock")).unwrap();
    lock.lock_shared().unwrap();
    let store = open(dir.path());
    let version: i64 = raw(dir.path())
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);

    let reads = upgrade_support::snapshot(&store).await;
    let digests = upgrade_support::digest_lines(&reads);
    assert_eq!(digests.lines().count(), V2_READS.lines().count());
    for ((expected, got), line) in V2_READS.lines().zip(digests.lines()).zip(reads.lines()) {
        assert_eq!(got, expected, "this read differs from version 2's:\n{line}");
    }
    let check: String = raw(dir.path())
        .query_row("PRAGMA foreign_key_check", [], |row| row.get(0))
        .unwrap_or_else(|_| "ok".to_owned());
    assert_eq!(check, "ok");
    let integrity: String = raw(dir.path())
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");

    // It still takes appends where version 2 left off.
    let s = spool_store::Session::open(store.clone(), "session-a")
        .await
        .unwrap();
    let before = s.get_items(None).await.unwrap().len();
    s.add_items(vec![
        serde_json::json!({"role": "user", "content": "after"}),
    ])
    .await
    .unwrap();
    assert_eq!(s.get_items(None).await.unwrap().len(), before + 1);
    store.close().await.unwrap();
    drop(lock);
}
