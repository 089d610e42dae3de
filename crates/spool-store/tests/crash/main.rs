//! Crash safety: a child process appends through the public
//! API, is killed with SIGKILL at a random point, and the reopened file
//! must hold everything the store acknowledged as durable, gap-free, with
//! no item twice, a log the reducer accepts, and the turns the crash left
//! open closed by recovery events at the end of the log.
//!
//! On PostgreSQL the same: the child is a server on a database of its
//! own, and the check is a second server, which takes the dead one's
//! threads over when their leases run out (a takeover is the recovery of
//! one thread).
//!
//! The child is this test binary run again with `--exact child_main`: the
//! environment (see `child::Config`) turns that test into the child's
//! main; in an ordinary run it returns at once.
//!
//! `SPOOL_CRASH_SEED=<n>` replays the plans (workloads, kill points) of an
//! earlier run; the instant of each kill still depends on timing.

#![cfg(unix)]

mod check;
mod child;
#[path = "../common/mod.rs"]
mod common;
mod lock;
mod parent;
mod script;

/// The test the child process runs.
pub const CHILD_TEST: &str = "child_main";

/// Not a test: the child's main when the parent's environment says so.
#[test]
fn child_main() {
    if let Some(config) = child::Config::from_env() {
        child::run(config);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_25_random_points_loses_nothing_acknowledged() {
    parent::kill_runs(25, parent::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_postgres_killed_at_10_random_points_loses_nothing_acknowledged() {
    parent::kill_runs(10, parent::Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: 500 kills; cargo nextest run -p spool-store --run-ignored only crash_soak"]
async fn crash_soak() {
    parent::kill_runs(500, parent::Backend::Sqlite).await;
}
