//! Bringing in-progress item rows up to date from the log, as SQLite's
//! readers do (`sqlite/catch_up.rs`): the writer leaves an in-progress
//! item's row as of its last lifecycle event
//! (`thread_state::pending::keeps_row`), and a reader applies the deltas
//! committed after the row's seq with the reducer's own delta function.
//!
//! On SQLite the rows and the deltas are read in one snapshot (one
//! transaction). Here the item reads run in autocommit, each statement in
//! a snapshot of its own, so every item `SELECT` also returns where the
//! thread's log ended in its snapshot ([`LOG_END`], the last column of
//! `select!(items, …)`), and only the deltas up to there are applied: an
//! item completed after its row was read is seen as it was then, never
//! as a row that missed its own completion.

use spool_core::ItemRecord;
use spool_core::reducer::apply_delta;
use spool_protocol::ItemStatus;
use tokio_postgres::Row;

use super::query::Query;
use crate::codec::{decode_event, decode_item, sql_int};
use crate::error::{CorruptRow, DecodeCause, StoreError};

/// The column of an item `SELECT` holding the thread's last committed seq
/// in the statement's snapshot (`select!(items, …)`).
const LOG_END: usize = 8;

/// The committed events about some items of a thread, after a seq and up
/// to another.
const EVENTS_OF_ITEMS: &str = "SELECT seq, at_ms, payload, method, item_id FROM events \
     WHERE thread_id = $1 AND item_id = ANY($2::text[]) AND seq > $3 AND seq <= $4 \
     ORDER BY seq";

/// Decodes rows of `select!(items, …)` and brings the items in progress up
/// to date.
pub(super) async fn decoded_items(
    q: &impl Query,
    thread_id: &str,
    rows: &[Row],
) -> Result<Vec<ItemRecord>, StoreError> {
    let mut items = rows
        .iter()
        .map(|row| decode_item(row, thread_id))
        .collect::<Result<Vec<_>, _>>()?;
    if !rows.is_empty() {
        catch_up(q, thread_id, &mut items, log_end(rows)?).await?;
    }
    Ok(items)
}

/// Where the thread's log ended in the snapshot of the item `SELECT` that
/// gave `rows` ([`LOG_END`]; 0 with no rows).
pub(super) fn log_end(rows: &[Row]) -> Result<i64, StoreError> {
    Ok(match rows.first() {
        Some(row) => row.try_get::<_, Option<i64>>(LOG_END)?.unwrap_or(0),
        None => 0,
    })
}

/// Applies to each in-progress item the deltas committed after its row's
/// seq, up to `log_end`. Terminal items are left as they are: their row is
/// always current.
pub(super) async fn catch_up(
    q: &impl Query,
    thread_id: &str,
    items: &mut [ItemRecord],
    log_end: i64,
) -> Result<(), StoreError> {
    let open: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].envelope.status == ItemStatus::InProgress)
        .collect();
    let Some(from) = open.iter().map(|&i| items[i].seq).min() else {
        return Ok(());
    };
    let ids: Vec<&str> = open.iter().map(|&i| items[i].item.id()).collect();
    let rows = q
        .rows(
            EVENTS_OF_ITEMS,
            &[&thread_id, &ids, &sql_int(from), &log_end],
        )
        .await?;
    drop(ids);
    for row in &rows {
        let event = decode_event(row, thread_id)?;
        let item_id: Option<&str> = row.try_get(4)?;
        let Some(record) = open
            .iter()
            .copied()
            .find(|&i| Some(items[i].item.id()) == item_id)
            .map(|i| &mut items[i])
        else {
            continue;
        };
        if event.seq <= record.seq {
            continue;
        }
        if !event.payload.is_delta() {
            // Any other event about the item rewrites its row in the same
            // commit; one newer than the row, in the row's snapshot, means
            // the row was not written with it.
            return Err(StoreError::CorruptRow(Box::new(CorruptRow {
                table: "items",
                thread_id: thread_id.to_owned(),
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
                thread_id: thread_id.to_owned(),
                seq: Some(event.seq),
                item_id: Some(record.item.id().to_owned()),
                column: "payload",
                cause,
            }))
        })?;
        // As reducing the log gives it: the item as of this delta, its
        // token count not yet counted.
        record.seq = event.seq;
        record.token_count = None;
    }
    Ok(())
}
