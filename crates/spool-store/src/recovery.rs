//! Crash recovery on open: turns a crash left `inProgress` end
//! `interrupted` and their open items `incomplete`, with what was committed
//! (a crash loses at most the deltas not yet committed, and says so).
//! Recovery appends the reducer's closing events
//! ([`spool_core::ThreadReducer::interrupt_all`]) through the writer like
//! any other append, so they are validated, get the next seqs and update
//! the projections in the same commit; no row is ever edited.
//!
//! A turn that has a saved run state (`run_states`, written when a run
//! pauses on a person) is not closed: it is waiting, not abandoned, and the
//! runtime resumes it from that state (`docs/internals/run-state.md`).
//!
//! # The rule: recover only when no other process has the store open
//!
//! A turn is in progress for as long as some process holding the store is
//! running it: while `spool run` streams, a `spool threads list` opening the
//! same file must not close its turn. So every open takes an advisory lock
//! on a sidecar file, `<db path>.lock`:
//!
//! 1. It first tries to take the lock **exclusively, without waiting**. If
//!    that succeeds, no handle on the store is open anywhere: every turn
//!    still in progress was left by a process that is gone, and this open
//!    recovers them all, then turns its lock into a shared one.
//! 2. Otherwise it waits for a **shared** lock and recovers nothing. The
//!    wait only lasts while another opener holds the exclusive lock, that
//!    is while it recovers, so no open ever sees half a recovery.
//! 3. The shared lock is held for the store's lifetime, released only
//!    after its writer has committed its last batch: a newcomer must not
//!    close a turn whose pending deltas the old writer is still committing.
//!
//! So closing the last handle and opening the store again, even within one
//! process, recovers the turns that were left open: with no handle open,
//! nobody can be running them. A runtime that means to continue a turn
//! keeps its store open.
//!
//! Turning the exclusive lock into a shared one is not atomic (`flock`
//! drops it, then takes the shared one), so another opener may get the
//! exclusive lock in between and run a recovery of its own. That is
//! harmless: this open has committed its recovery and has no turn of its
//! own yet (it has not returned), and it waits in `lock_shared` until the
//! other has finished.
//!
//! Why a sidecar file and `flock` (std's `File::try_lock`, `lock_shared`):
//! SQLite's locks on the database are POSIX record locks, which belong to
//! the process (two handles in one process would not see each other) and
//! vanish when any descriptor of the file is closed. `flock` locks belong to
//! the open file description, so two handles conflict even in one process,
//! and they die with the process that holds them, however it dies. The lock
//! file is never deleted: a process could have just opened it, and the next
//! opener would then lock a different inode.
//!
//! The lock is advisory: a tool that opens the database without spool (the
//! `sqlite3` shell) takes no lock, but it runs no turns either.
//!
//! # Cost
//!
//! Finding the threads to recover reads the partial index `items_open`
//! (the rows of `items` with status `inProgress`: open items and open
//! turns, with `is_turn` in the index) and nothing else, so an open
//! with nothing to recover costs one small query. Each thread found is
//! then loaded from its projection and closed; all of them share one
//! group commit.
//!
//! A thread whose recovery fails (a corrupt row, a refused event) is logged
//! and left as it was: the store still opens, other threads are unaffected,
//! and the next open that finds itself alone tries again.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::ffi;
use spool_protocol::ServerNotification;
use tokio::task::JoinSet;

use crate::Store;
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::sqlite::SqliteStore;
use crate::sqlite::schema::open_reader;
use crate::thread_state::ops::interrupt_abandoned;

/// The threads with a turn in progress. The `WHERE` clause is the partial
/// index's own, and the index holds `is_turn`, so SQLite scans `items_open`
/// alone (its entries are the open items and turns).
const THREADS_IN_PROGRESS: &str = "SELECT DISTINCT thread_id FROM items \
     WHERE status = 'inProgress' AND is_turn = 1 ORDER BY thread_id";

/// Threads whose seq reservation a crash may have left ahead of their log
/// (`thread_state/reserve.rs`). Rows exist only while a thread streams, so
/// the table is small.
const THREADS_RESERVED: &str = "SELECT thread_id FROM seq_reservations ORDER BY thread_id";

/// Raises each thread's `updated_at_ms` to the time of its newest event
/// where it lags: the writer writes it lazily (`writer/batch.rs`) and
/// always before it stops, so only a crash leaves it behind, by less than
/// `UPDATED_AT_LAG_MS`. One probe of each thread's newest event, and
/// writes only for rows that lag.
const REPAIR_UPDATED_AT: &str = concat!(
    "UPDATE threads SET updated_at_ms = newest.at_ms FROM (SELECT t.id, ",
    crate::sqlite::keys::newest_event_of!("at_ms", "t.key"),
    " AS at_ms FROM threads t) AS newest \
     WHERE threads.id = newest.id AND threads.updated_at_ms < newest.at_ms"
);

