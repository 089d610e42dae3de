//! Writing one batch: every pending event, the projection rows they
//! changed and the thread rows, in one `BEGIN IMMEDIATE` transaction.
//!
//! Statements are prepared once per connection (`prepare_cached`) and the
//! projection rows are written once per batch however many events changed
//! them, so a burst of deltas costs one row update per item per commit.

use std::borrow::Cow;

use rusqlite::{Connection, OptionalExtension};

use spool_core::llm::in_view;

use super::TokenCount;
use super::multi_row::{self, MultiRow};
use super::rank::{TouchedTurns, update_view_ranks};
use crate::born::{Body, PROJECTED, TURN_END_PROJECTED, TURN_START_PROJECTED};
use crate::codec::{encode_item_json, encode_turn_json};
use crate::error::StoreError;
use crate::sqlite::codec::sql_int;
use crate::sqlite::{keys, projected};
use crate::thread_state::pending::keeps_row;
use crate::thread_state::ranks::{self, NewRanks};
use crate::thread_state::{RankTail, ThreadState};

const INSERT_THREAD: &str = "INSERT INTO threads (id, name, preview, model_provider, model, \
     cwd, cli_version, history_mode, dev_mode, forked_from_id, archived, created_at_ms, \
     updated_at_ms, ephemeral, key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
     ?14, ?15)";

/// The next thread key: one more than any given before (`sqlite/keys.rs`).
const NEXT_THREAD_KEY: &str = "UPDATE thread_keys SET last = last + 1 RETURNING last";

/// The key of a thread created before this writer knew it.
const THREAD_KEY: &str = "SELECT key FROM threads WHERE id = ?1";

/// Name, preview and archived: only when an event changed one of them (an
/// `UPDATE` naming `archived` rewrites the `threads_by_created` entry).
const UPDATE_THREAD_SETTINGS: &str = "UPDATE threads SET \
     name = CASE WHEN ?2 THEN ?3 ELSE name END, \
     preview = coalesce(?4, preview), \
     archived = coalesce(?5, archived) \
     WHERE id = ?1";

const UPDATE_UPDATED_AT: &str =
    "UPDATE threads SET updated_at_ms = ?2 WHERE id = ?1 AND updated_at_ms < ?2";

/// How far `threads.updated_at_ms` may lag behind the thread's newest
/// event before a commit writes it. Writing it at every commit would
/// rewrite the thread row and its `threads_by_updated` entry (two pages of
/// the WAL) per commit; `Thread::updated_at` is in seconds anyway.
pub(super) const UPDATED_AT_LAG_MS: i64 = 1_000;

/// A batch's `events` rows (`multi_row.rs`).
static EVENTS: MultiRow = MultiRow::new(
    "INSERT INTO events (thread_id, seq, method, item_id, at_ms, payload, pos) VALUES",
    6,
    "",
);

/// A turn's row, among the thread's item rows (`keys.rs`). A `pos` that an
/// item holds is an error, never an update of the item.
const UPSERT_TURN: &str = "INSERT INTO items (thread_id, item_id, turn_id, ordinal, seq, status, \
     error, started_at, completed_at, duration_ms, token_usage, view_rank, pos, kind, item, \
     envelope, is_turn) \
     VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'turn', '', '', 1) \
     ON CONFLICT (item_id, thread_id, is_turn) DO UPDATE SET seq = excluded.seq, \
     status = excluded.status, error = excluded.error, started_at = excluded.started_at, \
     completed_at = excluded.completed_at, duration_ms = excluded.duration_ms, \
     token_usage = excluded.token_usage";

/// A batch's `items` rows, each written whole or over its older self
/// (`multi_row.rs`).
static ITEMS: MultiRow = MultiRow::new(
    "INSERT INTO items (thread_id, item_id, turn_id, ordinal, seq, kind, status, item, \
     envelope, token_count, input_item, llm, pos) VALUES",
    12,
    " ON CONFLICT (item_id, thread_id, is_turn) DO UPDATE SET seq = excluded.seq, \
     status = excluded.status, item = excluded.item, envelope = excluded.envelope, \
     token_count = excluded.token_count, input_item = excluded.input_item, llm = excluded.llm",
);

