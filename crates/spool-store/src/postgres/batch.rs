//! Writing one thread's pending changes inside the writer's transaction:
//! its events, the projection rows they changed, its view ranks and its
//! thread row. Rows of one kind go in one statement (arrays unnested), so
//! a batch costs a handful of round trips however many events it holds.

use spool_core::llm::in_view;

use super::query::{CachedClient, Query};
use crate::codec::{encode_item_json, encode_turn_json, sql_int};
use crate::error::StoreError;
use crate::thread_state::ThreadState;

const INSERT_THREAD: &str = "INSERT INTO threads (id, name, preview, model_provider, model, \
     cwd, cli_version, history_mode, dev_mode, forked_from_id, archived, created_at_ms, \
     updated_at_ms, ephemeral) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)";

const INSERT_EVENTS: &str = "INSERT INTO events (thread_id, seq, method, item_id, at_ms, payload) \
     SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[])";

const UPSERT_TURN: &str = "INSERT INTO turns (thread_id, turn_id, ordinal, seq, status, error, \
     started_at, completed_at, duration_ms, token_usage) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
     ON CONFLICT (thread_id, turn_id) DO UPDATE SET seq = excluded.seq, \
     status = excluded.status, error = excluded.error, started_at = excluded.started_at, \
     completed_at = excluded.completed_at, duration_ms = excluded.duration_ms, \
     token_usage = excluded.token_usage";

const UPSERT_ITEMS: &str = "INSERT INTO items (thread_id, item_id, turn_id, ordinal, seq, kind, \
     status, item, envelope, token_count, input_item, llm) \
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], \
     $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::boolean[]) \
     ON CONFLICT (thread_id, item_id) DO UPDATE SET seq = excluded.seq, \
     status = excluded.status, item = excluded.item, envelope = excluded.envelope, \
     token_count = excluded.token_count, input_item = excluded.input_item, llm = excluded.llm";

const DELETE_ITEMS: &str = "DELETE FROM items WHERE thread_id = $1";
const DELETE_ITEM: &str = "DELETE FROM items WHERE thread_id = $1 AND item_id = $2";

/// Re-ranks the thread's turns from ordinal `$2` on: for each, how many
/// turns up to it have an item in the model's view (what
/// `turns.view_rank` means in SQLite too). Every bound is a parameter, so
/// each scan is an index range: the cost is the turns re-ranked, not the
/// thread's (a bound computed inside the statement left PostgreSQL
/// scanning every turn of the thread, 3 to 8 ms a commit on a
/// 10,000-turn session).
const UPDATE_VIEW_RANKS: &str = "WITH spans AS ( \
       SELECT t.turn_id, t.ordinal, lead(t.ordinal) OVER (ORDER BY t.ordinal) AS next \
       FROM turns t WHERE t.thread_id = $1 AND t.ordinal >= $2), \
     ranked AS ( \
       SELECT s.turn_id, \
         coalesce((SELECT p.view_rank FROM turns p WHERE p.thread_id = $1 \
           AND p.ordinal < $2 ORDER BY p.ordinal DESC LIMIT 1), 0) \
         + sum(CASE WHEN EXISTS (SELECT 1 FROM items i WHERE i.thread_id = $1 \
             AND i.ordinal > s.ordinal AND (s.next IS NULL OR i.ordinal < s.next) AND i.llm) \
           THEN 1 ELSE 0 END) OVER (ORDER BY s.ordinal) AS rank \
       FROM spans s) \
     UPDATE turns SET view_rank = ranked.rank FROM ranked \
     WHERE turns.thread_id = $1 AND turns.ordinal >= $2 \
       AND turns.turn_id = ranked.turn_id AND turns.view_rank <> ranked.rank";
/// The smallest ordinal of turns known by id (`$2`), or `$3` if smaller.
const FIRST_TOUCHED: &str = "SELECT least($3::bigint, (SELECT min(ordinal) FROM turns \
     WHERE thread_id = $1 AND turn_id = ANY($2::text[])))";
