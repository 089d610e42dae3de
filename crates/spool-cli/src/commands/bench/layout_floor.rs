//! The layout floors (j), (k) and (l): the loops of (a), (b) and (e)
//! writing spool's own rows with nothing but SQLite.
//!
//! Untimed, spool stores the items through the Session API (one call per
//! item for (j) and (l), batches for (k)) in a first file; its rows
//! (events, turns, items) are read back and grouped by `add_items` call
//! (one turn each). Timed, the same rows are inserted into a second,
//! freshly migrated store file on a bare connection, one
//! `BEGIN IMMEDIATE … COMMIT` per call — for (l), per round of one call of
//! each of the 16 sessions, the largest group a group commit can form —
//! with the store's settings (WAL, `synchronous=FULL`, foreign keys on).
//!
//! What a floor's time leaves out is spool's code (mapping, encoding, the
//! reducer, the writer thread's hand-offs); what it keeps is the layout:
//! the bytes and b-trees a log plus its projection write per item. (a)
//! against (j) is the cost of the code, (j) against (h) the cost of the
//! layout; (l) is the most (e) can get from these rows.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};
use serde_json::Value;
use spool_store::{Durability, Session, SqliteStore, Store, StoreOptions};

use super::floor::bare_connection;
use super::workloads::Sample;

const EVENT_COLUMNS: &str = "thread_id, seq, method, item_id, at_ms, payload";
const TURN_COLUMNS: &str = "thread_id, turn_id, ordinal, seq, status, error, started_at, \
     completed_at, duration_ms, token_usage, view_rank";
const ITEM_COLUMNS: &str = "thread_id, item_id, turn_id, ordinal, seq, kind, status, item, \
     envelope, token_count, input_item, llm";

/// The rows one `add_items` call wrote.
#[derive(Default)]
struct CallRows {
    events: Vec<Vec<SqlValue>>,
    turn: Vec<SqlValue>,
    items: Vec<Vec<SqlValue>>,
}

/// The calls of (j) and (k): `items` added `per_call` at a time to one
/// session.
pub async fn one_session(dir: &Path, items: Vec<Value>, per_call: usize) -> anyhow::Result<Sample> {
    ensure!(per_call > 0, "a call needs at least one item");
    let calls = items.chunks(per_call).map(<[Value]>::to_vec).collect();
    layout_floor(dir, vec![calls]).await
}

/// The calls of (l): `appenders` sessions of `appends_each` single-item
/// calls, replayed as the best group commit would write them: one
/// transaction holding one call of every session.
pub async fn concurrent(
    dir: &Path,
    appenders: usize,
    appends_each: usize,
) -> anyhow::Result<Sample> {
    let sessions = (0..appenders)
        .map(|k| {
            super::items::appender_items(k, appends_each)
                .into_iter()
                .map(|item| vec![item])
                .collect()
        })
        .collect();
    layout_floor(dir, sessions).await
}

/// `sessions[s]` are the `add_items` calls of session `s`. spool stores
/// them (untimed), then their rows are replayed (timed), transaction `r`
/// holding call `r` of every session that has one.
async fn layout_floor(dir: &Path, sessions: Vec<Vec<Vec<Value>>>) -> anyhow::Result<Sample> {
    let count: usize = sessions.iter().flatten().map(Vec::len).sum();
    let source_dir = dir.join("source");
    let target_dir = dir.join("target");
    std::fs::create_dir_all(&source_dir)?;
    std::fs::create_dir_all(&target_dir)?;

    // The source: spool writes the rows. Durability does not change the
    // rows, so the untimed setup skips the fsyncs.
    let options = StoreOptions {
        durability: Durability::Normal,
        ..StoreOptions::default()
    };
    let store = SqliteStore::open(source_dir.join("spool.db"), options.clone())?;
    let mut ids = Vec::with_capacity(sessions.len());
    for (k, calls) in sessions.into_iter().enumerate() {
        let id = format!("bench-{k}");
        let session = Session::open(store.clone(), &id).await?;
        for call in calls {
            session.add_items(call).await?;
        }
        ids.push(id);
    }
    store.close().await?;
    // The target: migrated, with the sessions' thread rows, and empty.
    let store = SqliteStore::open(target_dir.join("spool.db"), options)?;
    for id in &ids {
        Session::open(store.clone(), id).await?;
    }
    store.close().await?;

    let source = source_dir.join("spool.db");
    let target = target_dir.join("spool.db");
    tokio::task::spawn_blocking(move || {
        let conn = Connection::open(&source)?;
        let sessions = ids
            .iter()
            .map(|id| read_calls(&conn, id))
            .collect::<anyhow::Result<Vec<_>>>()?;
        drop(conn);
        let stored: usize = sessions.iter().flatten().map(|c| c.items.len()).sum();
        ensure!(
            stored == count,
            "the source store holds {stored} of the {count} items"
        );
        replay(&target, &sessions, count)
    })
    .await
    .context("the layout floor workload panicked")?
}

