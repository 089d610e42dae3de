//! Where an append's time goes, phase by phase: what `spool bench store
//! --phases` reports beside each workload's rate.
//!
//! Off unless [`enable`]d, and then process-wide: every store in the
//! process adds to the same totals, so it is for one workload at a time
//! (the bench), never for a server. Off, a phase costs one relaxed atomic
//! load; on, two reads of the clock per phase per call or commit, not per
//! item.
//!
//! The phases of one `add_items` call on a SQLite store, in the order they
//! run (on PostgreSQL only the first is timed):
//!
//! - [`Phase::Session`]: the Session API turns the caller's items into a
//!   turn of born items (on the caller's thread);
//! - [`Phase::Prepare`]: the store checks, folds and encodes them for the
//!   writer (`thread_state/prepare.rs`, the caller's thread);
//! - [`Phase::Apply`]: the writer checks them against the thread's state
//!   and notes the rows (`ThreadState::append`);
//! - [`Phase::Write`]: the batch's rows, encoded and inserted, up to the
//!   `COMMIT` (`sqlite/writer/batch.rs`);
//! - [`Phase::Commit`]: the `COMMIT`, run on the writer: WAL frames
//!   written, the WAL synced (`commit.rs`);
//! - [`Phase::Settle`]: after the waiters are answered, the thread's state
//!   forgets closed records and the batch is dropped (`lend.rs`).
//!
//! And [`frames_per_commit`]: how many WAL frames (pages) a commit wrote,
//! from the writer connection's WAL hook.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// A phase of an append (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Session,
    Prepare,
    Apply,
    Write,
    Commit,
    Settle,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Session,
        Phase::Prepare,
        Phase::Apply,
        Phase::Write,
        Phase::Commit,
        Phase::Settle,
    ];

    /// The phase's mean time in a report: `<name>_us`.
    pub fn key(self) -> &'static str {
        match self {
            Phase::Session => "session_us",
            Phase::Prepare => "prepare_us",
            Phase::Apply => "apply_us",
            Phase::Write => "write_us",
            Phase::Commit => "commit_us",
            Phase::Settle => "settle_us",
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static TOTALS: Totals = Totals::new();

/// Turns the timing on or off for the whole process.
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Whether the timing is on (for a caller that times phases of its own,
/// such as the bench's floors).
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The mean time of each phase that ran since the last call, in
/// microseconds, and clears the totals.
pub fn take() -> Vec<(Phase, f64)> {
    TOTALS.take()
}

/// Forgets every total so far (what a setup ran before the part to time).
pub fn clear() {
    TOTALS.take();
    TOTALS.frames_per_commit();
}

/// The mean number of WAL frames a commit wrote since the last call (and
/// clears it); `None` without commits.
pub fn frames_per_commit() -> Option<f64> {
    TOTALS.frames_per_commit()
}

/// A phase being timed; [`Timer::stop`] adds its time.
pub(crate) struct Timer(Option<Instant>);

impl Timer {
    pub(crate) fn start() -> Timer {
        Timer(ON.load(Ordering::Relaxed).then(Instant::now))
    }

    pub(crate) fn stop(self, phase: Phase) {
        if let Some(started) = self.0 {
            TOTALS.add(phase, started.elapsed().as_nanos());
        }
    }
}

/// Notes a commit that took the WAL from `before` to `after` pages.
pub(crate) fn committed_frames(before: i32, after: i32) {
    if ON.load(Ordering::Relaxed) {
        TOTALS.add_frames(before, after);
    }
}

const PHASES: usize = Phase::ALL.len();

struct Totals {
    nanos: [AtomicU64; PHASES],
    times: [AtomicU64; PHASES],
    frames: AtomicU64,
    commits: AtomicU64,
}

impl Totals {
    const fn new() -> Totals {
        Totals {
            nanos: [const { AtomicU64::new(0) }; PHASES],
            times: [const { AtomicU64::new(0) }; PHASES],
            frames: AtomicU64::new(0),
            commits: AtomicU64::new(0),
        }
    }

    fn add(&self, phase: Phase, nanos: u128) {
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.nanos[phase as usize].fetch_add(nanos, Ordering::Relaxed);
        self.times[phase as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A WAL shorter after the commit than before was restarted, and
    /// holds this commit's frames only.
    fn add_frames(&self, before: i32, after: i32) {
        let frames = if after > before {
            after - before
        } else {
            after
        };
        self.frames
            .fetch_add(u64::try_from(frames).unwrap_or(0), Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
    }

    fn take(&self) -> Vec<(Phase, f64)> {
        Phase::ALL
            .into_iter()
            .filter_map(|phase| {
                let times = self.times[phase as usize].swap(0, Ordering::Relaxed);
                let nanos = self.nanos[phase as usize].swap(0, Ordering::Relaxed);
                (times > 0).then(|| (phase, nanos as f64 / times as f64 / 1000.0))
            })
            .collect()
    }

    fn frames_per_commit(&self) -> Option<f64> {
        let commits = self.commits.swap(0, Ordering::Relaxed);
        let frames = self.frames.swap(0, Ordering::Relaxed);
        (commits > 0).then(|| frames as f64 / commits as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_give_means_and_clear_when_taken() {
        let totals = Totals::new();
        assert!(totals.take().is_empty());
        assert_eq!(totals.frames_per_commit(), None);
        totals.add(Phase::Commit, 3_000);
        totals.add(Phase::Commit, 5_000);
        totals.add(Phase::Apply, 1_000);
        assert_eq!(
            totals.take(),
            vec![(Phase::Apply, 1.0), (Phase::Commit, 4.0)]
        );
        assert!(totals.take().is_empty());
    }

    #[test]
    fn a_restarted_wal_holds_the_commits_frames_only() {
        let totals = Totals::new();
        totals.add_frames(10, 14);
        totals.add_frames(14, 6);
        assert_eq!(totals.frames_per_commit(), Some(5.0));
        assert_eq!(totals.frames_per_commit(), None);
    }
}
