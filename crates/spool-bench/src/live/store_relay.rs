//! The store relay floor's log: the relay keeps every delta it sent as a
//! row of spool's own `events` table, where spool's writer would put it.
//!
//! The file is a store that spool created and migrated (so the schema,
//! page size and indexes are spool's), written on a bare connection
//! through the store writer's VFS, with its settings (WAL,
//! `synchronous=FULL`), as the layout floors of `bench store` write it. A
//! delta's row sits at its thread's place (`pos`: the thread's key, then
//! its seq), so each thread's rows are together, as in spool's log. The
//! rows of a group are inserted and committed on a thread of their own
//! within [`SYNC_WITHIN`](super::group::SYNC_WITHIN) of the group's first
//! delta being sent, as spool commits its deltas; SQLite checkpoints on
//! that thread, as it does by itself.
//!
//! What it leaves out of spool: every hop between the model's socket and
//! the client (the appender, the writer's seqs and checks, the hub, the
//! ordering stage, the connection's writer), the projection rows, and the
//! lifecycle events. Set beside the durable relay, it shows what writing
//! the deltas into spool's layout costs on this machine; set beside spool,
//! what spool's hops cost on top of it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::Context;
use rusqlite::Connection;
use spool_store::{Durability, SqliteStore, Store, StoreOptions};

use super::super::floor::bare_connection;
use super::group::Unsynced;

/// One delta, as the log keeps it.
pub(super) struct Row {
    pub(super) thread_id: String,
    pub(super) item_id: String,
    pub(super) payload: String,
}

/// The open log: what waits for its commit, and the connection that
/// commits it (the committing thread's, and `close`'s at the end).
struct Log {
    unsynced: Unsynced<Row>,
    store: Mutex<(Connection, Writer)>,
}

static LOG: OnceLock<Log> = OnceLock::new();

/// Whether this relay keeps its deltas in a store file.
pub(super) fn is_open() -> bool {
    LOG.get().is_some()
}

/// Hands a sent delta to the log, if it is open.
pub(super) fn keep(row: Row) {
    if let Some(log) = LOG.get() {
        log.unsynced.push([row]);
    }
}

/// Creates the store file at `path` (spool migrates it) and starts the
/// thread that commits the log's groups.
pub(super) async fn open(path: PathBuf) -> anyhow::Result<()> {
    let options = StoreOptions {
        durability: Durability::Full,
        ..StoreOptions::default()
    };
    SqliteStore::open(&path, options)?.close().await?;
    let conn = bare_connection(&path, spool_store::writer_vfs())?;
    conn.pragma_update(None, "foreign_keys", spool_store::CHECKS_FOREIGN_KEYS)?;
    let log = Log {
        unsynced: Unsynced::new(),
        store: Mutex::new((conn, Writer::default())),
    };
    let log: &'static Log = match LOG.set(log) {
        Ok(()) => LOG.get().context("the log was just set")?,
        Err(_) => anyhow::bail!("the store relay's log is open already"),
    };
    std::thread::Builder::new()
        .name("relay-store".to_owned())
        .spawn(move || {
            let mut group = Vec::new();
            loop {
                log.unsynced.wait_due();
                if let Err(error) = commit_waiting(log, &mut group) {
                    eprintln!("relay: cannot write the store: {error:#}");
                    return;
                }
            }
        })?;
    Ok(())
}

/// Commits what is still waiting, once stdin has ended: the bench counts
/// the rows after the relay exits.
pub(super) fn close() -> anyhow::Result<()> {
    match LOG.get() {
        Some(log) => commit_waiting(log, &mut Vec::new()),
        None => Ok(()),
    }
}

/// Takes the rows waiting and commits them, in the order they were sent
/// (the store's lock is taken before the rows, so two groups commit in
/// the order they were taken).
fn commit_waiting(log: &Log, group: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut store = log.store.lock().unwrap_or_else(|p| p.into_inner());
    log.unsynced.take(group);
    let (conn, writer) = &mut *store;
    let result = if group.is_empty() {
        Ok(())
    } else {
        writer.commit(conn, group)
    };
    group.clear();
    result
}

/// How many deltas the store relay's file at `path` holds.
pub(super) fn kept(path: &Path) -> anyhow::Result<i64> {
    let conn = Connection::open(path)?;
    Ok(conn.query_row(
        "SELECT count(*) FROM events WHERE method = 'item/agentMessage/delta'",
        [],
        |row| row.get(0),
    )?)
}

/// The threads the log has rows of: each one's key and its last seq.
#[derive(Default)]
struct Writer {
    threads: HashMap<String, (i64, i64)>,
    last_key: i64,
}

const INSERT_THREAD: &str = "INSERT INTO threads (id, preview, model_provider, cwd, \
     cli_version, history_mode, dev_mode, created_at_ms, updated_at_ms, key) \
     VALUES (?1, '', 'bench', '/', 'relay', 'server', 0, ?2, ?2, ?3)";

const INSERT_EVENT: &str = "INSERT INTO events (pos, thread_id, seq, method, item_id, at_ms, \
     payload) VALUES (?1, ?2, ?3, 'item/agentMessage/delta', ?4, ?5, ?6)";

/// The bits of `pos` below the thread's key (spool's `sqlite/keys.rs`).
const SEQ_BITS: u32 = 36;

impl Writer {
    /// One transaction: the group's rows, each at its thread's place; a
    /// thread's row first when the log has not seen it.
    fn commit(&mut self, conn: &Connection, group: &[Row]) -> anyhow::Result<()> {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let mut event = conn.prepare_cached(INSERT_EVENT)?;
        for row in group {
            let (key, seq) = match self.threads.get_mut(&row.thread_id) {
                Some(thread) => thread,
                None => {
                    self.last_key += 1;
                    conn.prepare_cached(INSERT_THREAD)?.execute((
                        &row.thread_id,
                        at_ms,
                        self.last_key,
                    ))?;
                    // Seq 1 is the thread's start in spool's log.
                    self.threads
                        .entry(row.thread_id.clone())
                        .or_insert((self.last_key, 1))
                }
            };
            *seq += 1;
            event.execute((
                *key << SEQ_BITS | *seq,
                &row.thread_id,
                *seq,
                &row.item_id,
                at_ms,
                &row.payload,
            ))?;
        }
        conn.prepare_cached("COMMIT")?
            .execute([])
            .context("COMMIT")?;
        Ok(())
    }
}

/// The file the store relay keeps its log in, under a server's home.
pub(super) fn path(home: &Path) -> PathBuf {
    home.join("relay.db")
}
