//! The model view of a thread, read newest-first and only as far as the
//! budget reaches.
//!
//! Item rows in the view (`items.llm = 1`) are read in pages, newest
//! first, grouped into turns and offered to [`Packer`] one turn at a time;
//! reading stops as soon as the packer has what it needs. Packing uses the
//! cached token counts, so on a long thread with counts cached the cost is
//! the rows that fit plus one turn, whatever the thread's length.
//!
//! The turns left out beyond the first that did not fit are counted with
//! `turns.view_rank` (see `writer/rank.rs`): the rank of that turn, minus
//! the rank of the turn before the latest finished compaction older than
//! it (where the view starts), or minus nothing when there is none.
//!
//! Everything is read in one read transaction: one committed state.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension};
use spool_core::ItemRecord;
use spool_core::llm::{LlmView, LlmViewOptions, Offered, Packer, is_cut_point};

use super::catch_up::catch_up;
use super::codec::{decode_item, item_columns, sql_int};
use super::reads::thread_exists;
use super::writer::TokenCount;
use crate::error::StoreError;

/// Rows of the first page; each next page is twice as large, up to
/// [`MAX_PAGE`]. A 20,000-token budget over short messages fits a few
/// hundred rows: two or three pages.
const FIRST_PAGE: usize = 128;
const MAX_PAGE: usize = 4_096;

const PAGE: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE thread_id = ?1 AND llm = 1 AND ordinal < ?2 ORDER BY ordinal DESC LIMIT ?3"
);
const COMPACTIONS_BEFORE: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE thread_id = ?1 AND kind = 'contextCompaction' AND llm = 1 \
     AND ordinal < ?2 ORDER BY ordinal DESC"
);
const VIEW_RANK: &str = "SELECT view_rank FROM turns WHERE thread_id = ?1 AND turn_id = ?2";

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
    let mut packer = Packer::new(options);
    // Seqs of the records read without a cached count, by item id: a
    // computed count is cached only for the item as it was read.
    let mut uncached: HashMap<String, u64> = HashMap::new();
    // The turn being gathered, newest record first.
    let mut turn: Vec<ItemRecord> = Vec::new();
    let mut before = i64::MAX;
    let mut page_size = FIRST_PAGE;
    let stop = 'read: loop {
        let page = read_page(&tx, thread_id, before, page_size)?;
        let full_page = page.len() == page_size;
        for record in page {
            before = sql_int(record.ordinal);
            if turn
                .last()
                .is_some_and(|last| last.turn_id != record.turn_id)
                && let Some(stop) = offer(&mut packer, &mut turn)
            {
                break 'read Some(stop);
            }
            if record.token_count.is_none() {
                uncached.insert(record.item.id().to_owned(), record.seq);
            }
            turn.push(record);
        }
        if !full_page {
            break 'read offer(&mut packer, &mut turn);
        }
        page_size = (page_size * 2).min(MAX_PAGE);
    };
    if let Some(Stop::Full { turn_id, oldest }) = stop {
        packer.add_omitted(older_turns_in_view(&tx, thread_id, &turn_id, oldest)?);
    }
    tx.finish()?;
    let view = packer.finish();
    let counts = view
        .computed_token_counts
        .iter()
        .filter_map(|(item_id, token_count)| {
            uncached.get(item_id).map(|&seq| TokenCount {
                item_id: item_id.clone(),
                seq,
                token_count: *token_count,
            })
        })
        .collect();
    Ok((view, counts))
}

/// Why reading stopped before the oldest row.
enum Stop {
    /// The view starts at a compaction in the last turn offered.
    Cut,
    /// This turn did not fit; the older turns in the view, back to where
    /// the view starts, are left out too and must be counted.
    Full { turn_id: String, oldest: u64 },
}

/// Offers the gathered turn (emptying it); `Some` when reading can stop.
fn offer(packer: &mut Packer<ItemRecord>, turn: &mut Vec<ItemRecord>) -> Option<Stop> {
    let (turn_id, oldest) = match turn.last() {
        Some(oldest) => (oldest.turn_id.clone(), oldest.ordinal),
        None => return None,
    };
    match packer.offer(turn.drain(..).rev()) {
        Offered::Taken => None,
        Offered::Cut => Some(Stop::Cut),
        Offered::Full { count_older: true } => Some(Stop::Full { turn_id, oldest }),
        Offered::Full { count_older: false } => Some(Stop::Cut),
    }
}

fn read_page(
    conn: &Connection,
    thread_id: &str,
    before: i64,
    limit: usize,
) -> Result<Vec<ItemRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(PAGE)?;
    let mut rows = stmt.query((thread_id, before, sql_int(limit as u64)))?;
    let mut records = Vec::with_capacity(limit);
    while let Some(row) = rows.next()? {
        records.push(decode_item(row, thread_id)?);
    }
    drop(rows);
    for record in &mut records {
        catch_up(conn, record)?;
    }
    Ok(records)
}

/// The turns in the view older than `turn_id` (whose oldest record in the
/// view has ordinal `oldest`), back to and including the turn of the latest
/// finished compaction before it.
fn older_turns_in_view(
    conn: &Connection,
    thread_id: &str,
    turn_id: &str,
    oldest: u64,
) -> Result<usize, StoreError> {
    let rank = |turn_id: &str| -> Result<i64, StoreError> {
        let rank: Option<i64> = conn
            .prepare_cached(VIEW_RANK)?
            .query_row((thread_id, turn_id), |row| row.get(0))
            .optional()?;
        Ok(rank.unwrap_or(0))
    };
    // The turn that did not fit is in the view: the turns before it in the
    // view are one fewer than its rank.
    let before_stop = rank(turn_id)? - 1;
    let start = match latest_cut_before(conn, thread_id, oldest)? {
        // The compaction's turn counts; the turns before it do not.
        Some(cut_turn) => rank(&cut_turn)? - 1,
        None => 0,
    };
    Ok(usize::try_from(before_stop - start).unwrap_or(0))
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
