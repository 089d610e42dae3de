//! The physical floors: the loops of (a) and (b) with nothing but SQLite,
//! so their cost can be read against what durable commits cost on this
//! disk. Same settings as the store: WAL, `synchronous=FULL`.
//!
//! - (h): one prepared `INSERT` of the item JSON + `COMMIT` per item;
//! - (i): 100 (the batch of (b)) prepared `INSERT`s + `COMMIT` per
//!   transaction: the best any design storing one row per item can do.

use std::ffi::CStr;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::workloads::Sample;

/// `items` inserted `per_commit` at a time, one transaction each.
pub async fn floor(dir: &Path, items: Vec<Value>, per_commit: usize) -> anyhow::Result<Sample> {
    let path = dir.join("floor.db");
    // rusqlite blocks; keep it off the async workers like the store does.
    tokio::task::spawn_blocking(move || insert_batches(&path, &items, per_commit))
        .await
        .context("the floor workload panicked")?
}

/// A plain connection with the store's durability settings (WAL,
/// `synchronous=FULL`) and nothing else: what every floor writes through.
/// `vfs`: the VFS to open the file through, SQLite's default if `None`
/// (the one-row floors: what SQLite does on its own).
pub(super) fn bare_connection(path: &Path, vfs: Option<&CStr>) -> anyhow::Result<Connection> {
    let conn = match vfs {
        Some(vfs) => Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)?,
        None => Connection::open(path)?,
    };
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
    ensure!(mode == "wal", "SQLite refused WAL mode (got {mode})");
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// The time of each `COMMIT` of a floor, when `--phases` is on: the
/// floor's side of the store's commit phase (`spool_store::phases`).
#[derive(Default)]
pub(super) struct CommitClock {
    nanos: u128,
    commits: u32,
}

impl CommitClock {
    /// Runs `commit`, timed when the phases are.
    pub(super) fn commit<T>(&mut self, commit: impl FnOnce() -> T) -> T {
        if !spool_store::phases::enabled() {
            return commit();
        }
        let start = Instant::now();
        let done = commit();
        self.nanos += start.elapsed().as_nanos();
        self.commits += 1;
        done
    }

    /// The mean `COMMIT` in the sample's extras, as `commit_us`.
    pub(super) fn report(&self, sample: &mut Sample) {
        if self.commits > 0 {
            let mean_us = self.nanos as f64 / f64::from(self.commits) / 1000.0;
            sample.extra.push(("commit_us", mean_us));
            eprintln!("    phases (means per commit): commit_us {mean_us:.1}");
        }
    }
}

fn insert_batches(path: &Path, items: &[Value], per_commit: usize) -> anyhow::Result<Sample> {
    ensure!(per_commit > 0, "a transaction needs at least one item");
    let conn = bare_connection(path, None)?;
    conn.execute_batch("CREATE TABLE items (id INTEGER PRIMARY KEY, data TEXT NOT NULL)")?;
    let mut begin = conn.prepare("BEGIN")?;
    let mut insert = conn.prepare("INSERT INTO items (data) VALUES (?1)")?;
    let mut commit = conn.prepare("COMMIT")?;

    let mut clock = CommitClock::default();
    let start = Instant::now();
    for batch in items.chunks(per_commit) {
        begin.execute([])?;
        for item in batch {
            // (a) and (b) get JSON values too, so encoding them is part
            // of the loop.
            insert.execute([item.to_string()])?;
        }
        clock.commit(|| commit.execute([]))?;
    }
    let mut sample = Sample::timed(start.elapsed());
    clock.report(&mut sample);

    let stored: i64 = conn.query_row("SELECT count(*) FROM items", [], |row| row.get(0))?;
    ensure!(
        usize::try_from(stored) == Ok(items.len()),
        "stored {stored} of {} items",
        items.len()
    );
    Ok(sample)
}