/// The rows of one thread, one entry per turn (per `add_items` call),
/// events in seq order; the thread's own first event (`thread/started`) is
/// left out: the target has it.
fn read_calls(conn: &Connection, thread_id: &str) -> anyhow::Result<Vec<CallRows>> {
    let mut calls: Vec<CallRows> = Vec::new();
    let mut turns = conn.prepare(&format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE thread_id = ?1 ORDER BY ordinal"
    ))?;
    let mut rows = turns.query([thread_id])?;
    while let Some(row) = rows.next()? {
        calls.push(CallRows {
            turn: columns(row, 11)?,
            ..CallRows::default()
        });
    }
    let call_of_turn: HashMap<String, usize> = calls
        .iter()
        .enumerate()
        .map(|(index, c)| match &c.turn[1] {
            SqlValue::Text(id) => Ok((id.clone(), index)),
            other => anyhow::bail!("a turn id is not text: {other:?}"),
        })
        .collect::<anyhow::Result<_>>()?;
    let index_of = |turn_id: &str| call_of_turn.get(turn_id).copied();

    let mut items = conn.prepare(&format!(
        "SELECT {ITEM_COLUMNS} FROM items WHERE thread_id = ?1 ORDER BY ordinal"
    ))?;
    let mut rows = items.query([thread_id])?;
    while let Some(row) = rows.next()? {
        let turn_id: String = row.get(2)?;
        let call = index_of(&turn_id).context("an item of an unknown turn")?;
        calls[call].items.push(columns(row, 12)?);
    }

    // Events fall between their turn's start and completion.
    let mut events = conn.prepare(&format!(
        "SELECT {EVENT_COLUMNS}, json_extract(payload, '$.params.turnId'), \
         json_extract(payload, '$.params.turn.id') FROM events \
         WHERE thread_id = ?1 AND seq > 1 ORDER BY seq"
    ))?;
    let mut rows = events.query([thread_id])?;
    while let Some(row) = rows.next()? {
        let turn_id: Option<String> = row.get(6)?;
        let turn_id = turn_id.or(row.get(7)?).context("an event outside a turn")?;
        let call = index_of(&turn_id).context("an event of an unknown turn")?;
        calls[call].events.push(columns(row, 6)?);
    }
    Ok(calls)
}

fn columns(row: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<Vec<SqlValue>> {
    (0..n).map(|i| row.get(i)).collect()
}

fn replay(path: &Path, sessions: &[Vec<CallRows>], count: usize) -> anyhow::Result<Sample> {
    let conn = bare_connection(path)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    let placeholders = |n: usize| vec!["?"; n].join(", ");
    let mut begin = conn.prepare("BEGIN IMMEDIATE")?;
    let mut event = conn.prepare(&format!(
        "INSERT INTO events ({EVENT_COLUMNS}) VALUES ({})",
        placeholders(6)
    ))?;
    let mut turn = conn.prepare(&format!(
        "INSERT INTO turns ({TURN_COLUMNS}) VALUES ({})",
        placeholders(11)
    ))?;
    let mut item = conn.prepare(&format!(
        "INSERT INTO items ({ITEM_COLUMNS}) VALUES ({})",
        placeholders(12)
    ))?;
    let mut commit = conn.prepare("COMMIT")?;

    let rounds = sessions.iter().map(Vec::len).max().unwrap_or(0);
    let start = Instant::now();
    for round in 0..rounds {
        begin.execute([])?;
        for call in sessions.iter().filter_map(|calls| calls.get(round)) {
            for row in &call.events {
                event.execute(params_from_iter(row))?;
            }
            turn.execute(params_from_iter(&call.turn))?;
            for row in &call.items {
                item.execute(params_from_iter(row))?;
            }
        }
        commit.execute([])?;
    }
    let sample = Sample::timed(start.elapsed());

    let stored: i64 = conn.query_row("SELECT count(*) FROM items", [], |row| row.get(0))?;
    ensure!(
        usize::try_from(stored) == Ok(count),
        "stored {stored} of {count} items"
    );
    Ok(sample)
}