/// The thread's seq reservation (`thread_state::reserve`).
const UPSERT_RESERVATION: &str = "INSERT INTO seq_reservations (thread_id, upto) VALUES (?1, ?2) \
     ON CONFLICT (thread_id) DO UPDATE SET upto = excluded.upto";
const DELETE_RESERVATION: &str = "DELETE FROM seq_reservations WHERE thread_id = ?1";

const DELETE_ITEMS: &str = concat!(
    "DELETE FROM items WHERE ",
    keys::of_thread!(),
    " AND is_turn = 0"
);
const DELETE_ITEM: &str = "DELETE FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 0";

/// Only a count computed for the item as it still is may be cached: the
/// seq guard drops counts for items that changed since they were read.
const CACHE_TOKEN_COUNT: &str = "UPDATE items SET token_count = ?4 WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 0 \
     AND seq = ?3";

/// A batch's `BEGIN IMMEDIATE`, rolled back when dropped unless kept: an
/// error on the way leaves the connection clean.
///
/// `BEGIN` (and `COMMIT`, `commit::finish`) come from the statement cache:
/// parsed anew for every batch, as `Transaction` does, they cost ~5k
/// instructions a commit, 2% of a one-item `add_items` (callgrind).
pub(super) struct Begun<'c>(Option<&'c Connection>);

impl<'c> Begun<'c> {
    pub(super) fn immediate(conn: &'c Connection) -> Result<Begun<'c>, StoreError> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Begun(Some(conn)))
    }

    /// Leaves the transaction open, for `COMMIT`.
    pub(super) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Begun<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.0 {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
}

pub(super) fn write_token_counts(
    tx: &Connection,
    token_counts: &[(String, Vec<TokenCount>)],
) -> Result<(), StoreError> {
    if !token_counts.is_empty() {
        let mut stmt = tx.prepare_cached(CACHE_TOKEN_COUNT)?;
        for (thread_id, counts) in token_counts {
            for count in counts {
                stmt.execute((
                    thread_id,
                    &count.item_id,
                    sql_int(count.seq),
                    count.token_count,
                ))?;
            }
        }
    }
    Ok(())
}

