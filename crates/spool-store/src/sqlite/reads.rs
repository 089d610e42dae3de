//! Queries on the projections and the log, and the pool of reader
//! connections they run on.
//!
//! The query functions take any connection: readers use them from the pool,
//! and the writer uses the same ones to load a thread's open items and turns
//! (it sees exactly the committed state, because it only opens a
//! transaction to commit a batch).

use crate::sqlite::keys;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use rusqlite::Connection;
use spool_core::{ItemRecord, ThreadReducer, TurnRecord};
use spool_protocol::ThreadEvent;

use super::catch_up::catch_up;
use super::codec::{
    decode_item, decode_log_row, decode_thread, decode_turn, event_columns, item_columns, sql_int,
    thread_columns, turn_columns,
};
use super::schema::open_reader;
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::types::{ThreadListQuery, ThreadPage, ThreadRecord, ThreadSortKey};

/// Reader connections, opened on demand and kept for reuse. Each keeps its
/// own prepared-statement cache, so a reused connection skips parsing.
pub(crate) struct ReaderPool {
    path: PathBuf,
    options: StoreOptions,
    idle: Mutex<Vec<Connection>>,
}

impl ReaderPool {
    pub(crate) fn new(path: PathBuf, options: StoreOptions) -> Self {
        ReaderPool {
            path,
            options,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `read` on an idle connection (or a new one). Blocking: call it
    /// from `spawn_blocking`.
    pub(crate) fn with<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_reader(&self.path, &self.options)?,
        };
        let result = read(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.options.max_idle_readers {
            idle.push(conn);
        }
        result
    }
}

pub(crate) fn thread_exists(conn: &Connection, thread_id: &str) -> Result<bool, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM threads WHERE id = ?1")?;
    Ok(stmt.exists((thread_id,))?)
}

pub(crate) fn read_thread(
    conn: &Connection,
    thread_id: &str,
) -> Result<Option<ThreadRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        thread_columns!(),
        " FROM threads WHERE id = ?1"
    ))?;
    let mut rows = stmt.query((thread_id,))?;
    match rows.next()? {
        Some(row) => decode_thread(row).map(Some),
        None => Ok(None),
    }
}

/// One page of threads, newest first by the query's sort key, ties broken
/// by id (UUIDv7 ids sort by creation time).
///
/// The cursor is the id of the previous page's last thread; the page starts
/// after that thread's (key, id) as it is now, so a cursor stays valid
/// whatever the sort key.
pub(crate) fn list_threads(
    conn: &Connection,
    query: &ThreadListQuery,
) -> Result<ThreadPage, StoreError> {
    if let Some(cursor) = &query.cursor
        && !thread_exists(conn, cursor)?
    {
        return Err(StoreError::BadCursor(cursor.clone()));
    }
    let sql = match query.sort_key {
        ThreadSortKey::CreatedAt => concat!(
            "SELECT ",
            thread_columns!(),
            " FROM threads WHERE archived = ?1 AND ephemeral = 0 \
             AND (?2 IS NULL OR (created_at_ms, id) < \
             (SELECT created_at_ms, id FROM threads WHERE id = ?2)) \
             AND (?4 IS NULL OR instr(lower(coalesce(name, preview)), lower(?4)) > 0) \
             ORDER BY created_at_ms DESC, id DESC LIMIT ?3"
        ),
        ThreadSortKey::UpdatedAt => concat!(
            "SELECT ",
            thread_columns!(),
            " FROM threads WHERE archived = ?1 AND ephemeral = 0 \
             AND (?2 IS NULL OR (updated_at_ms, id) < \
             (SELECT updated_at_ms, id FROM threads WHERE id = ?2)) \
             AND (?4 IS NULL OR instr(lower(coalesce(name, preview)), lower(?4)) > 0) \
             ORDER BY updated_at_ms DESC, id DESC LIMIT ?3"
        ),
    };
    // One more than asked tells whether another page follows.
    let fetch = sql_int(query.limit as u64).saturating_add(1);
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query((
        query.archived,
        query.cursor.as_deref(),
        fetch,
        query.search.as_deref(),
    ))?;
    let mut threads = Vec::new();
    let mut more = false;
    while let Some(row) = rows.next()? {
        if threads.len() == query.limit {
            more = true;
            break;
        }
        threads.push(decode_thread(row)?);
    }
    let next_cursor = match threads.last() {
        Some(last) if more => Some(last.thread.id.clone()),
        Some(_) | None => None,
    };
    Ok(ThreadPage {
        threads,
        next_cursor,
    })
}

