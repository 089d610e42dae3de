//! Writing pending changes inside the writer's transaction: events, the
//! projection rows they changed, view ranks and thread rows, for every
//! thread of a group commit at once.
//!
//! A [`Plan`] gathers the rows of all the batch's threads column by
//! column, and rows of one kind go in one statement (arrays unnested), so
//! a commit costs a handful of statements however many threads and events
//! it holds; [`Plan::queue`] puts them in a [`Pipeline`], which sends them
//! in one round trip. Per thread, the order is the one the rows need:
//! the thread row, its events, turns before items (an item row refers to
//! its turn's), deletions before upserts (an item started after a clear,
//! or again after its removal, must survive the deletion), view ranks
//! once the items are in place.

use std::borrow::Cow;

use spool_core::llm::in_view;

use super::pipeline::Pipeline;
use super::query::{CachedClient, Query};
use super::rank;
use crate::codec::{encode_item_json, encode_turn_json, sql_int};
use crate::error::StoreError;
use crate::thread_state::pending::{Pending, keeps_row};
use crate::thread_state::ranks::{self, NewRanks};
use crate::thread_state::{RankTail, ThreadState};

const INSERT_THREAD: &str = "INSERT INTO threads (id, name, preview, model_provider, model, \
     cwd, cli_version, history_mode, dev_mode, forked_from_id, archived, created_at_ms, \
     updated_at_ms, ephemeral) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)";

const INSERT_EVENTS: &str = "INSERT INTO events (thread_id, seq, method, item_id, at_ms, payload) \
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], \
     $6::text[])";

/// Turn rows: a turn started in the commit is new, and is inserted (a
/// plain insert: `ON CONFLICT` costs PostgreSQL a speculative insertion
/// per row, about a tenth of an append's time); any other turn may have a
/// row, and is upserted ([`TURN_UPSERT`]). A turn written gets its view
/// rank when the writer ranked it (`rank.rs`), else 0 until
/// `UPDATE_VIEW_RANKS` ranks it; an update leaves the rank to that
/// statement.
macro_rules! insert_turns {
    () => {
        "INSERT INTO turns (thread_id, turn_id, ordinal, seq, status, error, \
         started_at, completed_at, duration_ms, token_usage, view_rank) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], \
         $6::text[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::bigint[])"
    };
}
const TURN_WRITES: [&str; 2] = [
    concat!(
        insert_turns!(),
        " ON CONFLICT (thread_id, turn_id) DO UPDATE SET seq = excluded.seq, \
         status = excluded.status, error = excluded.error, started_at = excluded.started_at, \
         completed_at = excluded.completed_at, duration_ms = excluded.duration_ms, \
         token_usage = excluded.token_usage"
    ),
    insert_turns!(),
];
/// Which of [`TURN_WRITES`] (and [`ITEM_WRITES`]) writes rows that may
/// exist already.
const UPSERT: usize = 0;
/// Which writes rows started in the commit, that cannot exist yet.
const INSERT: usize = 1;

/// Item rows, as turn rows ([`TURN_WRITES`]): new ones inserted, others
/// upserted.
macro_rules! insert_items {
    () => {
        "INSERT INTO items (thread_id, item_id, turn_id, ordinal, seq, kind, \
         status, item, envelope, token_count, input_item, llm) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], \
         $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::boolean[])"
    };
}
const ITEM_WRITES: [&str; 2] = [
    concat!(
        insert_items!(),
        " ON CONFLICT (thread_id, item_id) DO UPDATE SET seq = excluded.seq, \
         status = excluded.status, item = excluded.item, envelope = excluded.envelope, \
         token_count = excluded.token_count, input_item = excluded.input_item, llm = excluded.llm"
    ),
    insert_items!(),
];

/// `thread/cleared`: every item row of these threads goes, and no turn of
/// them has an item in the model's view.
const CLEAR_ITEMS: &str = "DELETE FROM items WHERE thread_id = ANY($1::text[])";
const ZERO_RANKS: &str =
    "UPDATE turns SET view_rank = 0 WHERE thread_id = ANY($1::text[]) AND view_rank <> 0";
const DELETE_REMOVED: &str = "DELETE FROM items i \
     USING unnest($1::text[], $2::text[]) AS r(thread_id, item_id) \
     WHERE i.thread_id = r.thread_id AND i.item_id = r.item_id";

