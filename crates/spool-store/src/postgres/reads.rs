//! Reading threads, turns, items and the log, on any [`Query`] connection
//! (the pool's for the store's reads, the writer's own for its state).
//!
//! The writer leaves an in-progress item's row as of its last lifecycle
//! event, as SQLite's does: every read of items here brings those in
//! progress up to date from the log (`catch_up.rs`).

use spool_core::{ItemRecord, ThreadReducer, TurnRecord};
use spool_protocol::{ItemCompletedNotification, ThreadEvent};

use super::catch_up;
use super::codec::select_thread;
use super::query::Query;
use crate::codec::{Bodies, decode_log_row, decode_thread, decode_turn, sql_int};
use crate::error::{CorruptRow, StoreError};
use crate::thread_state::rows::Kind;
use crate::types::{ThreadListQuery, ThreadPage, ThreadRecord, ThreadSortKey};

/// A `SELECT` of the columns `crate::codec` decodes for `items`, `turns` or
/// `events`, then the rest; a macro, because statements are
/// `&'static str`s, which the statement cache is keyed by.
macro_rules! select {
    // The last column is `catch_up::LOG_END`: where the thread's log ends
    // in the statement's snapshot (every item statement has the thread as
    // `$1`).
    (items, $rest:literal) => {
        concat!(
            "SELECT seq, item_id, turn_id, ordinal, item, envelope, token_count, input_item, \
             (SELECT max(seq) FROM events WHERE events.thread_id = $1) ",
            $rest
        )
    };
    (turns, $rest:literal) => {
        concat!(
            "SELECT seq, turn_id, ordinal, status, error, started_at, completed_at, \
             duration_ms, token_usage ",
            $rest
        )
    };
    (events, $rest:literal) => {
        concat!("SELECT seq, at_ms, payload, method, item_id ", $rest)
    };
}

pub(super) async fn thread_exists(q: &impl Query, thread_id: &str) -> Result<bool, StoreError> {
    Ok(
        q.opt_row("SELECT 1 FROM threads WHERE id = $1", &[&thread_id])
            .await?
            .is_some(),
    )
}

pub(super) async fn read_thread(
    q: &impl Query,
    thread_id: &str,
) -> Result<Option<ThreadRecord>, StoreError> {
    const SQL: &str = concat!(select_thread!(), " WHERE id = $1");
    match q.opt_row(SQL, &[&thread_id]).await? {
        Some(row) => decode_thread(&row).map(Some),
        None => Ok(None),
    }
}

/// One page of threads, newest first by the sort key, ties broken by id;
/// the cursor is the previous page's last thread (as in SQLite).
pub(super) async fn list_threads(
    q: &impl Query,
    query: &ThreadListQuery,
) -> Result<ThreadPage, StoreError> {
    if let Some(cursor) = &query.cursor
        && !thread_exists(q, cursor).await?
    {
        return Err(StoreError::BadCursor(cursor.clone()));
    }
    let sql = match query.sort_key {
        ThreadSortKey::CreatedAt => concat!(
            select_thread!(),
            " WHERE archived = $1 AND NOT ephemeral \
             AND ($2::text IS NULL OR (created_at_ms, id) < \
             (SELECT created_at_ms, id FROM threads WHERE id = $2)) \
             AND ($4::text IS NULL OR strpos(lower(coalesce(name, preview)), lower($4)) > 0) \
             ORDER BY created_at_ms DESC, id DESC LIMIT $3"
        ),
        ThreadSortKey::UpdatedAt => concat!(
            select_thread!(),
            " WHERE archived = $1 AND NOT ephemeral \
             AND ($2::text IS NULL OR (updated_at_ms, id) < \
             (SELECT updated_at_ms, id FROM threads WHERE id = $2)) \
             AND ($4::text IS NULL OR strpos(lower(coalesce(name, preview)), lower($4)) > 0) \
             ORDER BY updated_at_ms DESC, id DESC LIMIT $3"
        ),
    };
    // One more than asked tells whether another page follows.
    let fetch = sql_int(query.limit as u64).saturating_add(1);
    let rows = q
        .rows(
            sql,
            &[&query.archived, &query.cursor, &fetch, &query.search],
        )
        .await?;
    let more = rows.len() > query.limit;
    let threads = rows
        .iter()
        .take(query.limit)
        .map(decode_thread)
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = match threads.last() {
        Some(last) if more => Some(last.thread.id.clone()),
        Some(_) | None => None,
    };
    Ok(ThreadPage {
        threads,
        next_cursor,
    })
}

