//! SQLite's reads of a thread's model view (the algorithm is
//! `crate::view_read`'s), all in one read transaction: one committed state.

use crate::sqlite::keys;
use rusqlite::{Connection, OptionalExtension, Rows};
use spool_core::ItemRecord;
use spool_core::llm::{LlmView, LlmViewOptions, is_cut_point};

use super::catch_up::catch_up;
use super::codec::{decode_item, item_columns, sql_int};
use super::reads::thread_exists;
use crate::error::StoreError;
use crate::view_read::{TokenCount, ViewRead};

const PAGE: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE pos >= ",
    keys::thread_lo!(),
    " AND pos < ",
    keys::thread_lo!(),
    " + min(?2, ",
    keys::seq_span!(),
    ") AND is_turn = 0 AND llm = 1 ORDER BY pos DESC LIMIT ?3"
);
const COMPACTIONS_BEFORE: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE thread_id = ?1 AND kind = 'contextCompaction' AND llm = 1 \
     AND ordinal < ?2 ORDER BY ordinal DESC"
);
const VIEW_RANK: &str =
    "SELECT view_rank FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 1";

/// The view, and the token counts it computed, to cache.
pub(crate) fn read_llm_view(
    conn: &Connection,
    thread_id: &str,
    options: LlmViewOptions,
) -> Result<(LlmView, Vec<TokenCount>), StoreError> {
    let tx = conn.unchecked_transaction()?;
    if !thread_exists(&tx, thread_id)? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    let mut read = ViewRead::new(options);
    while let Some((before, limit)) = read.next_page() {
        // Rows are decoded as the read pulls them: those past where it
        // stops are stepped over by no one.
        let mut stmt = tx.prepare_cached(PAGE)?;
        let mut rows = stmt.query((thread_id, sql_int(before), sql_int(limit as u64)))?;
        read.take_page(std::iter::from_fn(|| {
            next_record(&tx, thread_id, &mut rows).transpose()
        }))?;
    }
    let ranks = match read.left_out() {
        Some((turn_id, oldest)) => {
            let cut_rank = match latest_cut_before(&tx, thread_id, oldest)? {
                Some(cut_turn) => Some(rank(&tx, thread_id, &cut_turn)?),
                None => None,
            };
            Some((rank(&tx, thread_id, turn_id)?, cut_rank))
        }
        None => None,
    };
    tx.finish()?;
    Ok(read.finish(ranks))
}

/// A turn's view rank (0 if it has none).
fn rank(conn: &Connection, thread_id: &str, turn_id: &str) -> Result<i64, StoreError> {
    let rank: Option<i64> = conn
        .prepare_cached(VIEW_RANK)?
        .query_row((thread_id, turn_id), |row| row.get(0))
        .optional()?;
    Ok(rank.unwrap_or(0))
}

/// The page's next record, brought up to date if still in progress.
fn next_record(
    conn: &Connection,
    thread_id: &str,
    rows: &mut Rows<'_>,
) -> Result<Option<ItemRecord>, StoreError> {
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let mut record = decode_item(row, thread_id)?;
    catch_up(conn, &mut record)?;
    Ok(Some(record))
}

/// The turn of the latest finished compaction in the view older than
/// `ordinal`. Unfinished or empty compactions are skipped, as the view
/// does; there are few compactions, and the partial index lists only them.
fn latest_cut_before(
    conn: &Connection,
    thread_id: &str,
    ordinal: u64,
) -> Result<Option<String>, StoreError> {
    let mut stmt = conn.prepare_cached(COMPACTIONS_BEFORE)?;
    let mut rows = stmt.query((thread_id, sql_int(ordinal)))?;
    while let Some(row) = rows.next()? {
        let record = decode_item(row, thread_id)?;
        if is_cut_point(&record) {
            return Ok(Some(record.turn_id));
        }
    }
    Ok(None)
}
