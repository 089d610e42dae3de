//! Why a store operation failed.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use spool_core::ReduceError;

/// Boxed cause of a row that could not be decoded.
pub type DecodeCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every error the store returns.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "the store at {path} has schema version {found}, newer than the {supported} this build \
         of spool knows; use a newer spool"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// A thread's rows are keyed `key << 36 | seq` (`sqlite/keys.rs`): a
    /// seq past 2^36 - 1, or a thread key past 2^27 - 1, has no key.
    #[error(
        "thread {thread_id} cannot store seq {seq} under thread key {key}: past what a row's \
         key holds (seqs below 2^36, thread keys below 2^27)"
    )]
    PastKeySpace {
        thread_id: String,
        key: i64,
        seq: u64,
    },
    /// The store holds less than it had committed (`mark.rs`).
    #[error(
        "the store at {path} lost committed data: it had committed a log of length \
         {committed}, and now has {found} (was its -wal file deleted or damaged, or the file \
         truncated?); restore it from a backup, or open it anyway with --accept-data-loss"
    )]
    DataLoss {
        path: PathBuf,
        committed: i64,
        found: String,
    },
    #[error("cannot write the commit mark {path}: {source}")]
    Mark {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("migrating the store at {path} to schema version {version} failed: {source}")]
    Migration {
        path: PathBuf,
        version: i64,
        #[source]
        source: rusqlite::Error,
    },
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The PostgreSQL store could not be reached or refused the login.
    /// `database` names it without its URL, which may hold a password.
    #[error("cannot connect to the PostgreSQL store {database}: {reason}")]
    PgConnect { database: String, reason: String },
    #[error(
        "the PostgreSQL store {database} has schema version {found}, newer than the \
         {supported} this build of spool knows; use a newer spool"
    )]
    PgSchemaTooNew {
        database: String,
        found: i64,
        supported: i64,
    },
    #[error(
        "migrating the PostgreSQL store {database} to schema version {version} failed: {source}"
    )]
    PgMigration {
        database: String,
        version: i64,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// Another server holds the thread (PostgreSQL): it alone appends to it
    /// until its lease ends.
    #[error("thread {thread_id} is held by server {holder}")]
    HeldElsewhere { thread_id: String, holder: String },
    /// A command forwarded to the server holding a thread got no reply.
    #[error("the server holding thread {thread_id} did not answer within {waited:?}")]
    ForwardTimeout {
        thread_id: String,
        waited: std::time::Duration,
    },
    /// Forwarding is for stores other processes write (PostgreSQL).
    #[error("this store has no other servers to forward to")]
    NoForwarding,
    /// This server held the thread but its lease ran out (it was paused or
    /// cut off past the lease's end) and its append was refused: another
    /// server may have taken the thread over. Nothing of the append is
    /// stored.
    #[error("this server lost its lease on thread {thread_id}; nothing of the append is stored")]
    LeaseLost { thread_id: String },
    /// A commit failed. Every caller whose writes it covered gets this error
    /// (hence the `Arc`); none of those writes is stored, and deltas that
    /// were acknowledged but not yet committed are lost, as in a crash.
    #[error("commit failed: {0}")]
    Commit(#[source] Arc<StoreError>),
    /// The writer could not undo a refused append on its in-memory state of
    /// a thread; the batch holding it was dropped as if a commit had failed.
    #[error("the writer lost the uncommitted state of thread {thread_id}: {reason}")]
    StateLost { thread_id: String, reason: String },
    /// A check needed the tables while a commit held the writer's
    /// connection: the writer lets no such append in then, so this is a
    /// bug, refused rather than answered wrongly.
    #[error("the store writer needed its connection while a commit held it")]
    WriterBusy,
    #[error("cannot start the writer thread: {0}")]
    WriterThread(#[source] std::io::Error),
    #[error("{0}")]
    CorruptRow(Box<CorruptRow>),
    #[error("cannot encode {what} as JSON: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("unknown thread {0}")]
    UnknownThread(String),
    #[error("thread {thread_id} has no request {request_id}")]
    UnknownRequest {
        thread_id: String,
        request_id: String,
    },
    #[error("request {request_id} was already answered")]
    RequestAlreadyResolved { request_id: String },
    #[error("thread {0} already exists")]
    ThreadExists(String),
    #[error("event {index} ({method}) of an append to thread {expected} belongs to thread {got}")]
    ThreadMismatch {
        expected: String,
        got: String,
        index: usize,
        method: &'static str,
    },
    #[error("event {index} of an append is thread/started, which only create_thread writes")]
    ThreadStartedAppended { index: usize },
    /// The reducer refused an event (a protocol violation). Nothing of the
    /// append that carried it is stored.
    #[error("event {index} ({method}) refused: {source}")]
    Refused {
        index: usize,
        method: &'static str,
        #[source]
        source: ReduceError,
    },
    #[error("invalid thread list cursor {0:?}")]
    BadCursor(String),
    #[error("the store is closed")]
    Closed,
    /// An [`crate::Appender`] stopped on this earlier error; nothing pushed
    /// after it was appended.
    #[error("the appender stopped: {0}")]
    AppenderStopped(#[source] Arc<StoreError>),
    #[error("a read task failed: {0}")]
    ReadTask(String),
}

/// A row whose content cannot be decoded: which table, thread, seq and
/// item, and why. Surfaced as an error, never skipped and never a panic.
#[derive(Debug)]
pub struct CorruptRow {
    pub table: &'static str,
    pub thread_id: String,
    /// The seq of the event, or of the last change of the item or turn;
    /// `None` when the seq column itself is unreadable.
    pub seq: Option<u64>,
    pub item_id: Option<String>,
    pub column: &'static str,
    pub cause: DecodeCause,
}

impl fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt row in {} (thread {}",
            self.table, self.thread_id
        )?;
        match self.seq {
            Some(seq) => write!(f, ", seq {seq}")?,
            None => write!(f, ", seq unreadable")?,
        }
        if let Some(item_id) = &self.item_id {
            write!(f, ", item {item_id}")?;
        }
        write!(f, "): column {}: {}", self.column, self.cause)
    }
}

impl StoreError {
    /// The corrupt row this error is about, if it is one.
    pub fn corrupt_row(&self) -> Option<&CorruptRow> {
        match self {
            StoreError::CorruptRow(row) => Some(row),
            _ => None,
        }
    }
}