/// Repairs what a crash can leave behind in the thread rows (see
/// [`REPAIR_UPDATED_AT`]). Runs on the writer's connection of an open that
/// is alone, before the writer starts.
pub(crate) fn repair_updated_at(
    conn: &rusqlite::Connection,
    path: &Path,
) -> Result<(), StoreError> {
    let repaired = conn
        .execute(REPAIR_UPDATED_AT, ())
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
    if repaired > 0 {
        tracing::info!(threads = repaired, path = %path.display(), "repaired updated_at after a crash");
    }
    Ok(())
}

/// A failure to open or lock the sidecar file, as a [`StoreError::Open`] of
/// the database carrying SQLite's own code for it (`SQLITE_CANTOPEN`,
/// `SQLITE_IOERR_LOCK`), since `StoreError` has no variant for a lock.
fn lock_failure(db_path: &Path, code: i32, lock_path: &Path, error: io::Error) -> StoreError {
    let verb = match code {
        ffi::SQLITE_CANTOPEN => "open",
        _ => "lock",
    };
    let message = format!("cannot {verb} {}: {error}", lock_path.display());
    StoreError::Open {
        path: db_path.to_owned(),
        source: rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(message)),
    }
}

/// A store's hold on its sidecar lock file, shared (after recovery, if this
/// open was alone). Released when dropped.
#[derive(Debug)]
pub(crate) struct StoreLock {
    file: File,
    path: PathBuf,
    /// No other handle was open when this one took the lock: it recovers.
    alone: bool,
}

impl StoreLock {
    /// Takes the lock of the store at `db_path`: exclusive if nobody holds
    /// it, otherwise shared, waiting while another opener recovers.
    pub(crate) fn acquire(db_path: &Path) -> Result<StoreLock, StoreError> {
        let path = lock_path(db_path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|error| lock_failure(db_path, ffi::SQLITE_CANTOPEN, &path, error))?;
        let alone = match file.try_lock() {
            Ok(()) => true,
            Err(TryLockError::WouldBlock) => {
                file.lock_shared()
                    .map_err(|error| lock_failure(db_path, ffi::SQLITE_IOERR_LOCK, &path, error))?;
                false
            }
            Err(TryLockError::Error(error)) => {
                return Err(lock_failure(db_path, ffi::SQLITE_IOERR_LOCK, &path, error));
            }
        };
        Ok(StoreLock { file, path, alone })
    }

    /// Whether this open found no other handle on the store.
    pub(crate) fn alone(&self) -> bool {
        self.alone
    }

    /// Lets other handles open beside this one.
    fn share(&self, db_path: &Path) -> Result<(), StoreError> {
        self.file
            .lock_shared()
            .map_err(|error| lock_failure(db_path, ffi::SQLITE_IOERR_LOCK, &self.path, error))
    }
}

/// `<db path>.lock`, beside the database.
fn lock_path(db_path: &Path) -> PathBuf {
    let mut path = db_path.as_os_str().to_owned();
    path.push(".lock");
    PathBuf::from(path)
}

/// Called by [`SqliteStore::open`] once the writer runs: if `lock` says
/// this open is alone, closes every turn left in progress, then shares the
/// lock. Fails only if the store cannot be searched or the lock shared;
/// a thread that cannot be recovered is logged and skipped.
pub(crate) fn recover_if_alone(
    store: &SqliteStore,
    lock: &StoreLock,
    options: &StoreOptions,
) -> Result<(), StoreError> {
    if !lock.alone() {
        return Ok(());
    }
    let recovered = recover(store, options);
    // Every open handle holds the lock shared. (If `recovered` is an error,
    // `open` fails and dropping the store releases the lock.)
    lock.share(store.path())?;
    recovered
}

fn recover(store: &SqliteStore, options: &StoreOptions) -> Result<(), StoreError> {
    let (mut threads, reserved) = threads_to_recover(store.path(), options)?;
    for thread_id in &reserved {
        if !threads.contains(thread_id) {
            threads.push(thread_id.clone());
        }
    }
    if threads.is_empty() {
        return Ok(());
    }
    tracing::info!(
        threads = threads.len(),
        path = %store.path().display(),
        "closing turns left in progress by a process that is gone"
    );
    let at_ms = now_ms();
    let outcomes = on_private_runtime(async {
        let mut tasks = JoinSet::new();
        for thread_id in threads {
            let store = store.clone();
            // Concurrent, so the writer covers them all with one commit.
            tasks.spawn(async move {
                let outcome = close_open_turns(&store, &thread_id, at_ms).await;
                (thread_id, outcome)
            });
        }
        tasks.join_all().await
    })?;
    for (thread_id, outcome) in outcomes {
        match outcome {
            Ok(closed) => tracing::info!(
                %thread_id,
                items = closed.items,
                turns = closed.turns,
                "recovered: items incomplete, turns interrupted"
            ),
            Err(error) => tracing::error!(
                %thread_id,
                %error,
                "crash recovery failed; the thread's turn is left in progress"
            ),
        }
    }
    Ok(())
}