/// Re-ranks the thread's turns from ordinal `$2` on: for each, how many
/// turns up to it have an item in the model's view (what
/// `turns.view_rank` means in SQLite too). Every bound is a parameter, so
/// each scan is an index range: the cost is the turns re-ranked, not the
/// thread's (a bound computed inside the statement left PostgreSQL
/// scanning every turn of the thread, 3 to 8 ms a commit on a
/// 10,000-turn session). The items of a turn are a range with both ends
/// bound (`ordinal < coalesce(next, max)`): with an open end written as
/// `next IS NULL OR ordinal < next`, the plan PostgreSQL caches for the
/// statement scanned every item of the table once per turn re-ranked (a
/// commit of 250 turns on a 100,000-item thread took two minutes, past
/// its lease). One statement per thread, pipelined: a single
/// statement for all the threads of a batch, bounds unnested, was slower
/// (0.8 ms for 10 threads against 0.03 ms a thread), and joined on keys
/// the planner hashed the whole table.
const UPDATE_VIEW_RANKS: &str = "WITH spans AS ( \
       SELECT t.turn_id, t.ordinal, lead(t.ordinal) OVER (ORDER BY t.ordinal) AS next \
       FROM turns t WHERE t.thread_id = $1 AND t.ordinal >= $2), \
     ranked AS ( \
       SELECT s.turn_id, \
         coalesce((SELECT p.view_rank FROM turns p WHERE p.thread_id = $1 \
           AND p.ordinal < $2 ORDER BY p.ordinal DESC LIMIT 1), 0) \
         + sum(CASE WHEN EXISTS (SELECT 1 FROM items i WHERE i.thread_id = $1 \
             AND i.ordinal > s.ordinal AND i.ordinal < coalesce(s.next, 9223372036854775807) \
             AND i.llm) \
           THEN 1 ELSE 0 END) OVER (ORDER BY s.ordinal) AS rank \
       FROM spans s) \
     UPDATE turns SET view_rank = ranked.rank FROM ranked \
     WHERE turns.thread_id = $1 AND turns.ordinal >= $2 \
       AND turns.turn_id = ranked.turn_id AND turns.view_rank <> ranked.rank";
/// The smallest ordinal of turns known by id (`$2`), or `$3` if smaller.
const FIRST_TOUCHED: &str = "SELECT least($3::bigint, (SELECT min(ordinal) FROM turns \
     WHERE thread_id = $1 AND turn_id = ANY($2::text[])))";

const UPDATE_THREAD_SETTINGS: &str = "UPDATE threads SET \
     name = CASE WHEN $2 THEN $3 ELSE name END, \
     preview = coalesce($4, preview), \
     archived = coalesce($5, archived) \
     WHERE id = $1";
const UPDATE_UPDATED_AT: &str = "UPDATE threads t SET updated_at_ms = x.at_ms \
     FROM unnest($1::text[], $2::bigint[]) AS x(id, at_ms) \
     WHERE t.id = x.id AND t.updated_at_ms < x.at_ms";

/// How far `threads.updated_at_ms` may lag behind the thread's newest
/// event before a commit writes it (readers raise it to the newest event's
/// time anyway, see `codec.rs`).
const UPDATED_AT_LAG_MS: i64 = 1_000;

/// What [`prepare`] found out about one thread's pending changes.
pub(super) struct Shape {
    /// The first turn ordinal whose view rank may have changed, for the
    /// statement to re-rank from; `None` when nothing may have changed or
    /// the writer ranked the turns itself.
    rank_from: Option<i64>,
    /// The ranks of the new turns, when the writer computed them.
    new_ranks: Option<NewRanks>,
    /// Whether `threads.updated_at_ms` is written.
    updated_at: bool,
}

