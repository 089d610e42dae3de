//! Reads for server-managed histories: the records a request is prepared
//! from, and what the provider holds (`history_cursors`).

use crate::sqlite::keys;
use rusqlite::Connection;
use spool_core::ItemRecord;
use spool_protocol::ItemStatus;

use super::catch_up::catch_up;
use super::codec::{decode_item, item_columns, sql_int};
use super::reads::thread_exists;
use crate::codec::decode_history;
use crate::error::StoreError;
use crate::types::StoredHistory;

const AFTER: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE pos > ",
    keys::thread_lo!(),
    " + ?2 AND pos < ",
    keys::thread_hi!(),
    " AND is_turn = 0 AND llm = 1 ORDER BY pos"
);
const BY_ID: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 0 AND llm = 1"
);
const CURSOR: &str = "SELECT cursor, conversation_id FROM history_cursors WHERE thread_id = ?1";

/// The thread's records in the model's view after `after_ordinal`, and
/// those among `item_ids` at or before it, in ordinal order. Cost: the
/// records returned, whatever the thread's length.
pub(crate) fn read_records_after(
    conn: &Connection,
    thread_id: &str,
    after_ordinal: u64,
    item_ids: &[String],
) -> Result<Vec<ItemRecord>, StoreError> {
    if item_ids.is_empty() {
        // The common read (a runner step's few new records, all finished)
        // is one query, atomic on its own: no transaction to open and
        // close around it.
        let records = read_after(conn, thread_id, after_ordinal)?;
        if records
            .iter()
            .all(|record| record.envelope.status != ItemStatus::InProgress)
        {
            if records.is_empty() && !thread_exists(conn, thread_id)? {
                return Err(StoreError::UnknownThread(thread_id.to_owned()));
            }
            return Ok(records);
        }
    }
    // Several reads (items by id, deltas to catch up with): one snapshot.
    let tx = conn.unchecked_transaction()?;
    let mut records = Vec::new();
    {
        let mut by_id = tx.prepare_cached(BY_ID)?;
        for item_id in item_ids {
            let mut rows = by_id.query((thread_id, item_id))?;
            if let Some(row) = rows.next()? {
                let record = decode_item(row, thread_id)?;
                if record.ordinal <= after_ordinal {
                    records.push(record);
                }
            }
        }
        records.extend(read_after(&tx, thread_id, after_ordinal)?);
    }
    if records.is_empty() && !thread_exists(&tx, thread_id)? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    records.sort_by_key(|record| record.ordinal);
    records.dedup_by_key(|record| record.ordinal);
    for record in &mut records {
        catch_up(&tx, record)?;
    }
    tx.finish()?;
    Ok(records)
}

/// The records in the view after `after_ordinal`, in ordinal order, as
/// their rows stand.
fn read_after(
    conn: &Connection,
    thread_id: &str,
    after_ordinal: u64,
) -> Result<Vec<ItemRecord>, StoreError> {
    let mut after = conn.prepare_cached(AFTER)?;
    let mut rows = after.query((thread_id, sql_int(after_ordinal)))?;
    let mut records = Vec::new();
    while let Some(row) = rows.next()? {
        records.push(decode_item(row, thread_id)?);
    }
    Ok(records)
}

/// The thread's history cursor, if a provider holds its history.
pub(crate) fn read_cursor(
    conn: &Connection,
    thread_id: &str,
) -> Result<Option<StoredHistory>, StoreError> {
    let mut stmt = conn.prepare_cached(CURSOR)?;
    let mut rows = stmt.query((thread_id,))?;
    match rows.next()? {
        Some(row) => decode_history(row, thread_id).map(Some),
        None => Ok(None),
    }
}
