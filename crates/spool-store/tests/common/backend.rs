//! A store of either backend for one test, and the macro that runs a test
//! on both: the store's conformance suite. What a test asserts through
//! [`spool_store::Store`] must hold for SQLite and PostgreSQL alike.

use spool_store::postgres::PgStore;
use spool_store::{AnyStore, SqliteStore, StoreOptions};
use spool_testkit::postgres::TestDatabase;

/// Where a test store keeps its data.
enum Storage {
    Sqlite(tempfile::TempDir),
    Postgres(TestDatabase),
}

/// A fresh, empty store of one backend, and what it keeps its data in
/// (removed when this is dropped).
pub struct TestStore {
    pub store: AnyStore,
    storage: Storage,
}

impl TestStore {
    pub fn sqlite(options: StoreOptions) -> TestStore {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(super::db_path(dir.path()), options).expect("open store");
        TestStore {
            store: store.into(),
            storage: Storage::Sqlite(dir),
        }
    }

    /// On a database of its own on the test server (`scripts/postgres.sh`).
    pub async fn postgres(options: StoreOptions) -> TestStore {
        let db = TestDatabase::create();
        let store = PgStore::open(db.url(), options)
            .await
            .expect("open the PostgreSQL store");
        TestStore {
            store: store.into(),
            storage: Storage::Postgres(db),
        }
    }

    /// Another store on the same data, as a second process would open it.
    pub async fn reopen(&self, options: StoreOptions) -> AnyStore {
        match &self.storage {
            Storage::Sqlite(dir) => SqliteStore::open(super::db_path(dir.path()), options)
                .expect("reopen store")
                .into(),
            Storage::Postgres(db) => PgStore::open(db.url(), options)
                .await
                .expect("reopen the PostgreSQL store")
                .into(),
        }
    }

    /// The one number `sql` answers, read outside the store (so it sees
    /// only what is committed). `sql` must mean the same in both
    /// dialects; values are quoted with [`quote`].
    pub fn count(&self, sql: &str) -> i64 {
        match &self.storage {
            Storage::Sqlite(dir) => super::raw(dir.path())
                .query_row(sql, [], |row| row.get(0))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            Storage::Postgres(db) => db
                .query(sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
        }
    }

    /// Committed events of a thread (a row of an item born complete stands
    /// for its start and its completion).
    pub fn committed_events(&self, thread_id: &str) -> u64 {
        let sql = format!(
            "SELECT coalesce(sum(CASE WHEN method IN ('item/recorded', 'item/projected') \
             THEN 2 ELSE 1 END), 0) FROM events WHERE thread_id = {}",
            quote(thread_id)
        );
        u64::try_from(self.count(&sql)).expect("a count")
    }

    pub fn backend(&self) -> &'static str {
        match self.storage {
            Storage::Sqlite(_) => "sqlite",
            Storage::Postgres(_) => "postgres",
        }
    }
}

/// `value` as an SQL string literal.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Runs each `async fn name(ts: TestStore)` once per backend, as the tests
/// `name::sqlite` and `name::postgres`, each on a fresh store opened with
/// `StoreOptions::default()`, or with what `name with options_fn` says.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident $(with $options:ident)?),* $(,)?) => {$(
        mod $name {
            fn options() -> spool_store::StoreOptions {
                #[allow(unused_mut, unused_assignments)]
                let mut options = spool_store::StoreOptions::default();
                $(options = super::$options();)?
                options
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::backend::TestStore::sqlite(options())).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::backend::TestStore::postgres(options()).await).await
            }
        }
    )*};
}