/// Writes the pending changes of one thread inside the caller's
/// transaction.
pub(super) fn write_thread(
    conn: &Connection,
    thread_id: &str,
    state: &mut ThreadState,
) -> Result<(), StoreError> {
    let pending = &mut state.pending;
    if let Some(record) = &pending.created {
        let thread = &record.thread;
        let history_mode = thread.history_owner.unwrap_or_default();
        let key: i64 = conn
            .prepare_cached(NEXT_THREAD_KEY)?
            .query_row((), |row| row.get(0))?;
        let params = (
            &thread.id,
            &thread.name,
            &thread.preview,
            &thread.model_provider,
            &thread.model,
            &thread.cwd,
            &thread.cli_version,
            history_mode.as_str(),
            record.dev_mode,
            &thread.forked_from_id,
            record.archived,
            pending.created_at_ms,
            pending.created_at_ms,
            thread.ephemeral,
            key,
        );
        conn.prepare_cached(INSERT_THREAD)?.execute(params)?;
        state.key = Some(key);
    }
    let key = match state.key {
        Some(key) => key,
        None => {
            let key = conn
                .prepare_cached(THREAD_KEY)?
                .query_row((thread_id,), |row| row.get(0))?;
            *state.key.insert(key)
        }
    };
    let pending = &mut state.pending;

    let mut event_rows = Vec::with_capacity(pending.events.len());
    for event in &pending.events {
        // The body once: the completion of an item born complete leaves
        // its body to the item's row when this batch writes that row at
        // the completion's seq (not when the item is removed or cleared
        // later in the batch: its row is then gone or another).
        // A turn's start or completion leaves its body to the turn's row,
        // which this batch writes (the start's) or whose fields no longer
        // change (the completion's).
        let (method, payload) = match event.body {
            Body::Item
                if event.item_id.as_deref().is_some_and(|item_id| {
                    state
                        .reducer
                        .item(item_id)
                        .is_some_and(|record| record.seq == event.seq)
                }) =>
            {
                (PROJECTED, Cow::Borrowed(""))
            }
            Body::TurnStart => (TURN_START_PROJECTED, Cow::Borrowed("")),
            Body::TurnEnd { ordinal } => (TURN_END_PROJECTED, Cow::Owned(ordinal.to_string())),
            Body::Own | Body::Item => {
                (event.method, event.payload_json(&state.reducer, thread_id)?)
            }
        };
        let pos = keys::pos(thread_id, key, event.seq)?;
        event_rows.push((event, method, payload, pos));
    }
    multi_row::insert(conn, &EVENTS, thread_id, &event_rows, |stmt, at, row| {
        let (event, method, payload, pos) = row;
        stmt.raw_bind_parameter(at, sql_int(event.seq))?;
        stmt.raw_bind_parameter(at + 1, *method)?;
        stmt.raw_bind_parameter(at + 2, event.item_id.as_deref())?;
        stmt.raw_bind_parameter(at + 3, event.at_ms)?;
        stmt.raw_bind_parameter(at + 4, &**payload)?;
        stmt.raw_bind_parameter(at + 5, *pos)?;
        Ok(())
    })?;

    // Turns before items: an item row refers to its turn's row.
    let first_seq = pending.first_seq();
    let dirty = &mut pending.dirty;
    dirty.turns.sort_unstable();
    dirty.turns.dedup();
    dirty.items.sort_unstable();
    dirty.items.dedup();
    let touched = ranks::touched(state);
    // Ranked in memory only when the reducer holds every touched turn.
    let in_memory_from = match touched.unknown_turns.is_empty() {
        true => touched.min_ordinal.map(sql_int),
        false => None,
    };
    let touched = TouchedTurns {
        min_ordinal: touched.min_ordinal,
        turn_ids: touched
            .unknown_turns
            .iter()
            .map(|id| id.to_string())
            .collect(),
        cleared: state.pending.dirty.cleared,
    };
    let new_ranks = match in_memory_from {
        Some(from) => rank_in_memory(conn, thread_id, state, from)?,
        None => None,
    };
    let dirty = &state.pending.dirty;
    let turns = state.reducer.turns();
    // A statement is taken from the cache only when there is a row for it:
    // each take hashes its SQL twice (out and back in), and at a trickle a
    // commit writes one delta for each of many threads, none of them
    // touching a turn or removing an item.
    let mut upsert_turn = None;
    for &index in &dirty.turns {
        let turn = &turns[index];
        let (error, token_usage) = encode_turn_json(turn)?;
        // A rank the writer computed, or 0 until the tables rank the turn
        // (an update leaves the stored rank to that).
        let view_rank = new_ranks.as_ref().and_then(|new| new.of(index));
        let upsert_turn = match &mut upsert_turn {
            Some(statement) => statement,
            None => upsert_turn.insert(conn.prepare_cached(UPSERT_TURN)?),
        };
        upsert_turn.execute((
            thread_id,
            &turn.id,
            sql_int(turn.ordinal),
            sql_int(turn.seq),
            turn.status.as_str(),
            error,
            turn.started_at,
            turn.completed_at,
            turn.duration_ms,
            token_usage,
            view_rank.unwrap_or(0),
            keys::pos(thread_id, key, turn.ordinal)?,
        ))?;
    }

    // Deletions before upserts: an item started after a clear, or started
    // again after its removal, must survive the deletion.
    // A log row whose body is an item row gets it back first (`projected.rs`).
    if dirty.cleared {
        projected::restore(conn, thread_id, None)?;
        conn.prepare_cached(DELETE_ITEMS)?.execute((thread_id,))?;
    }
    let mut delete_item = None;
    for removed in &dirty.removed {
        projected::restore(conn, thread_id, Some(&removed.item_id))?;
        let delete_item = match &mut delete_item {
            Some(statement) => statement,
            None => delete_item.insert(conn.prepare_cached(DELETE_ITEM)?),
        };
        delete_item.execute((thread_id, &removed.item_id))?;
    }

    let items = state.reducer.items();
    let mut item_rows = Vec::with_capacity(dirty.items.len());
    for &index in &dirty.items {
        let record = &items[index];
        if keeps_row(record, first_seq) {
            continue;
        }
        let encoded = encode_item_json(record)?;
        item_rows.push((record, encoded, keys::pos(thread_id, key, record.ordinal)?));
    }
    multi_row::insert(conn, &ITEMS, thread_id, &item_rows, |stmt, at, row| {
        let (record, (item, envelope, input_item), pos) = row;
        stmt.raw_bind_parameter(at, record.item.id())?;
        stmt.raw_bind_parameter(at + 1, &record.turn_id)?;
        stmt.raw_bind_parameter(at + 2, sql_int(record.ordinal))?;
        stmt.raw_bind_parameter(at + 3, sql_int(record.seq))?;
        stmt.raw_bind_parameter(at + 4, record.item.kind().as_str())?;
        stmt.raw_bind_parameter(at + 5, record.envelope.status.as_str())?;
        stmt.raw_bind_parameter(at + 6, item)?;
        stmt.raw_bind_parameter(at + 7, envelope)?;
        stmt.raw_bind_parameter(at + 8, record.token_count)?;
        stmt.raw_bind_parameter(at + 9, input_item)?;
        stmt.raw_bind_parameter(at + 10, in_view(record))?;
        stmt.raw_bind_parameter(at + 11, *pos)?;
        Ok(())
    })?;
    match new_ranks {
        Some(new) => state.rank_tail = new.tail.unwrap_or(state.rank_tail),
        None if touched.is_empty() => {}
        None => {
            update_view_ranks(conn, thread_id, touched)?;
            state.rank_tail = RankTail::Unknown;
        }
    }
    let (last_seq, streaming) = (state.reducer.last_seq(), state.streaming());
    match state.seqs.write(last_seq, streaming) {
        None => {}
        Some(0) => {
            conn.prepare_cached(DELETE_RESERVATION)?
                .execute((thread_id,))?;
        }
        Some(upto) => {
            conn.prepare_cached(UPSERT_RESERVATION)?
                .execute((thread_id, sql_int(upto)))?;
        }
    }

    write_thread_row(conn, thread_id, state)
}