/// The thread's turns in ordinal order; only those in progress if
/// `open_only`.
pub(super) async fn read_turns(
    q: &impl Query,
    thread_id: &str,
    open_only: bool,
) -> Result<Vec<TurnRecord>, StoreError> {
    let sql = if open_only {
        select!(
            turns,
            "FROM turns WHERE thread_id = $1 AND status = 'inProgress' ORDER BY ordinal"
        )
    } else {
        select!(turns, "FROM turns WHERE thread_id = $1 ORDER BY ordinal")
    };
    q.rows(sql, &[&thread_id])
        .await?
        .iter()
        .map(|row| decode_turn(row, thread_id, "turns"))
        .collect()
}

/// The thread's items in ordinal order; only those in progress if
/// `open_only`.
pub(super) async fn read_items(
    q: &impl Query,
    thread_id: &str,
    open_only: bool,
) -> Result<Vec<ItemRecord>, StoreError> {
    let sql = if open_only {
        select!(
            items,
            "FROM items WHERE thread_id = $1 AND status = 'inProgress' ORDER BY ordinal"
        )
    } else {
        select!(items, "FROM items WHERE thread_id = $1 ORDER BY ordinal")
    };
    let rows = q.rows(sql, &[&thread_id]).await?;
    catch_up::decoded_items(q, thread_id, &rows).await
}

/// At most `limit` of the thread's items with ordinal > `after_ordinal`,
/// in ordinal order.
pub(super) async fn read_items_after(
    q: &impl Query,
    thread_id: &str,
    after_ordinal: u64,
    limit: usize,
) -> Result<Vec<ItemRecord>, StoreError> {
    const SQL: &str = select!(
        items,
        "FROM items WHERE thread_id = $1 AND ordinal > $2 ORDER BY ordinal LIMIT $3"
    );
    let rows = q
        .rows(
            SQL,
            &[&thread_id, &sql_int(after_ordinal), &sql_int(limit as u64)],
        )
        .await?;
    catch_up::decoded_items(q, thread_id, &rows).await
}

pub(super) async fn read_item(
    q: &impl Query,
    thread_id: &str,
    item_id: &str,
) -> Result<Option<ItemRecord>, StoreError> {
    const SQL: &str = select!(items, "FROM items WHERE thread_id = $1 AND item_id = $2");
    let row = q.opt_row(SQL, &[&thread_id, &item_id]).await?;
    let items = catch_up::decoded_items(q, thread_id, row.as_slice()).await?;
    Ok(items.into_iter().next())
}

