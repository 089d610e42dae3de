//! Versioned migrations: a fresh file gets the current version, a file from
//! a newer spool is refused with a clear error.

mod common;

use common::*;
use spool_store::{SCHEMA_VERSION, SqliteStore, Store, StoreError, StoreOptions};

fn user_version(dir: &std::path::Path) -> i64 {
    raw(dir)
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_file_gets_the_current_version_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert_eq!(user_version(dir.path()), SCHEMA_VERSION);
    let t = new_thread(&store, false).await;
    drop(store);

    // Opening again migrates nothing and keeps the data.
    let store = open(dir.path());
    assert_eq!(user_version(dir.path()), SCHEMA_VERSION);
    assert!(store.thread(&t).await.unwrap().is_some());
    let mode: String = raw(dir.path())
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_file_from_a_newer_spool_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let future = SCHEMA_VERSION + 7;
    raw(dir.path())
        .pragma_update(None, "user_version", future)
        .unwrap();

    let error = match SqliteStore::open(db_path(dir.path()), StoreOptions::default()) {
        Ok(_) => panic!("a newer schema must be refused"),
        Err(error) => error,
    };
    match &error {
        StoreError::SchemaTooNew {
            path,
            found,
            supported,
        } => {
            assert_eq!(path, &db_path(dir.path()));
            assert_eq!((*found, *supported), (future, SCHEMA_VERSION));
        }
        other => panic!("expected SchemaTooNew, got {other}"),
    }
    let message = error.to_string();
    assert!(message.contains(&future.to_string()), "{message}");
    assert!(message.contains("newer"), "{message}");
    // Refusing touched nothing.
    assert_eq!(user_version(dir.path()), future);
}

#[test]
fn a_file_that_is_not_a_database_is_a_clear_open_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        db_path(dir.path()),
        b"definitely not sqlite, just some bytes",
    )
    .unwrap();
    let error = match SqliteStore::open(db_path(dir.path()), StoreOptions::default()) {
        Ok(_) => panic!("garbage must be refused"),
        Err(error) => error,
    };
    assert!(
        error
            .to_string()
            .contains(&db_path(dir.path()).display().to_string()),
        "{error}"
    );
}