/// The ranks of the batch's new turns, the oldest touched one at ordinal
/// `from`, when the writer can compute them itself
/// (`thread_state/ranks.rs`). Reads the newest committed turn when the
/// state does not know it; `None` leaves the ranking to the tables.
fn rank_in_memory(
    conn: &Connection,
    thread_id: &str,
    state: &mut ThreadState,
    from: i64,
) -> Result<Option<NewRanks>, StoreError> {
    if !ranks::may_rank(state, from) {
        return Ok(None);
    }
    if state.rank_tail == RankTail::Unknown {
        state.rank_tail = conn
            .prepare_cached(ranks::NEWEST_TURN[1])?
            .query_row((thread_id,), |row| {
                Ok(RankTail::Turn {
                    ordinal: row.get(0)?,
                    rank: row.get(1)?,
                })
            })
            .optional()?
            .unwrap_or(RankTail::Empty);
    }
    Ok(ranks::new_ranks(state, from))
}

/// The thread row: its settings if an event changed them, and
/// `updated_at_ms` if it lags by [`UPDATED_AT_LAG_MS`] or more, or must be
/// flushed (see `ThreadState::flush_updated_at`).
fn write_thread_row(
    conn: &Connection,
    thread_id: &str,
    state: &mut ThreadState,
) -> Result<(), StoreError> {
    let pending = &state.pending;
    if pending.name.is_some() || pending.preview.is_some() || pending.archived.is_some() {
        let (set_name, name) = match &pending.name {
            Some(name) => (true, name.as_deref()),
            None => (false, None),
        };
        conn.prepare_cached(UPDATE_THREAD_SETTINGS)?.execute((
            thread_id,
            set_name,
            name,
            pending.preview.as_deref(),
            pending.archived,
        ))?;
    }
    let lag = state
        .updated_at_ms
        .saturating_sub(state.stored_updated_at_ms);
    if state.updated_at_stale() && (lag >= UPDATED_AT_LAG_MS || state.flush_updated_at) {
        conn.prepare_cached(UPDATE_UPDATED_AT)?
            .execute((thread_id, state.updated_at_ms))?;
        state.stored_updated_at_ms = state.updated_at_ms;
    }
    state.flush_updated_at = false;
    Ok(())
}
