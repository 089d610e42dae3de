//! Bringing an in-progress item row up to date from the log.
//!
//! The writer does not rewrite an in-progress item's row for its deltas:
//! a long streamed message would otherwise be written whole at every group
//! commit, which is quadratic in its length. The row keeps the item as of
//! its last lifecycle event (`seq` says which), and readers apply the
//! committed deltas after that seq with the reducer's own delta function,
//! so what they see is exactly what reducing the log gives.

use crate::sqlite::keys;
use rusqlite::Connection;
use spool_core::ItemRecord;
use spool_core::reducer::apply_delta;
use spool_protocol::ItemStatus;

use super::codec::{decode_event, event_columns, sql_int};
use crate::error::{CorruptRow, DecodeCause, StoreError};

const DELTAS_AFTER: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM events WHERE pos > ",
    keys::thread_lo!(),
    " + ?2 AND pos < ",
    keys::thread_hi!(),
    " AND item_id = ?3 ORDER BY pos"
);

/// Applies the committed deltas newer than the row to an in-progress item.
/// Terminal items are returned as they are: their row is always current.
pub(crate) fn catch_up(conn: &Connection, record: &mut ItemRecord) -> Result<(), StoreError> {
    if record.envelope.status != ItemStatus::InProgress {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(DELTAS_AFTER)?;
    let mut rows = stmt.query((&record.thread_id, sql_int(record.seq), record.item.id()))?;
    while let Some(row) = rows.next()? {
        let event = decode_event(row, &record.thread_id)?;
        if !event.payload.is_delta() {
            // Any other event about the item rewrites its row; one newer
            // than the row means the row was not written with it.
            return Err(StoreError::CorruptRow(Box::new(CorruptRow {
                table: "items",
                thread_id: record.thread_id.clone(),
                seq: Some(record.seq),
                item_id: Some(record.item.id().to_owned()),
                column: "seq",
                cause: format!(
                    "the log has {} at seq {} after the row's seq",
                    event.payload.method(),
                    event.seq
                )
                .into(),
            })));
        }
        apply_delta(&mut record.item, &event.payload).map_err(|e| {
            let cause: DecodeCause = Box::new(e);
            StoreError::CorruptRow(Box::new(CorruptRow {
                table: "events",
                thread_id: record.thread_id.clone(),
                seq: Some(event.seq),
                item_id: Some(record.item.id().to_owned()),
                column: "payload",
                cause,
            }))
        })?;
        record.seq = event.seq;
        record.token_count = None;
    }
    Ok(())
}
