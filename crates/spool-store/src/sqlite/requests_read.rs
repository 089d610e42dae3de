//! Reads of pending requests and run states (tables of schema v3).

use rusqlite::{Connection, OptionalExtension};

pub(crate) use crate::codec::decode_pending_request;
use crate::error::StoreError;
use crate::types::{PendingRequest, StoredRunState};

/// Columns `codec::decode_pending_request` reads, in order.
const REQUEST_COLUMNS: &str = "request_id, thread_id, turn_id, item_id, request, \
    created_at_ms, answer, resolved_at_ms";

/// The thread's requests still waiting for an answer, oldest first.
pub(crate) fn open_requests(
    conn: &Connection,
    thread_id: &str,
) -> Result<Vec<PendingRequest>, StoreError> {
    select_requests(conn, thread_id, "AND resolved_at_ms IS NULL")
}

/// Every request of the thread, oldest first.
pub(crate) fn all_requests(
    conn: &Connection,
    thread_id: &str,
) -> Result<Vec<PendingRequest>, StoreError> {
    select_requests(conn, thread_id, "")
}

fn select_requests(
    conn: &Connection,
    thread_id: &str,
    filter: &str,
) -> Result<Vec<PendingRequest>, StoreError> {
    let sql = format!(
        "SELECT {REQUEST_COLUMNS} FROM pending_requests \
         WHERE thread_id = ?1 {filter} ORDER BY created_at_ms, request_id"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query((thread_id,))?;
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        found.push(decode_pending_request(row)?);
    }
    Ok(found)
}

/// One request of the thread, answered or not.
pub(crate) fn request(
    conn: &Connection,
    thread_id: &str,
    request_id: &str,
) -> Result<Option<PendingRequest>, StoreError> {
    let sql = format!(
        "SELECT {REQUEST_COLUMNS} FROM pending_requests WHERE request_id = ?1 AND thread_id = ?2"
    );
    conn.prepare_cached(&sql)?
        .query_row((request_id, thread_id), |row| {
            Ok(decode_pending_request(row))
        })
        .optional()?
        .transpose()
}

/// The thread's resumable run states, oldest turn first.
pub(crate) fn run_states(
    conn: &Connection,
    thread_id: &str,
) -> Result<Vec<StoredRunState>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT r.turn_id, r.state, r.updated_at_ms FROM run_states r \
         JOIN items t ON t.item_id = r.turn_id AND t.thread_id = r.thread_id AND t.is_turn = 1 \
         WHERE r.thread_id = ?1 ORDER BY t.ordinal",
    )?;
    let rows = stmt.query_map((thread_id,), |row| {
        Ok(StoredRunState {
            thread_id: thread_id.to_owned(),
            turn_id: row.get(0)?,
            state: row.get(1)?,
            updated_at_ms: row.get(2)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}
