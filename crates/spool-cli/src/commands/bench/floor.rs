//! (h) The physical floor: the loop of (a) with nothing but SQLite, so the
//! cost of (a) can be read against what one durable commit costs on this
//! disk. Same settings as the store: WAL, `synchronous=FULL`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use rusqlite::Connection;
use serde_json::Value;

use super::workloads::Sample;

pub async fn floor(dir: &Path, items: Vec<Value>) -> anyhow::Result<Sample> {
    let path = dir.join("floor.db");
    // rusqlite blocks; keep it off the async workers like the store does.
    tokio::task::spawn_blocking(move || insert_each(&path, &items))
        .await
        .context("the floor workload panicked")?
}

fn insert_each(path: &Path, items: &[Value]) -> anyhow::Result<Sample> {
    let conn = Connection::open(path)?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
    ensure!(mode == "wal", "SQLite refused WAL mode (got {mode})");
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch("CREATE TABLE items (id INTEGER PRIMARY KEY, data TEXT NOT NULL)")?;
    let mut begin = conn.prepare("BEGIN")?;
    let mut insert = conn.prepare("INSERT INTO items (data) VALUES (?1)")?;
    let mut commit = conn.prepare("COMMIT")?;

    let start = Instant::now();
    for item in items {
        // (a) gets JSON values too, so encoding them is part of the loop.
        let json = item.to_string();
        begin.execute([])?;
        insert.execute([json])?;
        commit.execute([])?;
    }
    let sample = Sample::timed(start.elapsed());

    let stored: i64 = conn.query_row("SELECT count(*) FROM items", [], |row| row.get(0))?;
    ensure!(
        usize::try_from(stored) == Ok(items.len()),
        "stored {stored} of {} items",
        items.len()
    );
    Ok(sample)
}
