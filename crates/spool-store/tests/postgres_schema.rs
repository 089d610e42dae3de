//! The PostgreSQL backend's connection and schema, on a real server
//! (`scripts/postgres.sh`; each test has a database of its own).

use spool_store::StoreError;
use spool_store::postgres::{PG_SCHEMA_VERSION, PgDatabase};
use spool_testkit::postgres::TestDatabase;

#[tokio::test]
async fn servers_starting_at_once_migrate_a_fresh_database_once() {
    let db = TestDatabase::create();
    let connects = (0..4).map(|_| {
        let url = db.url().to_owned();
        tokio::spawn(async move { PgDatabase::connect(&url).await })
    });
    for connect in connects {
        let database = connect.await.unwrap().unwrap();
        assert_eq!(database.schema_version().await.unwrap(), PG_SCHEMA_VERSION);
    }
    assert_eq!(
        db.query("SELECT count(*) FROM schema_version").unwrap(),
        PG_SCHEMA_VERSION.to_string()
    );
    let tables = db
        .query(
            "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables \
             WHERE table_schema = 'public'",
        )
        .unwrap();
    assert_eq!(
        tables,
        "commands,deleted_threads,events,history_cursors,items,pending_requests,run_states,\
         running_processes,schema_version,servers,thread_leases,threads,turns"
    );
    // Connecting again changes nothing.
    PgDatabase::connect(db.url()).await.unwrap();
    assert_eq!(
        db.query("SELECT count(*) FROM schema_version").unwrap(),
        PG_SCHEMA_VERSION.to_string()
    );
}

#[tokio::test]
async fn a_database_a_newer_spool_migrated_is_refused_untouched() {
    let db = TestDatabase::create();
    PgDatabase::connect(db.url()).await.unwrap();
    db.query("INSERT INTO schema_version (version) VALUES (99)")
        .unwrap();
    let error = PgDatabase::connect(db.url()).await.unwrap_err();
    match &error {
        StoreError::PgSchemaTooNew {
            found, supported, ..
        } => {
            assert_eq!((*found, *supported), (99, PG_SCHEMA_VERSION));
        }
        other => panic!("expected PgSchemaTooNew, got {other:?}"),
    }
    assert!(error.to_string().contains("use a newer spool"), "{error}");
    assert_eq!(
        db.query("SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_version")
            .unwrap(),
        (1..=PG_SCHEMA_VERSION)
            .map(|v| v.to_string())
            .chain(["99".to_owned()])
            .collect::<Vec<_>>()
            .join(",")
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_error_that_never_shows_the_password() {
    let db = TestDatabase::create();
    // The same server, a database that does not exist, a password in the URL.
    let url = db
        .url()
        .replace(&format!("/{}", db.name()), "/no_such_database_here");
    let url = url.replacen("://spool@", "://spool:hunter2secret@", 1);
    assert!(url.contains("hunter2secret"), "{url}");
    let error = PgDatabase::connect(&url).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StoreError::PgConnect { .. }), "{error:?}");
    assert!(message.contains("no_such_database_here"), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert!(!message.contains("hunter2secret"), "{message}");
    assert!(!format!("{error:?}").contains("hunter2secret"));

    // The test server speaks no TLS: a URL that requires it is refused.
    let required = format!("{}?sslmode=require", db.url());
    let error = PgDatabase::connect(&required).await.unwrap_err();
    assert!(matches!(error, StoreError::PgConnect { .. }), "{error:?}");
    let unparsable = PgDatabase::connect("postgres://spool@127.0.0.1:notaport/x")
        .await
        .unwrap_err();
    assert!(
        matches!(unparsable, StoreError::PgConnect { .. }),
        "{unparsable:?}"
    );
}