const ZERO_RANKS: &str = "UPDATE turns SET view_rank = 0 WHERE thread_id = $1 AND view_rank <> 0";

const UPDATE_THREAD_SETTINGS: &str = "UPDATE threads SET \
     name = CASE WHEN $2 THEN $3 ELSE name END, \
     preview = coalesce($4, preview), \
     archived = coalesce($5, archived) \
     WHERE id = $1";
const UPDATE_UPDATED_AT: &str =
    "UPDATE threads SET updated_at_ms = $2 WHERE id = $1 AND updated_at_ms < $2";

/// How far `threads.updated_at_ms` may lag behind the thread's newest
/// event before a commit writes it (readers raise it to the newest event's
/// time anyway, see `codec.rs`).
const UPDATED_AT_LAG_MS: i64 = 1_000;

/// Writes the pending changes of one thread inside the caller's
/// transaction.
pub(super) async fn write_thread(
    q: &CachedClient,
    thread_id: &str,
    state: &mut ThreadState,
) -> Result<(), StoreError> {
    let pending = &mut state.pending;
    if let Some(record) = &pending.created {
        let thread = &record.thread;
        let history_mode = thread.history_owner.unwrap_or_default();
        q.exec(
            INSERT_THREAD,
            &[
                &thread.id,
                &thread.name,
                &thread.preview,
                &thread.model_provider,
                &thread.model,
                &thread.cwd,
                &thread.cli_version,
                &history_mode.as_str(),
                &record.dev_mode,
                &thread.forked_from_id,
                &record.archived,
                &pending.created_at_ms,
                &thread.ephemeral,
            ],
        )
        .await?;
    }

    // Every event row holds its body (no `item/projected` rows here); a
    // start folded into its completion has no row of its own (`born.rs`).
    let logged = pending.events.iter().filter(|event| !event.folded);
    let count = logged.clone().count();
    let (mut seqs, mut methods, mut item_ids, mut ats, mut payloads) = (
        Vec::with_capacity(count),
        Vec::with_capacity(count),
        Vec::with_capacity(count),
        Vec::with_capacity(count),
        Vec::with_capacity(count),
    );
    for event in logged {
        seqs.push(sql_int(event.seq));
        methods.push(event.method);
        item_ids.push(event.item_id.as_deref());
        ats.push(event.at_ms);
        payloads.push(event.payload_json()?.into_owned());
    }
    if count > 0 {
        q.exec(
            INSERT_EVENTS,
            &[&thread_id, &seqs, &methods, &item_ids, &ats, &payloads],
        )
        .await?;
    }

    // Turns before items: an item row refers to its turn's row.
    let dirty = &mut pending.dirty;
    dirty.turns.sort_unstable();
    dirty.turns.dedup();
    let turns = state.reducer.turns();
    let mut min_ordinal: Option<i64> = None;
    let mut touched_ids: Vec<String> = Vec::new();
    let mut touch = |ordinal: u64| {
        let ordinal = sql_int(ordinal);
        min_ordinal = Some(min_ordinal.map_or(ordinal, |min| min.min(ordinal)));
    };
    for &index in &dirty.turns {
        let turn = &turns[index];
        let (error, token_usage) = encode_turn_json(turn)?;
        q.exec(
            UPSERT_TURN,
            &[
                &thread_id,
                &turn.id,
                &sql_int(turn.ordinal),
                &sql_int(turn.seq),
                &turn.status.as_str(),
                &error,
                &turn.started_at,
                &turn.completed_at,
                &turn.duration_ms,
                &token_usage,
            ],
        )
        .await?;
        touch(turn.ordinal);
    }

    // Deletions before upserts: an item started after a clear, or started
    // again after its removal, must survive the deletion.
    if dirty.cleared {
        q.exec(DELETE_ITEMS, &[&thread_id]).await?;
        q.exec(ZERO_RANKS, &[&thread_id]).await?;
    }
    for removed in &dirty.removed {
        q.exec(DELETE_ITEM, &[&thread_id, &removed.item_id]).await?;
        if !touched_ids.contains(&removed.turn_id) {
            touched_ids.push(removed.turn_id.clone());
        }
    }

    dirty.items.sort_unstable();
    dirty.items.dedup();
    let items = state.reducer.items();
    let n = dirty.items.len();
    let mut columns = ItemColumns::with_capacity(n);
    for &index in &dirty.items {
        let record = &items[index];
        columns.item_ids.push(record.item.id());
        columns.turn_ids.push(&record.turn_id);
        columns.ordinals.push(sql_int(record.ordinal));
        columns.seqs.push(sql_int(record.seq));
        columns.kinds.push(record.item.kind().as_str());
        columns.statuses.push(record.envelope.status.as_str());
        let (item, envelope, input_item) = encode_item_json(record)?;
        columns.items.push(item);
        columns.envelopes.push(envelope);
        columns.token_counts.push(record.token_count.map(i64::from));
        columns.input_items.push(input_item);
        columns.llm.push(in_view(record));
        match state.reducer.turn(&record.turn_id) {
            Some(turn) => touch(turn.ordinal),
            None if !touched_ids.contains(&record.turn_id) => {
                touched_ids.push(record.turn_id.clone());
            }
            None => {}
        }
    }
    if n > 0 {
        let c = &columns;
        q.exec(
            UPSERT_ITEMS,
            &[
                &thread_id,
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
        .await?;
    }
    let from = match touched_ids.is_empty() {
        true => min_ordinal,
        false => q
            .opt_row(
                FIRST_TOUCHED,
                &[&thread_id, &touched_ids, &min_ordinal.unwrap_or(i64::MAX)],
            )
            .await?
            .map(|row| row.try_get::<_, Option<i64>>(0))
            .transpose()?
            .flatten(),
    };
    if let Some(from) = from.filter(|&from| from < i64::MAX) {
        q.exec(UPDATE_VIEW_RANKS, &[&thread_id, &from]).await?;
    }

    write_thread_row(q, thread_id, state).await
}

/// The item rows of a batch, column by column (unnested by the statement).
struct ItemColumns<'a> {
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

impl ItemColumns<'_> {
    fn with_capacity(n: usize) -> Self {
        ItemColumns {
            item_ids: Vec::with_capacity(n),
            turn_ids: Vec::with_capacity(n),
            ordinals: Vec::with_capacity(n),
            seqs: Vec::with_capacity(n),
            kinds: Vec::with_capacity(n),
            statuses: Vec::with_capacity(n),
            items: Vec::with_capacity(n),
            envelopes: Vec::with_capacity(n),
            token_counts: Vec::with_capacity(n),
            input_items: Vec::with_capacity(n),
            llm: Vec::with_capacity(n),
        }
    }
}

/// The thread row: its settings if an event changed them, and
/// `updated_at_ms` if it lags by [`UPDATED_AT_LAG_MS`] or more, or must be
/// flushed.
async fn write_thread_row(
    q: &CachedClient,
    thread_id: &str,
    state: &mut ThreadState,
) -> Result<(), StoreError> {
    let pending = &state.pending;
    if pending.name.is_some() || pending.preview.is_some() || pending.archived.is_some() {
        let (set_name, name) = match &pending.name {
            Some(name) => (true, name.as_deref()),
            None => (false, None),
        };
        q.exec(
            UPDATE_THREAD_SETTINGS,
            &[
                &thread_id,
                &set_name,
                &name,
                &pending.preview.as_deref(),
                &pending.archived,
            ],
        )
        .await?;
    }
    let lag = state
        .updated_at_ms
        .saturating_sub(state.stored_updated_at_ms);
    if state.updated_at_stale() && (lag >= UPDATED_AT_LAG_MS || state.flush_updated_at) {
        q.exec(UPDATE_UPDATED_AT, &[&thread_id, &state.updated_at_ms])
            .await?;
        state.stored_updated_at_ms = state.updated_at_ms;
    }
    state.flush_updated_at = false;
    Ok(())
}
