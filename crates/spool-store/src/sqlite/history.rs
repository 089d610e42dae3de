//! Reads for server-managed histories: the records a request is prepared
//! from, and what the provider holds (`history_cursors`).

use rusqlite::{Connection, OptionalExtension};
use spool_core::ItemRecord;

use super::catch_up::catch_up;
use super::codec::{decode_item, item_columns, sql_int};
use super::reads::thread_exists;
use crate::error::{CorruptRow, DecodeCause, StoreError};
use crate::types::StoredHistory;

const AFTER: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE thread_id = ?1 AND llm = 1 AND ordinal > ?2 ORDER BY ordinal"
);
const BY_ID: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE thread_id = ?1 AND item_id = ?2 AND llm = 1"
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
    let tx = conn.unchecked_transaction()?;
    if !thread_exists(&tx, thread_id)? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
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
        let mut after = tx.prepare_cached(AFTER)?;
        let mut rows = after.query((thread_id, sql_int(after_ordinal)))?;
        while let Some(row) = rows.next()? {
            records.push(decode_item(row, thread_id)?);
        }
    }
    records.sort_by_key(|record| record.ordinal);
    records.dedup_by_key(|record| record.ordinal);
    for record in &mut records {
        catch_up(&tx, record)?;
    }
    tx.finish()?;
    Ok(records)
}

/// The thread's history cursor, if a provider holds its history.
pub(crate) fn read_cursor(
    conn: &Connection,
    thread_id: &str,
) -> Result<Option<StoredHistory>, StoreError> {
    let row: Option<(String, Option<String>)> = conn
        .prepare_cached(CURSOR)?
        .query_row((thread_id,), |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let Some((cursor, conversation_id)) = row else {
        return Ok(None);
    };
    let cursor = serde_json::from_str(&cursor).map_err(|e| {
        let cause: DecodeCause = Box::new(e);
        StoreError::CorruptRow(Box::new(CorruptRow {
            table: "history_cursors",
            thread_id: thread_id.to_owned(),
            seq: None,
            item_id: None,
            column: "cursor",
            cause,
        }))
    })?;
    Ok(Some(StoredHistory {
        cursor,
        conversation_id,
    }))
}
