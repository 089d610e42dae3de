//! The writer's own connection, driven by a current-thread runtime of the
//! writer thread: each statement is a `block_on`, which keeps the writer's
//! state checks (which read committed rows through [`Rows`]) synchronous,
//! as SQLite's are. `block_on`s do not nest: code that runs statements
//! between state checks runs each with its own.

use spool_core::{ItemRecord, TurnRecord};
use tokio::runtime::Runtime;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::query::CachedClient;
use super::reads;
use crate::error::StoreError;
use crate::thread_state::rows::{Kind, Rows};
use crate::types::ThreadRecord;

/// The writer's connection and the runtime that drives it.
pub(super) struct Conn {
    runtime: Runtime,
    pub(super) client: CachedClient,
}

impl Conn {
    pub(super) fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }
}

impl Rows for Conn {
    fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        self.block_on(reads::read_thread(&self.client, thread_id))
    }

    fn items(&self, thread_id: &str, open_only: bool) -> Result<Vec<ItemRecord>, StoreError> {
        self.block_on(reads::read_items(&self.client, thread_id, open_only))
    }

    fn turns(&self, thread_id: &str, open_only: bool) -> Result<Vec<TurnRecord>, StoreError> {
        self.block_on(reads::read_turns(&self.client, thread_id, open_only))
    }

    fn item(&self, thread_id: &str, item_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        self.block_on(reads::read_item(&self.client, thread_id, item_id))
    }

    fn status(&self, thread_id: &str, kind: Kind, id: &str) -> Result<Option<String>, StoreError> {
        self.block_on(reads::status(&self.client, thread_id, kind, id))
    }

    fn max_id(&self, thread_id: &str, kind: Kind) -> Result<Option<String>, StoreError> {
        self.block_on(reads::max_id(&self.client, thread_id, kind))
    }

    /// No reservations: every seq is committed before it is answered.
    fn reserved_upto(&self, _thread_id: &str) -> Result<u64, StoreError> {
        Ok(0)
    }
}

impl Conn {
    /// Connects on a runtime of this thread's own.
    pub(super) fn open(
        config: &Config,
        tls: MakeRustlsConnect,
        database: &str,
    ) -> Result<Conn, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StoreError::WriterThread)?;
        let (client, connection) =
            runtime
                .block_on(config.connect(tls))
                .map_err(|e| StoreError::PgConnect {
                    database: database.to_owned(),
                    reason: e.to_string(),
                })?;
        runtime.spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "the store writer's PostgreSQL connection ended");
            }
        });
        Ok(Conn {
            runtime,
            client: CachedClient::new(client),
        })
    }
}
