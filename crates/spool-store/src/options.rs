//! How a store is opened: durability, delta grouping, connection limits.

use std::time::Duration;

/// When a commit is on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// fsync on every commit (SQLite `synchronous=FULL`): an acknowledged
    /// lifecycle event survives a power loss. The default.
    #[default]
    Full,
    /// No fsync per commit (WAL with `synchronous=NORMAL`): survives a crash
    /// of the process, but a power loss may lose the last commits.
    Normal,
}

impl Durability {
    pub(crate) fn pragma_value(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }
}

/// Settings of a store's open ([`crate::SqliteStore::open`],
/// [`crate::postgres::PgStore::open`]).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub durability: Durability,
    /// The longest a delta waits, after the first uncommitted one, before a
    /// group commit covers it (unless a lifecycle event commits it sooner).
    /// This bounds what a crash can lose of streamed text.
    pub delta_commit_delay: Duration,
    /// A batch is committed once it holds this many events even if its
    /// deadline has not come, to bound the writer's memory and latency.
    pub max_batch_events: usize,
    /// How long a connection waits for a lock held by another process.
    pub busy_timeout: Duration,
    /// Idle reader connections kept open for reuse.
    pub max_idle_readers: usize,
    /// Threads whose validation state the writer keeps in memory; idle ones
    /// beyond this are dropped and reloaded from the projection when used.
    pub cached_threads: usize,
    /// Open a store that lost committed data (see `mark.rs`) instead of
    /// refusing it.
    pub accept_data_loss: bool,
    /// PostgreSQL only: how long a server's hold on a thread lasts unless
    /// renewed (every fifth of it). A server that stops renewing (it died,
    /// or was paused) loses its threads this long after its last renewal,
    /// and another server takes them over (`docs/internals/replicas.md`).
    pub lease_ttl: Duration,
    /// PostgreSQL only: writers committing side by side, each with a
    /// connection of its own and the threads of its lane
    /// (`postgres/lane.rs`). One writer leaves the database's other cores
    /// idle while it waits for each commit.
    pub writer_lanes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Full,
            delta_commit_delay: Duration::from_millis(5),
            max_batch_events: 16_384,
            busy_timeout: Duration::from_secs(5),
            max_idle_readers: 4,
            cached_threads: 1_024,
            accept_data_loss: false,
            lease_ttl: Duration::from_secs(5),
            writer_lanes: 2,
        }
    }
}
