//! The layout floors (j), (k) and (l): the loops of (a), (b) and (e)
//! writing spool's own rows with nothing but SQLite.
//!
//! Untimed, spool stores the items through the Session API (one call per
//! item for (j) and (l), batches for (k)) in a first file; its rows
//! (events, and the item and turn rows of `items`) are read back and
//! grouped by `add_items` call (one turn each). Timed, the same rows are
//! inserted into a second, freshly migrated store file on a bare
//! connection, one `BEGIN IMMEDIATE … COMMIT` per call — for (l), per
//! round of one call of each of the 16 sessions, the largest group a group
//! commit can form — with the store's settings (WAL, `synchronous=FULL`,
//! foreign keys checked only in debug builds,
//! `spool_store::CHECKS_FOREIGN_KEYS`).
//!
//! What a floor's time leaves out is spool's code (mapping, encoding, the
//! reducer, the writer thread's hand-offs); what it keeps is the layout:
//! the bytes and b-trees a log plus its projection write per item. (a)
//! against (j) is the cost of the code, (j) against (h) the cost of the
//! layout; (l) is the most (e) can get from these rows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, ensure};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, Statement, params_from_iter};
use serde_json::Value;
use spool_store::{Durability, Session, SqliteStore, Store, StoreOptions};

use super::floor::{CommitClock, bare_connection};
use super::workloads::Sample;

const EVENT_COLUMNS: &str = "pos, thread_id, seq, method, item_id, at_ms, payload";
/// The columns of a row of `items`, which holds a thread's items and, with
/// `is_turn = 1`, its turns.
const ROW_COLUMNS: &str = "pos, thread_id, item_id, turn_id, ordinal, seq, kind, status, item, \
     envelope, token_count, input_item, llm, is_turn, error, started_at, completed_at, \
     duration_ms, token_usage, view_rank";
const ROW_WIDTH: usize = 20;

/// The rows one `add_items` call wrote.
#[derive(Default)]
pub(super) struct CallRows {
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
    layout_floor(dir, appender_calls(appenders, appends_each)).await
}

/// The calls of (e): `appenders` sessions of `appends_each` single-item
/// calls.
pub(super) fn appender_calls(appenders: usize, appends_each: usize) -> Vec<Vec<Vec<Value>>> {
    (0..appenders)
        .map(|k| {
            super::items::appender_items(k, appends_each)
                .into_iter()
                .map(|item| vec![item])
                .collect()
        })
        .collect()
}

/// `sessions[s]` are the `add_items` calls of session `s`. spool stores
/// them (untimed), then their rows are replayed (timed), transaction `r`
/// holding call `r` of every session that has one.
async fn layout_floor(dir: &Path, sessions: Vec<Vec<Vec<Value>>>) -> anyhow::Result<Sample> {
    let rows = stored_rows(dir, sessions).await?;
    tokio::task::spawn_blocking(move || replay(&rows))
        .await
        .context("the layout floor workload panicked")?
}

/// What a layout floor replays: the rows spool wrote for each call, and
/// the freshly migrated store file they go into.
pub(super) struct StoredRows {
    pub(super) target: PathBuf,
    pub(super) sessions: Vec<Vec<CallRows>>,
    pub(super) count: usize,
}

impl StoredRows {
    /// Transactions in the replay: one per call of the longest session.
    pub(super) fn rounds(&self) -> usize {
        self.sessions.iter().map(Vec::len).max().unwrap_or(0)
    }
}

