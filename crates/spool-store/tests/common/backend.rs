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

    pub fn backend(&self) -> &'static str {
        match self.storage {
            Storage::Sqlite(_) => "sqlite",
            Storage::Postgres(_) => "postgres",
        }
    }
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
