//! Reads of pending requests and run states (tables of schema v3).

use rusqlite::{Connection, OptionalExtension, Row};

use crate::error::{CorruptRow, DecodeCause, StoreError};
use crate::types::{PendingRequest, StoredRunState};

/// Columns [`decode_pending_request`] reads, in order.
const REQUEST_COLUMNS: &str = "request_id, thread_id, turn_id, item_id, request, \
    created_at_ms, answer, resolved_at_ms";

/// A `pending_requests` row (columns as in [`REQUEST_COLUMNS`]).
pub(crate) fn decode_pending_request(row: &Row<'_>) -> Result<PendingRequest, StoreError> {
    let thread_id: String = row.get(1)?;
    let request_id: String = row.get(0)?;
    let corrupt = |column: &'static str, cause: DecodeCause| {
        StoreError::CorruptRow(Box::new(CorruptRow {
            table: "pending_requests",
            thread_id: thread_id.clone(),
            seq: None,
            item_id: Some(request_id.clone()),
            column,
            cause,
        }))
    };
    let request_json: String = row.get(4)?;
    let mut request: spool_protocol::ServerRequest =
        serde_json::from_str(&request_json).map_err(|e| corrupt("request", Box::new(e)))?;
    let created_at_ms: i64 = row.get(5)?;
    // Rows written before approvals carried their start time.
    request.stamp_started_at(created_at_ms);
    let answer = match row.get::<_, Option<String>>(6)? {
        Some(json) => {
            Some(serde_json::from_str(&json).map_err(|e| corrupt("answer", Box::new(e)))?)
        }
        None => None,
    };
    Ok(PendingRequest {
        request_id: request_id.clone(),
        thread_id: thread_id.clone(),
        turn_id: row.get(2)?,
        item_id: row.get(3)?,
        request,
        created_at_ms,
        answer,
        resolved_at_ms: row.get(7)?,
    })
}

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
         JOIN turns t ON t.thread_id = r.thread_id AND t.turn_id = r.turn_id \
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