/// Gets one thread's pending changes ready for a [`Plan`]: orders its
/// dirty rows, and finds where its view ranks start to change (a read,
/// only when a changed row's turn is not in the state's memory).
pub(super) async fn prepare(
    q: &CachedClient,
    thread_id: &str,
    state: &mut ThreadState,
) -> Result<Shape, StoreError> {
    let dirty = &mut state.pending.dirty;
    dirty.turns.sort_unstable();
    dirty.turns.dedup();
    dirty.items.sort_unstable();
    dirty.items.dedup();
    let touched = ranks::touched(state);
    let min_ordinal = touched.min_ordinal.map(sql_int);
    let unknown_turns = touched.unknown_turns;
    let rank_from = match unknown_turns.is_empty() {
        true => min_ordinal,
        false => q
            .opt_row(
                FIRST_TOUCHED,
                &[&thread_id, &unknown_turns, &min_ordinal.unwrap_or(i64::MAX)],
            )
            .await?
            .map(|row| row.try_get::<_, Option<i64>>(0))
            .transpose()?
            .flatten(),
    };
    let rank_from = rank_from.filter(|&from| from < i64::MAX);
    let new_ranks = match rank_from {
        Some(from) => rank::new_ranks(q, thread_id, state, from).await?,
        None => None,
    };
    let lag = state
        .updated_at_ms
        .saturating_sub(state.stored_updated_at_ms);
    Ok(Shape {
        rank_from: rank_from.filter(|_| new_ranks.is_none()),
        new_ranks,
        updated_at: state.updated_at_stale()
            && (lag >= UPDATED_AT_LAG_MS || state.flush_updated_at),
    })
}

/// What [`Plan`] wrote is in a transaction: `state` knows it.
pub(super) fn wrote(state: &mut ThreadState, shape: &Shape) {
    match (&shape.new_ranks, shape.rank_from) {
        (Some(new), _) => state.rank_tail = new.tail.unwrap_or(state.rank_tail),
        // The statement ranked: what the newest turn's rank is now is read
        // again when needed.
        (None, Some(_)) => state.rank_tail = RankTail::Unknown,
        (None, None) => {}
    }
    if shape.updated_at {
        state.stored_updated_at_ms = state.updated_at_ms;
    }
    state.flush_updated_at = false;
}

/// Writes the pending changes of one thread inside the caller's
/// transaction.
pub(super) async fn write_thread(
    q: &CachedClient,
    thread_id: &str,
    state: &mut ThreadState,
) -> Result<(), StoreError> {
    let shape = prepare(q, thread_id, state).await?;
    {
        let mut plan = Plan::default();
        plan.add(thread_id, state, &shape)?;
        let mut pipeline = Pipeline::default();
        plan.queue(q, &mut pipeline).await?;
        pipeline.run().await.map_err(|failed| failed.error)?;
    }
    wrote(state, &shape);
    Ok(())
}

