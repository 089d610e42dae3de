//! Checkpoints on a thread of their own, so the writer never runs one.
//!
//! A commit lands in `<db>-wal`; a checkpoint copies the WAL's pages into
//! the database file and syncs it. SQLite runs one inside the commit that
//! takes the WAL past `wal_autocheckpoint` pages, on the committing thread:
//! there, the writer. Measured under 100 streaming threads, those commits
//! took 4–6 ms instead of ~1 ms, and every delta arriving meanwhile waited
//! for its seq: they were the tail of delivery latency.
//!
//! So the writer's connection has a WAL hook of its own ([`install`]),
//! which replaces SQLite's automatic checkpoint (itself a WAL hook). After
//! each commit it notes how long the WAL is; the writer nudges this thread
//! once the WAL holds [`WAL_PAGES`] or more (SQLite's own threshold), and
//! the thread runs a `PASSIVE` checkpoint on its own connection, at most
//! once per [`INTERVAL`]. A passive checkpoint takes no lock the writer
//! needs: the writer goes on appending to the WAL while it copies. When a
//! checkpoint has copied everything, the writer's next transaction starts
//! the WAL over from its beginning, so the file stops growing.
//!
//! The threshold is SQLite's rather than "after every commit": a
//! checkpoint syncs the database file, a device flush beside the writer's
//! own, and checkpointing every 20 ms whatever the WAL held cost a batched
//! `add_items` 2–5% of its throughput against checkpointing by size
//! (side by side, `docs/internals/log.md`).
//!
//! A writer that keeps committing during every checkpoint could leave the
//! WAL never wholly copied, and growing. So the hook checkpoints on the
//! writer's own connection past [`BACKSTOP_PAGES`] (8 times SQLite's
//! default): it copies what is left, which the thread here has mostly done
//! already.

use std::ffi::c_int;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::hooks::Wal;
use rusqlite::{Connection, OpenFlags};

use super::worker::Worker;
use crate::error::StoreError;

/// The least time between two checkpoints of this thread.
const INTERVAL: Duration = Duration::from_millis(20);

/// The WAL's length (pages) from which a commit nudges the thread: SQLite's
/// default `wal_autocheckpoint`.
pub(super) const WAL_PAGES: c_int = 1_000;

/// The WAL's length (pages) from which the writer's connection checkpoints
/// itself after a commit, as SQLite's automatic checkpoint would.
pub(super) const BACKSTOP_PAGES: c_int = 8_000;

/// The writer's handle on the checkpoint thread; dropping it stops the
/// thread and waits for it.
pub(super) struct Checkpointer {
    worker: Worker<()>,
    /// The WAL's length in pages after the writer connection's latest
    /// commit, as its WAL hook saw it.
    wal_pages: Arc<AtomicI32>,
}

impl Checkpointer {
    /// Opens a connection of its own on the store at `path` (already
    /// migrated, in WAL mode), starts the thread, and gives `writer`, the
    /// writer's connection, its WAL hook.
    pub(super) fn start(path: &Path, writer: &mut Connection) -> Result<Checkpointer, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(open_error)?;
        // A checkpoint already running elsewhere (another store on the
        // file) is no reason to wait: the next nudge tries again.
        conn.busy_timeout(Duration::ZERO).map_err(open_error)?;
        let worker = Worker::start("spool-store-checkpoint", move |inbox| run(&conn, &inbox))?;
        let wal_pages = Arc::new(AtomicI32::new(0));
        install(writer, wal_pages.clone(), BACKSTOP_PAGES)?;
        Ok(Checkpointer { worker, wal_pages })
    }

    /// Says a commit added to the WAL: wakes the thread if the WAL is long
    /// enough to copy. Never blocks.
    pub(super) fn nudge(&self) {
        if self.wal_pages.load(Ordering::Relaxed) < WAL_PAGES {
            return;
        }
        // Full: a nudge is already waiting, which covers this commit.
        let _ = self.worker.offer(());
    }
}

