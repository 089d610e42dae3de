//! What the store last knew to be committed, kept outside the reach of the
//! write-ahead log, so that a store that lost data says so.
//!
//! Commits land in `<db>-wal` first and reach the main file only at a
//! checkpoint. A WAL deleted or damaged after a crash (frames with a bad
//! checksum and everything after them are ignored) takes those commits
//! with it, and SQLite opens what is left without a word; a file truncated
//! to nothing opens as a new, empty store. So the writer records, in
//! `<db>.committed`, the length of the log it has committed: the sum of
//! every thread's last seq, which every commit of events raises. It does
//! so after a commit at most once a second, after deleting a thread (which
//! lowers it), and when it closes. Opening a store whose log is shorter
//! than that mark — or an empty or missing file where the mark says a
//! store was — is [`StoreError::DataLoss`], naming what is missing;
//! `accept_data_loss` opens it anyway and moves the mark to what is there.
//!
//! The sum reads one key per thread (a seek to the end of its run of
//! `events`, `sqlite/keys.rs`), a few microseconds each: with many
//! threads, the writer refreshes the mark less often, so that reading it
//! takes at most a hundredth of the writer's time.
//!
//! The file is written and synced on a thread of its own
//! (`spool-store-mark`), never on the writer's: a sync of a file just
//! truncated commits the filesystem's journal, which takes ~1 ms on an idle
//! disk and 100–250 ms on one busy with other writes, and on the writer it
//! stopped every thread's deltas for that long (`server.md`, "A disk busy
//! with other writes"). Writes land in the order they were asked for; after a deletion
//! and at close the writer waits for its write to land.
//!
//! The mark is a lower bound of what was committed: what was committed
//! since its last refresh before a crash may be lost without this
//! noticing. A mark written by a build that keyed the log differently
//! (the highest rowid of `events`) is not compared, and is replaced at the
//! next commit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::StoreError;
use crate::sqlite::keys;

/// How often a busy writer refreshes the mark, at most.
const EVERY: Duration = Duration::from_secs(1);

/// At most this share of the writer's time goes to reading the mark.
const SHARE: u32 = 100;

const PREFIX: &str = "spool store committed a log of length ";

/// What builds before the log was keyed by thread wrote: a rowid.
const ROWID_PREFIX: &str = "spool store committed events up to rowid ";

/// `<db>.committed`, beside the database.
fn mark_path(db: &Path) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push(".committed");
    PathBuf::from(path)
}

/// The mark, if there is a readable one.
fn read(db: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(mark_path(db)).ok()?;
    if text.starts_with(ROWID_PREFIX) {
        return None;
    }
    let parsed = text
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.trim().parse().ok());
    if parsed.is_none() {
        tracing::warn!(path = %mark_path(db).display(), "unreadable commit mark: ignored");
    }
    parsed
}

/// The length of the log: the sum of every thread's last seq (0: none).
fn length(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached(concat!(
        "SELECT coalesce(sum(",
        keys::newest_event_of!("seq", "t.key"),
        "), 0) FROM threads t"
    ))?
    .query_row([], |row| row.get(0))
}

fn write(db: &Path, length: i64) -> std::io::Result<()> {
    let mut file = std::fs::File::create(mark_path(db))?;
    file.write_all(format!("{PREFIX}{length}\n").as_bytes())?;
    file.sync_data()
}

/// Before the store file is opened (opening would create one): a mark
/// with nothing where the store should be is data loss.
pub(crate) fn check_file(db: &Path, accept: bool) -> Result<(), StoreError> {
    let Some(mark) = read(db).filter(|&mark| mark > 0) else {
        return Ok(());
    };
    let found = match std::fs::metadata(db) {
        Ok(meta) if meta.len() > 0 => return Ok(()),
        Ok(_) => "an empty file",
        Err(_) => "no file",
    };
    refuse_or_accept(db, mark, found.to_owned(), accept)
}

/// After the store is opened: its `events` must reach the mark.
pub(crate) fn check_events(db: &Path, conn: &Connection, accept: bool) -> Result<(), StoreError> {
    let Some(mark) = read(db) else {
        return Ok(());
    };
    let found = length(conn)?;
    if found >= mark {
        return Ok(());
    }
    refuse_or_accept(db, mark, format!("a log of length {found}"), accept)?;
    write(db, found).map_err(|source| StoreError::Mark {
        path: mark_path(db),
        source,
    })
}