/// Has spool store the calls of `sessions` (untimed) and reads back the
/// rows each call wrote; the target file is migrated, holds the sessions'
/// thread rows and nothing else.
pub(super) async fn stored_rows(
    dir: &Path,
    sessions: Vec<Vec<Vec<Value>>>,
) -> anyhow::Result<StoredRows> {
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
    let mut opened = Vec::with_capacity(sessions.len());
    for (k, calls) in sessions.into_iter().enumerate() {
        let id = format!("bench-{k}");
        opened.push((Session::open(store.clone(), &id).await?, calls.into_iter()));
        ids.push(id);
    }
    // Round by round, as concurrent sessions make their calls: the ids
    // spool gives (UUIDv7) then grow from round to round, as they do in
    // (e), which keeps a round's new keys together in the id indexes.
    loop {
        let mut called = false;
        for (session, calls) in &mut opened {
            if let Some(call) = calls.next() {
                session.add_items(call).await?;
                called = true;
            }
        }
        if !called {
            break;
        }
    }
    drop(opened);
    store.close().await?;
    // The target: migrated, with the sessions' thread rows, and empty.
    let store = SqliteStore::open(target_dir.join("spool.db"), options)?;
    for id in &ids {
        Session::open(store.clone(), id).await?;
    }
    store.close().await?;

    let source = source_dir.join("spool.db");
    let sessions = tokio::task::spawn_blocking(move || {
        let conn = Connection::open(&source)?;
        ids.iter()
            .map(|id| read_calls(&conn, id))
            .collect::<anyhow::Result<Vec<_>>>()
    })
    .await
    .context("reading the rows back panicked")??;
    let stored: usize = sessions.iter().flatten().map(|c| c.items.len()).sum();
    ensure!(
        stored == count,
        "the source store holds {stored} of the {count} items"
    );
    Ok(StoredRows {
        target: target_dir.join("spool.db"),
        sessions,
        count,
    })
}

/// The rows of one thread, one entry per turn (per `add_items` call),
/// events in seq order; the thread's own first event (`thread/started`) is
/// left out: the target has it.
fn read_calls(conn: &Connection, thread_id: &str) -> anyhow::Result<Vec<CallRows>> {
    let mut calls: Vec<CallRows> = Vec::new();
    let mut turns = conn.prepare(&format!(
        "SELECT {ROW_COLUMNS} FROM items WHERE thread_id = ?1 AND is_turn ORDER BY ordinal"
    ))?;
    let mut rows = turns.query([thread_id])?;
    while let Some(row) = rows.next()? {
        calls.push(CallRows {
            turn: columns(row, ROW_WIDTH)?,
            ..CallRows::default()
        });
    }
    let call_of_turn: HashMap<String, usize> = calls
        .iter()
        .enumerate()
        .map(|(index, c)| match &c.turn[3] {
            SqlValue::Text(id) => Ok((id.clone(), index)),
            other => anyhow::bail!("a turn id is not text: {other:?}"),
        })
        .collect::<anyhow::Result<_>>()?;
    let index_of = |turn_id: &str| call_of_turn.get(turn_id).copied();

    let mut items = conn.prepare(&format!(
        "SELECT {ROW_COLUMNS} FROM items WHERE thread_id = ?1 AND NOT is_turn ORDER BY ordinal"
    ))?;
    let mut rows = items.query([thread_id])?;
    while let Some(row) = rows.next()? {
        let turn_id: String = row.get(3)?;
        let call = index_of(&turn_id).context("an item of an unknown turn")?;
        calls[call].items.push(columns(row, ROW_WIDTH)?);
    }

    // Events fall between their turn's start and completion. A row that
    // leaves its body to a projection row has no JSON payload: its turn is
    // the item's, or the turn row's (at the row's own `pos` for a start,
    // at the ordinal its payload names for a completion).
    let mut events = conn.prepare(&format!(
        "SELECT {EVENT_COLUMNS}, CASE method \
         WHEN 'item/projected' THEN (SELECT turn_id FROM items i \
         WHERE i.thread_id = events.thread_id AND i.item_id = events.item_id AND NOT i.is_turn) \
         WHEN 'turn/projected-start' THEN (SELECT turn_id FROM items i \
         WHERE i.pos = events.pos AND i.is_turn) \
         WHEN 'turn/projected-end' THEN (SELECT turn_id FROM items i \
         WHERE i.pos = events.pos - events.seq + CAST(events.payload AS INTEGER) AND i.is_turn) \
         ELSE json_extract(payload, '$.params.turnId') END, \
         CASE WHEN method IN ('item/projected', 'turn/projected-start', 'turn/projected-end') \
         THEN NULL ELSE json_extract(payload, '$.params.turn.id') END FROM events \
         WHERE thread_id = ?1 AND seq > 1 ORDER BY seq"
    ))?;
    let mut rows = events.query([thread_id])?;
    while let Some(row) = rows.next()? {
        let turn_id: Option<String> = row.get(7)?;
        let turn_id = turn_id.or(row.get(8)?).context("an event outside a turn")?;
        let call = index_of(&turn_id).context("an event of an unknown turn")?;
        calls[call].events.push(columns(row, 7)?);
    }
    Ok(calls)
}

