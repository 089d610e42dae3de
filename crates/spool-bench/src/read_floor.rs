//! (o), (p) and (q): the read floors of (d), (n) and (c). The file (d) reads, filled
//! by the store beforehand and read while the store still has it open (so
//! with the same write-ahead log behind it), with nothing but rusqlite: the
//! newest `tail_limit` rows in the model's view, newest first along the
//! session's run of `items` (keyed by thread, then ordinal: the query the
//! store runs), each row's raw input item parsed into a
//! `serde_json::Value` for (o), checked and copied out as its JSON text
//! for (p); for (q), every row, as many times as (c) reads them, parsed
//! as for (o). The connection maps the file as the store's readers do.
//! What no code reading these rows can skip: the gap between (d) and (o)
//! is what spool's own code costs on a read.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, ensure};
use rusqlite::Connection;
use serde_json::Value;
use serde_json::value::RawValue;
use spool_store::Store;

use super::session_workloads::filled;
use super::workloads::{Sample, Sizes};
use super::{StoreAt, open_store};

const NEWEST: &str = "SELECT input_item FROM items \
     WHERE pos >= (SELECT key << 36 FROM threads WHERE id = ?1) \
     AND pos < (SELECT (key + 1) << 36 FROM threads WHERE id = ?1) \
     AND llm = 1 ORDER BY pos DESC LIMIT ?2";

/// Which read a floor times: the newest `limit` rows, `calls` times, each
/// parsed into a `Value` (`parse`) or kept as checked text.
pub struct Read {
    pub limit: usize,
    pub calls: usize,
    pub parse: bool,
}

impl Read {
    /// (o) with `parse`, else (p): the window of (d).
    pub fn tail(sizes: &Sizes, parse: bool) -> Read {
        Read {
            limit: sizes.tail_limit,
            calls: sizes.tail_calls,
            parse,
        }
    }

    /// (q): every item, as many times as (c) reads them.
    pub fn all(sizes: &Sizes) -> Read {
        Read {
            limit: sizes.items,
            calls: sizes.all_reads,
            parse: true,
        }
    }
}

/// One read floor: the store fills the file with `items`, then `read` is
/// timed on it.
pub async fn newest(
    dir: &std::path::Path,
    items: Vec<Value>,
    batch: usize,
    read_as: Read,
) -> anyhow::Result<Sample> {
    let Read {
        limit,
        calls,
        parse,
    } = read_as;
    let expected: Vec<Value> = items[items.len().saturating_sub(limit)..].to_vec();
    let store = open_store(&StoreAt::Sqlite(dir)).await?;
    let thread_id = filled(&store, items, batch).await?.id().to_owned();

    let path = dir.join("spool.db");
    let sample =
        tokio::task::spawn_blocking(move || read(path, &thread_id, limit, calls, parse, &expected))
            .await
            .context("the read floor panicked")?;
    store.close().await?;
    sample
}

fn read(
    path: PathBuf,
    thread_id: &str,
    limit: usize,
    calls: usize,
    parse: bool,
    expected: &[Value],
) -> anyhow::Result<Sample> {
    let conn = Connection::open(path)?;
    // As the store's readers map it.
    conn.pragma_update(None, "mmap_size", spool_store::READER_MMAP_BYTES)?;
    let mut stmt = conn.prepare(NEWEST)?;
    let limit_sql = i64::try_from(limit)?;
    let (sample, last) = if parse {
        let mut last: Vec<Value> = Vec::new();
        let start = Instant::now();
        for _ in 0..calls {
            let mut rows = stmt.query((thread_id, limit_sql))?;
            let mut got = Vec::with_capacity(limit);
            while let Some(row) = rows.next()? {
                got.push(serde_json::from_str::<Value>(row.get_ref(0)?.as_str()?)?);
            }
            got.reverse();
            last = std::hint::black_box(got);
        }
        (Sample::timed(start.elapsed()), last)
    } else {
        let mut last: Vec<Box<RawValue>> = Vec::new();
        let start = Instant::now();
        for _ in 0..calls {
            let mut rows = stmt.query((thread_id, limit_sql))?;
            let mut got = Vec::with_capacity(limit);
            while let Some(row) = rows.next()? {
                // Checked to be JSON, as the store checks it.
                got.push(serde_json::from_str::<Box<RawValue>>(
                    row.get_ref(0)?.as_str()?,
                )?);
            }
            got.reverse();
            last = std::hint::black_box(got);
        }
        let sample = Sample::timed(start.elapsed());
        let parsed = last
            .iter()
            .map(|item| serde_json::from_str::<Value>(item.get()))
            .collect::<Result<Vec<_>, _>>()?;
        (sample, parsed)
    };
    ensure!(
        last == expected,
        "the read floor did not read the session's newest {limit} items"
    );
    Ok(sample)
}