/// The rows a batch writes, gathered across its threads.
#[derive(Default)]
pub(super) struct Plan<'a> {
    created: Vec<&'a ThreadState>,
    events: EventColumns<'a>,
    /// Turn rows by how they are written ([`UPSERT`], [`INSERT`]).
    turns: [TurnColumns<'a>; 2],
    cleared: Vec<&'a str>,
    removed_threads: Vec<&'a str>,
    removed_items: Vec<&'a str>,
    /// Item rows by how they are written ([`UPSERT`], [`INSERT`]).
    items: [ItemColumns<'a>; 2],
    rank_threads: Vec<&'a str>,
    rank_froms: Vec<i64>,
    settings: Vec<(&'a str, &'a Pending)>,
    updated_ids: Vec<&'a str>,
    updated_ats: Vec<i64>,
}

impl<'a> Plan<'a> {
    /// Adds one thread's pending changes, made ready by [`prepare`].
    pub(super) fn add(
        &mut self,
        thread_id: &'a str,
        state: &'a ThreadState,
        shape: &Shape,
    ) -> Result<(), StoreError> {
        let pending = &state.pending;
        if pending.created.is_some() {
            self.created.push(state);
        }
        // Every event row holds its body (no `item/projected` rows here);
        // a start folded into its completion has no row of its own
        // (`born.rs`).
        for event in &pending.events {
            let e = &mut self.events;
            e.thread_ids.push(thread_id);
            e.seqs.push(sql_int(event.seq));
            e.methods.push(event.method);
            e.item_ids.push(event.item_id.as_deref());
            e.ats.push(event.at_ms);
            e.payloads
                .push(event.payload_json(&state.reducer, thread_id)?);
        }
        // A turn or item whose start (its ordinal) is among the commit's
        // events has no row yet: the seqs of a thread's pending events
        // come after every seq it has committed.
        let first_seq = pending.first_seq();
        let born = |ordinal: u64| if ordinal >= first_seq { INSERT } else { UPSERT };
        let turns = state.reducer.turns();
        for &index in &pending.dirty.turns {
            let turn = &turns[index];
            let (error, token_usage) = encode_turn_json(turn)?;
            let t = &mut self.turns[born(turn.ordinal)];
            t.thread_ids.push(thread_id);
            t.turn_ids.push(&turn.id);
            t.ordinals.push(sql_int(turn.ordinal));
            t.seqs.push(sql_int(turn.seq));
            t.statuses.push(turn.status.as_str());
            t.errors.push(error);
            t.started.push(turn.started_at);
            t.completed.push(turn.completed_at);
            t.durations.push(turn.duration_ms);
            t.token_usages.push(token_usage);
            let ranked = shape.new_ranks.as_ref().and_then(|new| new.of(index));
            t.view_ranks.push(ranked.unwrap_or(0));
        }
        if pending.dirty.cleared {
            self.cleared.push(thread_id);
        }
        for removed in &pending.dirty.removed {
            self.removed_threads.push(thread_id);
            self.removed_items.push(&removed.item_id);
        }
        let items = state.reducer.items();
        let first_seq = pending.first_seq();
        for &index in &pending.dirty.items {
            let record = &items[index];
            if keeps_row(record, first_seq) {
                continue;
            }
            let (item, envelope, input_item) = encode_item_json(record)?;
            let c = &mut self.items[born(record.ordinal)];
            c.thread_ids.push(thread_id);
            c.item_ids.push(record.item.id());
            c.turn_ids.push(&record.turn_id);
            c.ordinals.push(sql_int(record.ordinal));
            c.seqs.push(sql_int(record.seq));
            c.kinds.push(record.item.kind().as_str());
            c.statuses.push(record.envelope.status.as_str());
            c.items.push(item);
            c.envelopes.push(envelope);
            c.token_counts.push(record.token_count.map(i64::from));
            c.input_items.push(input_item);
            c.llm.push(in_view(record));
        }
        if let Some(from) = shape.rank_from {
            self.rank_threads.push(thread_id);
            self.rank_froms.push(from);
        }
        if pending.name.is_some() || pending.preview.is_some() || pending.archived.is_some() {
            self.settings.push((thread_id, pending));
        }
        if shape.updated_at {
            self.updated_ids.push(thread_id);
            self.updated_ats.push(state.updated_at_ms);
        }
        Ok(())
    }

    /// Puts the plan's statements in `pipeline`, in the order the rows
    /// need. Prepares each first (a round trip the first time only), so
    /// every step sends its request on its first poll.
    pub(super) async fn queue(
        &'a self,
        q: &'a CachedClient,
        pipeline: &mut Pipeline<'a>,
    ) -> Result<(), StoreError> {
        for state in &self.created {
            let Some(record) = &state.pending.created else {
                continue;
            };
            let statement = q.statement(INSERT_THREAD).await?;
            let thread = &record.thread;
            let history_mode = thread.history_owner.unwrap_or_default().as_str();
            let created_at_ms = &state.pending.created_at_ms;
            pipeline.push(async move {
                q.execute_prepared(
                    &statement,
                    &[
                        &thread.id,
                        &thread.name,
                        &thread.preview,
                        &thread.model_provider,
                        &thread.model,
                        &thread.cwd,
                        &thread.cli_version,
                        &history_mode,
                        &record.dev_mode,
                        &thread.forked_from_id,
                        &record.archived,
                        created_at_ms,
                        &thread.ephemeral,
                    ],
                )
                .await
            });
        }
        if !self.events.seqs.is_empty() {
            let statement = q.statement(INSERT_EVENTS).await?;
            let e = &self.events;
            pipeline.push(async move {
                let payloads: Vec<&str> = e.payloads.iter().map(|p| p.as_ref()).collect();
                q.execute_prepared(
                    &statement,
                    &[
                        &e.thread_ids,
                        &e.seqs,
                        &e.methods,
                        &e.item_ids,
                        &e.ats,
                        &payloads,
                    ],
                )
                .await
            });
        }
        for (t, sql) in self.turns.iter().zip(TURN_WRITES) {
            if t.turn_ids.is_empty() {
                continue;
            }
            let statement = q.statement(sql).await?;
            pipeline.push(async move {
                q.execute_prepared(
                    &statement,
                    &[
                        &t.thread_ids,
                        &t.turn_ids,
                        &t.ordinals,
                        &t.seqs,
                        &t.statuses,
                        &t.errors,
                        &t.started,
                        &t.completed,
                        &t.durations,
                        &t.token_usages,
                        &t.view_ranks,
                    ],
                )
                .await
            });
        }
        if !self.cleared.is_empty() {
            let (clear, zero) = (
                q.statement(CLEAR_ITEMS).await?,
                q.statement(ZERO_RANKS).await?,
            );
            let cleared = &self.cleared;
            pipeline.push(async move { q.execute_prepared(&clear, &[cleared]).await });
            pipeline.push(async move { q.execute_prepared(&zero, &[cleared]).await });
        }
        if !self.removed_items.is_empty() {
            let statement = q.statement(DELETE_REMOVED).await?;
            let (threads, items) = (&self.removed_threads, &self.removed_items);
            pipeline.push(async move { q.execute_prepared(&statement, &[threads, items]).await });
        }
        for (c, sql) in self.items.iter().zip(ITEM_WRITES) {
            if c.item_ids.is_empty() {
                continue;
            }
            let statement = q.statement(sql).await?;
            pipeline.push(async move {
                q.execute_prepared(
                    &statement,
                    &[
                        &c.thread_ids,
                        &c.item_ids,
                        &c.turn_ids,
                        &c.ordinals,
                        &c.seqs,
                        &c.kinds,
                        &c.statuses,
                        &c.items,
                        &c.envelopes,
                        &c.token_counts,
                        &c.input_items,
                        &c.llm,
                    ],
                )
                .await
            });
        }
        for (thread_id, from) in self.rank_threads.iter().zip(&self.rank_froms) {
            let statement = q.statement(UPDATE_VIEW_RANKS).await?;
            pipeline.push(async move { q.execute_prepared(&statement, &[thread_id, from]).await });
        }
        for (thread_id, pending) in &self.settings {
            let statement = q.statement(UPDATE_THREAD_SETTINGS).await?;
            let (set_name, name) = match &pending.name {
                Some(name) => (true, name.as_deref()),
                None => (false, None),
            };
            pipeline.push(async move {
                q.execute_prepared(
                    &statement,
                    &[
                        thread_id,
                        &set_name,
                        &name,
                        &pending.preview.as_deref(),
                        &pending.archived,
                    ],
                )
                .await
            });
        }
        if !self.updated_ids.is_empty() {
            let statement = q.statement(UPDATE_UPDATED_AT).await?;
            let (ids, ats) = (&self.updated_ids, &self.updated_ats);
            pipeline.push(async move { q.execute_prepared(&statement, &[ids, ats]).await });
        }
        Ok(())
    }
}

/// The event rows of a batch, column by column.
#[derive(Default)]
struct EventColumns<'a> {
    thread_ids: Vec<&'a str>,
    seqs: Vec<i64>,
    methods: Vec<&'static str>,
    item_ids: Vec<Option<&'a str>>,
    ats: Vec<i64>,
    payloads: Vec<Cow<'a, str>>,
}

/// The turn rows of a batch, column by column.
#[derive(Default)]
struct TurnColumns<'a> {
    thread_ids: Vec<&'a str>,
    turn_ids: Vec<&'a str>,
    ordinals: Vec<i64>,
    seqs: Vec<i64>,
    statuses: Vec<&'static str>,
    errors: Vec<Option<String>>,
    started: Vec<Option<i64>>,
    completed: Vec<Option<i64>>,
    durations: Vec<Option<i64>>,
    token_usages: Vec<Option<String>>,
    view_ranks: Vec<i64>,
}

/// The item rows of a batch, column by column.
#[derive(Default)]
struct ItemColumns<'a> {
    thread_ids: Vec<&'a str>,
    item_ids: Vec<&'a str>,
    turn_ids: Vec<&'a str>,
    ordinals: Vec<i64>,
    seqs: Vec<i64>,
    kinds: Vec<&'static str>,
    statuses: Vec<&'static str>,
    items: Vec<String>,
    envelopes: Vec<String>,
    token_counts: Vec<Option<i64>>,
    input_items: Vec<Option<String>>,
    llm: Vec<bool>,
}