fn columns(row: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<Vec<SqlValue>> {
    (0..n).map(|i| row.get(i)).collect()
}

fn replay(rows: &StoredRows) -> anyhow::Result<Sample> {
    let conn = target_connection(rows)?;
    let mut replayer = Replayer::new(&conn)?;
    let start = Instant::now();
    for round in 0..rows.rounds() {
        replayer.round(&rows.sessions, round)?;
    }
    let mut sample = Sample::timed(start.elapsed());
    replayer.clock.report(&mut sample);
    check_count(&conn, rows.count)?;
    Ok(sample)
}

/// A bare connection on the target file, as the store sets it up for
/// writing (WAL, `synchronous=FULL`, foreign keys checked as the store
/// checks them: in debug builds only), through the VFS the store's writer
/// opens the file through: the layout floors write spool's rows as spool
/// does, and leave out only spool's code.
pub(super) fn target_connection(rows: &StoredRows) -> anyhow::Result<Connection> {
    let conn = bare_connection(&rows.target, spool_store::writer_vfs())?;
    conn.pragma_update(None, "foreign_keys", spool_store::CHECKS_FOREIGN_KEYS)?;
    Ok(conn)
}

/// The prepared statements of a replay.
pub(super) struct Replayer<'c> {
    begin: Statement<'c>,
    event: Statement<'c>,
    row: Statement<'c>,
    commit: Statement<'c>,
    pub(super) clock: CommitClock,
}

impl<'c> Replayer<'c> {
    pub(super) fn new(conn: &'c Connection) -> anyhow::Result<Self> {
        let placeholders = |n: usize| vec!["?"; n].join(", ");
        Ok(Replayer {
            begin: conn.prepare("BEGIN IMMEDIATE")?,
            event: conn.prepare(&format!(
                "INSERT INTO events ({EVENT_COLUMNS}) VALUES ({})",
                placeholders(7)
            ))?,
            row: conn.prepare(&format!(
                "INSERT INTO items ({ROW_COLUMNS}) VALUES ({})",
                placeholders(ROW_WIDTH)
            ))?,
            commit: conn.prepare("COMMIT")?,
            clock: CommitClock::default(),
        })
    }

    /// One transaction: call `round` of every session that has one.
    pub(super) fn round(&mut self, sessions: &[Vec<CallRows>], round: usize) -> anyhow::Result<()> {
        self.calls(sessions.iter().filter_map(|calls| calls.get(round)))
    }

    /// One transaction holding `calls`, in order.
    pub(super) fn calls<'r>(
        &mut self,
        calls: impl IntoIterator<Item = &'r CallRows>,
    ) -> anyhow::Result<()> {
        self.begin.execute([])?;
        for call in calls {
            for row in &call.events {
                self.event.execute(params_from_iter(row))?;
            }
            // The turn's row first, as the store's writer writes it.
            self.row.execute(params_from_iter(&call.turn))?;
            for row in &call.items {
                self.row.execute(params_from_iter(row))?;
            }
        }
        let commit = &mut self.commit;
        self.clock.commit(|| commit.execute([]))?;
        Ok(())
    }
}

/// Every item of the replay landed in the target.
pub(super) fn check_count(conn: &Connection, count: usize) -> anyhow::Result<()> {
    let stored: i64 =
        conn.query_row("SELECT count(*) FROM items WHERE NOT is_turn", [], |row| {
            row.get(0)
        })?;
    ensure!(
        usize::try_from(stored) == Ok(count),
        "stored {stored} of {count} items"
    );
    Ok(())
}