fn refuse_or_accept(db: &Path, mark: i64, found: String, accept: bool) -> Result<(), StoreError> {
    if !accept {
        return Err(StoreError::DataLoss {
            path: db.to_owned(),
            committed: mark,
            found,
        });
    }
    tracing::warn!(path = %db.display(), committed = mark, %found,
        "opening a store that lost committed data (--accept-data-loss)");
    Ok(())
}

/// The writer's side: refreshes the mark after commits.
pub(crate) struct CommitMark {
    written_at: Option<Instant>,
    /// The length the thread wrote last (`NONE`: none yet, or it failed).
    written: Arc<AtomicI64>,
    /// How long until the next refresh: [`EVERY`], or [`SHARE`] times what
    /// the last read took.
    every: Duration,
    thread: Option<MarkThread>,
    db: PathBuf,
}

/// No length written.
const NONE: i64 = i64::MIN;

/// The thread that writes the file, and its inbox: a length, with a
/// sender to tell when it has landed, if the writer waits for it.
struct MarkThread {
    inbox: Sender<(i64, Option<Sender<()>>)>,
    handle: JoinHandle<()>,
}

impl CommitMark {
    pub(crate) fn new(db: &Path) -> CommitMark {
        let written = Arc::new(AtomicI64::new(NONE));
        let (inbox, lengths) = std::sync::mpsc::channel();
        let (path, landed) = (db.to_owned(), written.clone());
        let thread = std::thread::Builder::new()
            .name("spool-store-mark".to_owned())
            .spawn(move || write_marks(&path, &lengths, &landed))
            .map(|handle| MarkThread { inbox, handle })
            .map_err(|error| tracing::warn!(%error, "no mark thread: the writer writes it"))
            .ok();
        CommitMark {
            written_at: None,
            written,
            every: EVERY,
            thread,
            db: db.to_owned(),
        }
    }

    /// After a commit: records what is committed now if the mark is older
    /// than a second, or always when `now` (closing, a deletion); with
    /// `now` it returns only once that length is written.
    pub(crate) fn committed(&mut self, conn: &Connection, now: bool) {
        if !now && self.written_at.is_some_and(|at| at.elapsed() < self.every) {
            return;
        }
        let started = Instant::now();
        self.written_at = Some(started);
        let length = match length(conn) {
            Ok(length) => length,
            Err(error) => {
                tracing::warn!(%error, "cannot read the commit mark's log length");
                return;
            }
        };
        self.every = EVERY.max(started.elapsed() * SHARE);
        // Asked again until written: a failed write is retried. A length
        // asked for `now` is always written: a deletion lowers the length,
        // maybe to what was written before a higher length still waiting
        // in the inbox, which must not be the last word.
        if !now && self.written.load(Ordering::Acquire) == length {
            return;
        }
        let Some(thread) = &self.thread else {
            write_mark(&self.db, length, &self.written);
            return;
        };
        let (landed, wait) = match now {
            true => {
                let (landed, wait) = std::sync::mpsc::channel();
                (Some(landed), Some(wait))
            }
            false => (None, None),
        };
        if thread.inbox.send((length, landed)).is_err() {
            write_mark(&self.db, length, &self.written);
            return;
        }
        if let Some(wait) = wait {
            let _ = wait.recv();
        }
    }
}

impl Drop for CommitMark {
    fn drop(&mut self) {
        // The inbox closes; what it holds is written first.
        if let Some(MarkThread { inbox, handle }) = self.thread.take() {
            drop(inbox);
            let _ = handle.join();
        }
    }
}

/// The mark thread: writes each length asked for, in order, skipping to
/// the newest of those already waiting (each supersedes the ones before).
fn write_marks(db: &Path, lengths: &Receiver<(i64, Option<Sender<()>>)>, written: &AtomicI64) {
    while let Ok(first) = lengths.recv() {
        let mut newest = first;
        let mut waiting = Vec::new();
        while let Ok(next) = lengths.try_recv() {
            waiting.extend(newest.1.take());
            newest = next;
        }
        write_mark(db, newest.0, written);
        waiting.extend(newest.1);
        for landed in waiting {
            let _ = landed.send(());
        }
    }
}

fn write_mark(db: &Path, length: i64, written: &AtomicI64) {
    match write(db, length) {
        Ok(()) => written.store(length, Ordering::Release),
        Err(error) => {
            written.store(NONE, Ordering::Release);
            tracing::warn!(%error, path = %mark_path(db).display(), "cannot write the commit mark");
        }
    }
}