/// The turns of a thread in the order they started; only those in
/// progress if `open_only`.
pub(crate) fn read_turns(
    conn: &Connection,
    thread_id: &str,
    open_only: bool,
) -> Result<Vec<TurnRecord>, StoreError> {
    // A thread's turns are rows of `items` among its items (`keys.rs`).
    let sql = if open_only {
        concat!(
            "SELECT ",
            turn_columns!(),
            " FROM items WHERE thread_id = ?1 AND is_turn = 1 AND status = 'inProgress' \
             ORDER BY pos"
        )
    } else {
        concat!(
            "SELECT ",
            turn_columns!(),
            " FROM items WHERE ",
            keys::of_thread!(),
            " AND is_turn = 1 ORDER BY pos"
        )
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query((thread_id,))?;
    let mut turns = Vec::new();
    while let Some(row) = rows.next()? {
        turns.push(decode_turn(row, thread_id, "items")?);
    }
    Ok(turns)
}

/// The items of a thread in the order they started; only those in progress
/// if `open_only`.
pub(crate) fn read_items(
    conn: &Connection,
    thread_id: &str,
    open_only: bool,
) -> Result<Vec<ItemRecord>, StoreError> {
    let sql = if open_only {
        concat!(
            "SELECT ",
            item_columns!(),
            " FROM items WHERE thread_id = ?1 AND is_turn = 0 AND status = 'inProgress' \
             ORDER BY pos"
        )
    } else {
        concat!(
            "SELECT ",
            item_columns!(),
            " FROM items WHERE ",
            keys::of_thread!(),
            " AND is_turn = 0 ORDER BY pos"
        )
    };
    read_caught_up(conn, sql, thread_id, (thread_id,))
}

/// At most `limit` items of a thread with ordinal > `after_ordinal`, in
/// ordinal order, caught up as [`read_items`] does.
pub(crate) fn read_items_after(
    conn: &Connection,
    thread_id: &str,
    after_ordinal: u64,
    limit: usize,
) -> Result<Vec<ItemRecord>, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        item_columns!(),
        " FROM items WHERE pos > ",
        keys::thread_lo!(),
        " + ?2 AND pos < ",
        keys::thread_hi!(),
        " AND is_turn = 0 ORDER BY pos LIMIT ?3"
    );
    let params = (thread_id, sql_int(after_ordinal), sql_int(limit as u64));
    read_caught_up(conn, SQL, thread_id, params)
}

/// The item rows `sql` selects, each brought up to date with the deltas
/// committed after it.
fn read_caught_up(
    conn: &Connection,
    sql: &str,
    thread_id: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<ItemRecord>, StoreError> {
    // The rows and the deltas committed after them are read in one
    // snapshot (the caller's transaction, or one of our own): read in two,
    // an item completed in between would look like a row that missed its
    // own completion.
    let own = match conn.is_autocommit() {
        true => Some(conn.unchecked_transaction()?),
        false => None,
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut items = Vec::new();
    while let Some(row) = rows.next()? {
        items.push(decode_item(row, thread_id)?);
    }
    drop(rows);
    for record in &mut items {
        catch_up(conn, record)?;
    }
    drop(own);
    Ok(items)
}

/// At most `limit` committed events with seq > `after_seq`, in seq order.
pub(crate) fn read_events_after(
    conn: &Connection,
    thread_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        event_columns!(),
        " FROM events WHERE pos > ",
        keys::thread_lo!(),
        " + ?2 AND pos < ",
        keys::thread_hi!(),
        " ORDER BY pos LIMIT ?3"
    ))?;
    // A row may stand for two events (`born.rs`): `limit` rows are at
    // least `limit` events, and what is past the limit is left for the
    // next page (a page may end between the two).
    let mut rows = stmt.query((thread_id, sql_int(after_seq), sql_int(limit as u64)))?;
    let mut events = Vec::with_capacity(limit.min(1024));
    while events.len() < limit
        && let Some(row) = rows.next()?
    {
        decode_log_row(conn, row, thread_id, after_seq, &mut events)?;
    }
    events.truncate(limit);
    Ok(events)
}

/// A reducer holding the whole projection of a thread.
pub(crate) fn read_reducer(
    conn: &Connection,
    thread_id: &str,
) -> Result<ThreadReducer, StoreError> {
    // One read transaction, so the items, turns and last seq are of the
    // same commit.
    let tx = conn.unchecked_transaction()?;
    let thread = read_thread(&tx, thread_id)?
        .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
    let items = read_items(&tx, thread_id, false)?;
    let turns = read_turns(&tx, thread_id, false)?;
    tx.finish()?;
    Ok(ThreadReducer::from_parts(
        thread_id,
        thread.last_seq,
        items,
        turns,
    ))
}
