//! Checkpoints on a thread of their own, so the writer never runs one.
//!
//! A commit lands in `<db>-wal`; a checkpoint copies the WAL's pages into
//! the database file and syncs it. SQLite runs one inside the commit that
//! takes the WAL past `wal_autocheckpoint` pages, on the committing thread:
//! there, the writer. Measured under 100 streaming threads, those commits
//! took 4–6 ms instead of ~1 ms, and every delta arriving meanwhile waited
//! for its seq: they were the tail of delivery latency.
//!
//! So the writer nudges this thread after each commit, and it runs a
//! `PASSIVE` checkpoint on its own connection, at most once per
//! [`INTERVAL`]. A passive checkpoint takes no lock the writer needs: the
//! writer goes on appending to the WAL while it copies. When a checkpoint
//! has copied everything, the writer's next transaction starts the WAL
//! over from its beginning, so the file stops growing.
//!
//! A writer that keeps committing during every checkpoint could leave the
//! WAL never wholly copied, and growing. The writer's own automatic
//! checkpoint stays as the backstop, at [`BACKSTOP_PAGES`] (8 times
//! SQLite's default): past it, the writer checkpoints what is left, which
//! the thread here has mostly done already.

use std::path::Path;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use super::worker::Worker;
use crate::error::StoreError;

/// The least time between two checkpoints of this thread.
const INTERVAL: Duration = Duration::from_millis(20);

/// The writer connection's `wal_autocheckpoint` (pages).
pub(super) const BACKSTOP_PAGES: i64 = 8_000;

/// The writer's handle on the checkpoint thread; dropping it stops the
/// thread and waits for it.
pub(super) struct Checkpointer(Worker<()>);

impl Checkpointer {
    /// Opens a connection of its own on the store at `path` (already
    /// migrated, in WAL mode) and starts the thread.
    pub(super) fn start(path: &Path) -> Result<Checkpointer, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(open_error)?;
        // A checkpoint already running elsewhere (another store on the
        // file) is no reason to wait: the next nudge tries again.
        conn.busy_timeout(Duration::ZERO).map_err(open_error)?;
        Worker::start("spool-store-checkpoint", move |inbox| run(&conn, &inbox)).map(Checkpointer)
    }

    /// Says a commit added to the WAL; never blocks.
    pub(super) fn nudge(&self) {
        // Full: a nudge is already waiting, which covers this commit.
        let _ = self.0.offer(());
    }
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
