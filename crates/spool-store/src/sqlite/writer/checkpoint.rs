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
//! A writer that keeps committing during every checkpoint leaves the WAL
//! never wholly copied: what it committed while the thread copied is still
//! to copy when the thread is done, so its next transaction cannot start
//! the WAL over, and the file grows instead. Growing costs every commit
//! that extends the file: its `fsync` also journals the file's new size
//! (one-item `add_items` calls, (a) of `spool bench store`, let the WAL
//! grow to 8,000 pages, 33 MB, and their `COMMIT`s took ~18 µs longer on
//! average than with the WAL started over near 1,000 pages). So after each
//! of the thread's checkpoints the writer owes a **catch-up**
//! ([`Checkpointer::owes_catch_up`]): at its next idle moment (its inbox
//! empty, no batch pending) it lends its connection to the commit thread,
//! which runs a `PASSIVE` checkpoint on it ([`catch_up`]) that copies only
//! what was committed meanwhile, so that the writer's next transaction
//! starts the WAL over, as it would after SQLite's own checkpoint. Lent, as
//! for a commit of deltas, so that deltas still get their seqs meanwhile.
//! Only when what is left is at most [`CATCH_UP_PAGES`]: a writer that
//! committed more than that during the thread's checkpoint is busy (16
//! concurrent appenders, (e), commit ~70 pages ~1,600 times a second), and
//! a catch-up copying as much would hold up its next commit for longer
//! than growing the file costs it.
//!
//! And should the writer never be idle, the hook checkpoints on the
//! writer's own connection past [`BACKSTOP_PAGES`] (8 times SQLite's
//! default): it copies what is left, which the thread here has mostly done
//! already.

use std::ffi::c_int;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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

/// The most pages a catch-up copies (module docs).
const CATCH_UP_PAGES: c_int = 256;

/// The writer's handle on the checkpoint thread; dropping it stops the
/// thread and waits for it.
pub(super) struct Checkpointer {
    worker: Worker<()>,
    /// The WAL's length in pages after the writer connection's latest
    /// commit, as its WAL hook saw it.
    wal_pages: Arc<AtomicI32>,
    /// What the thread's latest checkpoint left the writer.
    done: Arc<Done>,
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
        let done = Arc::new(Done {
            owed: AtomicBool::new(false),
            copied: AtomicI32::new(0),
        });
        let told = done.clone();
        let worker = Worker::start("spool-store-checkpoint", move |inbox| {
            run(&conn, &inbox, &told)
        })?;
        let wal_pages = Arc::new(AtomicI32::new(0));
        install(writer, wal_pages.clone(), BACKSTOP_PAGES)?;
        Ok(Checkpointer {
            worker,
            wal_pages,
            done,
        })
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

    /// Whether the idle writer should lend its connection for a
    /// [`catch_up`]: the thread has checkpointed since the last one, and
    /// left at most [`CATCH_UP_PAGES`] to copy (module docs). Asked once
    /// per checkpoint of the thread.
    pub(super) fn owes_catch_up(&self) -> bool {
        self.done.owed.swap(false, Ordering::Relaxed)
            && self.wal_pages.load(Ordering::Relaxed) - self.done.copied.load(Ordering::Relaxed)
                <= CATCH_UP_PAGES
    }
}

/// A `PASSIVE` checkpoint on the writer's connection, outside any
/// transaction, so that its next transaction finds the WAL wholly copied
/// and starts it over. Failing is harmless, never the writer's error: the
/// WAL goes on growing until the thread's next checkpoint.
pub(super) fn catch_up(writer: &Connection) {
    if let Err(error) = writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::debug!(%error, "store checkpoint catch-up not done");
    }
}

/// What the thread tells the writer after a checkpoint.
struct Done {
    /// Set after each checkpoint: the writer owes a catch-up.
    owed: AtomicBool,
    /// The WAL frames that checkpoint had copied.
    copied: AtomicI32,
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

fn run(conn: &Connection, inbox: &Receiver<()>, done: &Done) {
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
                // Even with every frame it saw copied, the writer may have
                // committed since it looked.
                let copied = c_int::try_from(copied).unwrap_or(c_int::MAX);
                done.copied.store(copied, Ordering::Relaxed);
                done.owed.store(true, Ordering::Relaxed);
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
    fn a_catch_up_after_the_threads_checkpoint_starts_the_wal_over() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, pages) = hooked(dir.path(), BACKSTOP_PAGES);
        write_pages(&conn, 300);
        // The thread's checkpoint copies what it can while the writer goes
        // on committing: a reader still on the first 300 pages keeps it
        // from copying the 20 committed after them, as a commit during the
        // checkpoint would.
        let reader = Connection::open(dir.path().join("hook.db")).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        write_pages(&conn, 20);
        let thread = Connection::open(dir.path().join("hook.db")).unwrap();
        let (frames, copied): (i64, i64) = thread
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok((row.get(1)?, row.get(2)?))
            })
            .unwrap();
        assert!(copied < frames, "{copied} of {frames} frames copied");
        reader.execute_batch("COMMIT").unwrap();
        // Not wholly copied: the next commit appends to the WAL.
        write_pages(&conn, 1);
        let grown = pages.load(Ordering::Relaxed);
        assert!(grown > 320, "the WAL went on growing: {grown} pages");
        catch_up(&conn);
        write_pages(&conn, 1);
        let after = pages.load(Ordering::Relaxed);
        assert!(after < 5, "the WAL started over: {after} pages");
    }

    #[test]
    fn a_catch_up_is_owed_once_per_checkpoint_and_only_when_little_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = Connection::open(dir.path().join("owed.db")).unwrap();
        let mode: String = writer
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let checkpointer = Checkpointer::start(&dir.path().join("owed.db"), &mut writer).unwrap();
        assert!(!checkpointer.owes_catch_up(), "no checkpoint yet");
        let checkpointed = |wal_pages: c_int, copied: c_int| {
            checkpointer.wal_pages.store(wal_pages, Ordering::Relaxed);
            checkpointer.done.copied.store(copied, Ordering::Relaxed);
            checkpointer.done.owed.store(true, Ordering::Relaxed);
        };
        checkpointed(1_200, 1_200 - CATCH_UP_PAGES);
        assert!(checkpointer.owes_catch_up());
        assert!(!checkpointer.owes_catch_up(), "once per checkpoint");
        checkpointed(1_200, 1_199 - CATCH_UP_PAGES);
        assert!(!checkpointer.owes_catch_up(), "too much left");
        // The WAL started over since the thread looked.
        checkpointed(4, 1_000);
        assert!(checkpointer.owes_catch_up());
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