/// The stored status of an item or turn.
pub(super) async fn status(
    q: &impl Query,
    thread_id: &str,
    kind: Kind,
    id: &str,
) -> Result<Option<String>, StoreError> {
    let sql = match kind {
        Kind::Item => "SELECT status FROM items WHERE thread_id = $1 AND item_id = $2",
        Kind::Turn => "SELECT status FROM turns WHERE thread_id = $1 AND turn_id = $2",
    };
    Ok(q.opt_row(sql, &[&thread_id, &id])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

/// The greatest id of `kind` in the thread's rows (ids collate as bytes,
/// see `schema.rs`).
pub(super) async fn max_id(
    q: &impl Query,
    thread_id: &str,
    kind: Kind,
) -> Result<Option<String>, StoreError> {
    let sql = match kind {
        Kind::Item => "SELECT max(item_id) FROM items WHERE thread_id = $1",
        Kind::Turn => "SELECT max(turn_id) FROM turns WHERE thread_id = $1",
    };
    Ok(q.opt_row(sql, &[&thread_id])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?
        .flatten())
}

/// At most `limit` committed events with seq > `after_seq`, in seq order.
pub(super) async fn read_events_after(
    q: &impl Query,
    thread_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<Vec<ThreadEvent>, StoreError> {
    const SQL: &str = select!(
        events,
        "FROM events WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
    );
    // A row may stand for two events (`born.rs`): `limit` rows are at
    // least `limit` events; the rest is the next page's.
    let rows = q
        .rows(
            SQL,
            &[&thread_id, &sql_int(after_seq), &sql_int(limit as u64)],
        )
        .await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        if events.len() >= limit {
            break;
        }
        decode_log_row(row, thread_id, after_seq, &mut events, &NoBodies(thread_id))?;
    }
    events.truncate(limit);
    Ok(events)
}

/// [`read_events_after`] of each `(thread, after_seq)`, in one statement.
pub(super) async fn read_events_after_each(
    q: &impl Query,
    tails: &[(String, u64)],
    limit: usize,
) -> Result<Vec<Vec<ThreadEvent>>, StoreError> {
    // The thread's index comes last: the first five columns are what
    // `decode_log_row` reads.
    const SQL: &str = "SELECT e.seq, e.at_ms, e.payload, e.method, e.item_id, x.n \
         FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS x(thread_id, after_seq, n) \
         CROSS JOIN LATERAL (SELECT seq, at_ms, payload, method, item_id FROM events \
         WHERE events.thread_id = x.thread_id AND events.seq > x.after_seq \
         ORDER BY seq LIMIT $3) AS e ORDER BY x.n, e.seq";
    let ids: Vec<&str> = tails.iter().map(|(id, _)| id.as_str()).collect();
    let afters: Vec<i64> = tails.iter().map(|&(_, after)| sql_int(after)).collect();
    let rows = q
        .rows(SQL, &[&ids, &afters, &sql_int(limit as u64)])
        .await?;
    let mut all: Vec<Vec<ThreadEvent>> = vec![Vec::new(); tails.len()];
    for row in &rows {
        let n: i64 = row.try_get(5)?;
        let index = usize::try_from(n - 1).unwrap_or(usize::MAX);
        let (Some((thread_id, after_seq)), Some(events)) = (tails.get(index), all.get_mut(index))
        else {
            continue;
        };
        if events.len() >= limit {
            continue;
        }
        decode_log_row(row, thread_id, *after_seq, events, &NoBodies(thread_id))?;
    }
    for events in &mut all {
        events.truncate(limit);
    }
    Ok(all)
}

/// This backend's writer always stores an event's body in its row: a row
/// that leaves it to a projection row (`born.rs`) is corrupt.
struct NoBodies<'a>(&'a str);

impl NoBodies<'_> {
    fn corrupt(&self, seq: Option<u64>, item_id: Option<&str>, what: &str) -> StoreError {
        StoreError::CorruptRow(Box::new(CorruptRow {
            table: "events",
            thread_id: self.0.to_owned(),
            seq,
            item_id: item_id.map(str::to_owned),
            column: "method",
            cause: format!("{what}, which this backend never writes").into(),
        }))
    }
}

impl Bodies for NoBodies<'_> {
    fn item_completion(
        &self,
        seq: u64,
        item_id: Option<&str>,
    ) -> Result<ItemCompletedNotification, StoreError> {
        Err(self.corrupt(Some(seq), item_id, "an item/projected row"))
    }

    fn turn(&self, ordinal: u64) -> Result<Option<TurnRecord>, StoreError> {
        let what = format!("a row leaving its body to the turn at ordinal {ordinal}");
        Err(self.corrupt(None, None, &what))
    }
}

/// A reducer holding the thread's whole projection, read from one
/// snapshot (`q` is a repeatable-read transaction for the store's reads).
pub(super) async fn read_reducer(
    q: &impl Query,
    thread_id: &str,
) -> Result<ThreadReducer, StoreError> {
    let thread = read_thread(q, thread_id)
        .await?
        .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
    let items = read_items(q, thread_id, false).await?;
    let turns = read_turns(q, thread_id, false).await?;
    Ok(ThreadReducer::from_parts(
        thread_id,
        thread.last_seq,
        items,
        turns,
    ))
}

/// The thread's records in the model's view after `after_ordinal`, in
/// ordinal order.
pub(super) async fn read_after_ordinal(
    q: &impl Query,
    thread_id: &str,
    after_ordinal: u64,
) -> Result<Vec<ItemRecord>, StoreError> {
    const SQL: &str = select!(
        items,
        "FROM items WHERE thread_id = $1 AND llm AND ordinal > $2 ORDER BY ordinal"
    );
    let rows = q.rows(SQL, &[&thread_id, &sql_int(after_ordinal)]).await?;
    catch_up::decoded_items(q, thread_id, &rows).await
}

/// One item, if it is stored and in the model's view.
pub(super) async fn read_item_in_view(
    q: &impl Query,
    thread_id: &str,
    item_id: &str,
) -> Result<Option<ItemRecord>, StoreError> {
    const SQL: &str = select!(
        items,
        "FROM items WHERE thread_id = $1 AND item_id = $2 AND llm"
    );
    let row = q.opt_row(SQL, &[&thread_id, &item_id]).await?;
    let items = catch_up::decoded_items(q, thread_id, row.as_slice()).await?;
    Ok(items.into_iter().next())
}