/// Gives the writer's connection its WAL hook: after each commit it notes
/// the WAL's length in `wal_pages` and, from `backstop` pages on
/// ([`BACKSTOP_PAGES`]), checkpoints on that connection. Installing it
/// ends SQLite's automatic checkpoint on the connection, which is a WAL
/// hook too (so setting `wal_autocheckpoint` later would end this one).
fn install(
    writer: &mut Connection,
    wal_pages: Arc<AtomicI32>,
    backstop: c_int,
) -> Result<(), StoreError> {
    writer.wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
        let before = wal_pages.swap(pages, Ordering::Relaxed);
        crate::phases::committed_frames(before, pages);
        if pages >= backstop
            && let Err(error) = wal.checkpoint()
        {
            // Busy (the thread is checkpointing) or an I/O error. Never
            // the commit's error: the hook's result would be the
            // `COMMIT`'s, and the commit is durable already.
            tracing::debug!(%error, "store backstop checkpoint not done");
        }
        Ok(())
    }))?;
    Ok(())
}

fn run(conn: &Connection, inbox: &Receiver<()>) {
    let mut last: Option<Instant> = None;
    while inbox.recv().is_ok() {
        // Nudges that come within the interval are one checkpoint, at its
        // end. The thread sleeps rather than waits on the channel: a nudge
        // then fills the channel's one slot and wakes no one, where a
        // waiting receiver was woken by every commit, a context switch per
        // commit on a machine with two cores. The writer's going away is
        // seen when the sleep ends.
        if let Some(due) = last.map(|last| last + INTERVAL) {
            let now = Instant::now();
            if now < due {
                std::thread::sleep(due - now);
            }
            match inbox.try_recv() {
                Ok(()) | Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return,
            }
        }
        last = Some(Instant::now());
        let result = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        });
        match result {
            Ok((frames, copied)) => {
                tracing::trace!(frames, copied, "store checkpoint");
            }
            // Busy (another checkpoint) or an I/O error: the writer's
            // backstop and the next nudge cover it.
            Err(error) => tracing::debug!(%error, "store checkpoint not done"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WAL connection with the hook, its backstop at `backstop` pages.
    fn hooked(dir: &Path, backstop: c_int) -> (Connection, Arc<AtomicI32>) {
        let mut conn = Connection::open(dir.join("hook.db")).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.execute_batch("CREATE TABLE t (body TEXT)").unwrap();
        let pages = Arc::new(AtomicI32::new(0));
        install(&mut conn, pages.clone(), backstop).unwrap();
        (conn, pages)
    }

    fn write_pages(conn: &Connection, commits: usize) {
        let body = "x".repeat(4000);
        for _ in 0..commits {
            conn.execute("INSERT INTO t (body) VALUES (?1)", (&body,))
                .unwrap();
        }
    }

    fn db_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("hook.db")).unwrap().len()
    }

    #[test]
    fn the_hook_notes_the_wals_length_and_leaves_it_below_the_backstop() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, pages) = hooked(dir.path(), BACKSTOP_PAGES);
        let before = db_len(dir.path());
        // Past SQLite's own threshold (1,000 pages), which the hook
        // replaced: the database file must not take the pages yet.
        write_pages(&conn, 1_200);
        assert!(pages.load(Ordering::Relaxed) >= 1_200, "{pages:?}");
        assert_eq!(db_len(dir.path()), before, "nothing was checkpointed");
    }

    #[test]
    fn the_hook_checkpoints_from_the_backstop_on() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, pages) = hooked(dir.path(), 50);
        let before = db_len(dir.path());
        // Some 200 pages, about one a commit.
        write_pages(&conn, 200);
        assert!(
            db_len(dir.path()) > before + 150 * 4096,
            "the backstop copied the WAL into the file: {} bytes from {before}, {pages:?}",
            db_len(dir.path())
        );
        // Each time wholly copied, so the next write started it over: it
        // never grew past the backstop by more than a commit.
        assert!(pages.load(Ordering::Relaxed) < 50 + 4, "{pages:?}");
    }
}
