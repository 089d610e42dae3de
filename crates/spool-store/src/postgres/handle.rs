//! The PostgreSQL store's handle: what its clones share (the database,
//! the writers, the listener) and the helpers its `Store` methods
//! (`store.rs`) are built from.

use std::sync::Arc;

use super::RemoteCommit;
use super::lane::Writers;
use super::listen::Heard;
use super::writer::{self, Request};
use super::{PgDatabase, reads};
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::thread_state::Incoming;
use crate::types::Appended;

/// The PostgreSQL store. Cheap to clone: clones share the writers and the
/// pool. The writers stop, after committing what they accepted, when
/// [`Store::close`] is called or the last clone is dropped.
#[derive(Clone)]
pub struct PgStore {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) db: PgDatabase,
    /// What other servers say (`listen.rs`), listened for from the first
    /// call that needs it on.
    pub(super) heard: std::sync::OnceLock<(Heard, tokio::task::JoinHandle<()>)>,
    /// Where commits to tell of go: those of other servers (the
    /// listener's) and this server's takeovers (its writers').
    pub(super) commits: tokio::sync::broadcast::Sender<RemoteCommit>,
    /// The first receiver of commits, made with the channel so it hears
    /// the first word; taken by the first `remote_commits`.
    pub(super) first_commits:
        std::sync::Mutex<Option<tokio::sync::broadcast::Receiver<RemoteCommit>>>,
    /// This store's name among the servers on the database: the holder its
    /// leases name.
    pub(super) server_id: Arc<str>,
    pub(super) writers: Writers,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some((_, listener)) = self.heard.get() {
            listener.abort();
        }
        self.writers.stop();
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.inner.db.name())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (see [`PgDatabase::connect`]),
    /// migrates it and starts the writers.
    pub async fn open(url: &str, options: StoreOptions) -> Result<PgStore, StoreError> {
        let db = PgDatabase::connect(url).await?;
        let server_id: Arc<str> = uuid::Uuid::now_v7().to_string().into();
        let (commits, first) = tokio::sync::broadcast::channel(4_096);
        let writers = Writers::start(&db, &options, server_id.clone(), &commits).await?;
        Ok(PgStore {
            inner: Arc::new(Inner {
                db,
                heard: std::sync::OnceLock::new(),
                commits,
                first_commits: std::sync::Mutex::new(Some(first)),
                server_id,
                writers,
            }),
        })
    }

    /// The listener (`listen.rs`), started on the first call (on the
    /// caller's runtime).
    pub(super) fn heard(&self) -> &Heard {
        let (heard, _) = self.inner.heard.get_or_init(|| {
            let heard = Heard {
                commits: self.inner.commits.clone(),
                commands: Arc::new(tokio::sync::Notify::new()),
                replies: tokio::sync::broadcast::channel(1_024).0,
            };
            let db = &self.inner.db;
            let listener = tokio::spawn(super::listen::listen(
                db.config.clone(),
                db.tls.clone(),
                self.inner.server_id.clone(),
                heard.clone(),
            ));
            (heard, listener)
        });
        heard
    }

    /// The database, as messages name it (never with a password).
    pub fn database(&self) -> &str {
        self.inner.db.name()
    }

    /// Sends a checked append to its thread's writer and waits for the
    /// answer; `echo`: answer with what was appended.
    pub(super) async fn send_append(
        &self,
        thread_id: &str,
        events: Vec<Incoming>,
        echo: bool,
    ) -> Result<Vec<Appended>, StoreError> {
        self.ask(self.lane(thread_id), |reply| Request::Append {
            thread_id: thread_id.to_owned(),
            events,
            echo,
            reply,
        })
        .await
    }

    /// This store's name among the servers on the database.
    pub(super) fn server_id(&self) -> &str {
        &self.inner.server_id
    }

    /// The lane whose writer writes `thread_id`.
    pub(super) fn lane(&self, thread_id: &str) -> usize {
        self.inner.writers.lane(thread_id)
    }

    /// Sends a request to the writer of `lane` and waits for its answer.
    pub(super) async fn ask<T>(
        &self,
        lane: usize,
        request: impl FnOnce(writer::Reply<T>) -> Request,
    ) -> Result<T, StoreError> {
        self.inner.writers.ask(lane, request).await
    }

    pub(super) async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        self.inner.db.client().await
    }

    /// Runs `read` in a read-only repeatable-read transaction: several
    /// reads of one committed state.
    pub(super) async fn snapshot<T>(
        &self,
        read: impl AsyncFnOnce(&deadpool_postgres::Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let value = read(&tx).await?;
        tx.commit().await?;
        Ok(value)
    }

    /// Reads the rows of a thread; an empty answer is checked against the
    /// thread table so an unknown thread is an error, not an empty list.
    pub(super) async fn thread_rows<T>(
        &self,
        thread_id: &str,
        rows: Vec<T>,
    ) -> Result<Vec<T>, StoreError> {
        if rows.is_empty() && !reads::thread_exists(&self.client().await?, thread_id).await? {
            return Err(StoreError::UnknownThread(thread_id.to_owned()));
        }
        Ok(rows)
    }
}