/// The ids of threads with a turn in progress (from the partial index),
/// and of threads holding a seq reservation.
fn threads_to_recover(
    path: &Path,
    options: &StoreOptions,
) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let conn = open_reader(path, options)?;
    let ids = |sql: &str| -> Result<Vec<String>, StoreError> {
        let mut stmt = conn.prepare(sql)?;
        let ids = stmt
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ids)
    };
    Ok((ids(THREADS_IN_PROGRESS)?, ids(THREADS_RESERVED)?))
}

/// What recovery closed in one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Closed {
    items: usize,
    turns: usize,
}

async fn close_open_turns(
    store: &SqliteStore,
    thread_id: &str,
    at_ms: i64,
) -> Result<Closed, StoreError> {
    let reducer = store.reducer(thread_id).await?;
    // A turn with a saved run state is paused (on a person, say), not
    // abandoned: the runtime resumes it from that state.
    let resumable: HashSet<String> = store
        .run_states(thread_id)
        .await?
        .into_iter()
        .map(|state| state.turn_id)
        .collect();
    let closing = interrupt_abandoned(&reducer, &resumable, at_ms);
    let items = closing
        .iter()
        .filter(|event| matches!(event, ServerNotification::ItemCompleted(_)))
        .count();
    let closed = Closed {
        items,
        turns: closing.len() - items,
    };
    // Appending (even nothing) logs the `thread/eventsLost` of seqs a crash
    // voided before anything else, and settles the thread's reservation.
    store.append_even_empty(thread_id, closing).await?;
    Ok(closed)
}

/// Runs `future` to completion on a runtime of its own, on a thread of its
/// own. `open` is synchronous and may be called with or without a tokio
/// runtime around it; store reads need one (`spawn_blocking`), and blocking
/// a caller's runtime thread on them could starve it.
fn on_private_runtime<F>(future: F) -> Result<F::Output, StoreError>
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        let runner = scope.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .map(|runtime| runtime.block_on(future))
        });
        match runner.join() {
            Ok(output) => output.map_err(|error| {
                StoreError::ReadTask(format!(
                    "cannot start a runtime for crash recovery: {error}"
                ))
            }),
            // A panic here is a bug in recovery: let it surface as one.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Now, in unix milliseconds: the time recovery closes things at.
fn now_ms() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use rusqlite::ErrorCode;

    use super::*;
    use crate::sqlite::schema::open_writer;

    #[test]
    fn the_first_holder_is_alone_and_later_ones_share() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("spool.db");
        let first = StoreLock::acquire(&db).unwrap();
        assert!(first.alone());
        // Once the first shares, a second holder (even in this process:
        // the locks belong to open files, not processes) shares too.
        first.share(&db).unwrap();
        let second = StoreLock::acquire(&db).unwrap();
        assert!(!second.alone());
        drop(first);
        let third = StoreLock::acquire(&db).unwrap();
        assert!(!third.alone(), "the second holder is still open");
        drop((second, third));
        assert!(StoreLock::acquire(&db).unwrap().alone());
        assert!(dir.path().join("spool.db.lock").exists());
    }

    #[test]
    fn a_lock_file_that_cannot_be_created_is_an_open_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("missing-dir").join("spool.db");
        let error = StoreLock::acquire(&db).unwrap_err();
        let StoreError::Open { path, source } = &error else {
            panic!("expected an open error, got {error:?}");
        };
        assert_eq!(path, &db);
        assert_eq!(source.sqlite_error_code(), Some(ErrorCode::CannotOpen));
        let message = error.to_string();
        assert!(
            message.contains("cannot open") && message.contains("spool.db.lock"),
            "{message}"
        );
    }

    #[test]
    fn finding_threads_to_recover_reads_the_partial_index_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("spool.db");
        let conn = open_writer(&db, &StoreOptions::default()).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {THREADS_IN_PROGRESS}"))
            .unwrap()
            .query_map([], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert!(
            plan[0].contains("COVERING INDEX items_open"),
            "the search must not scan the items table: {plan:?}"
        );
    }
}
