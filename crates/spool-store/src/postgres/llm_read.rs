//! PostgreSQL's reads of a thread's model view, driving
//! `crate::view_read`'s algorithm, in one repeatable-read snapshot.

use spool_core::llm::{LlmView, LlmViewOptions, is_cut_point};
use spool_protocol::ItemStatus;

use super::catch_up;
use super::query::Query;
use super::reads;
use crate::codec::{decode_item, sql_int};
use crate::error::StoreError;
use crate::view_read::{TokenCount, ViewRead};

const PAGE: &str = "SELECT seq, item_id, turn_id, ordinal, item, envelope, token_count, \
     input_item, (SELECT max(seq) FROM events WHERE events.thread_id = $1) FROM items \
     WHERE thread_id = $1 AND llm AND ordinal < $2 ORDER BY ordinal DESC LIMIT $3";
const COMPACTIONS_BEFORE: &str = "SELECT seq, item_id, turn_id, ordinal, item, envelope, \
     token_count, input_item FROM items WHERE thread_id = $1 AND kind = 'contextCompaction' \
     AND llm AND ordinal < $2 ORDER BY ordinal DESC";
const VIEW_RANK: &str = "SELECT view_rank FROM turns WHERE thread_id = $1 AND turn_id = $2";
const CACHE_TOKEN_COUNTS: &str = "UPDATE items SET token_count = c.count \
     FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS c(item_id, seq, count) \
     WHERE items.thread_id = $1 AND items.item_id = c.item_id AND items.seq = c.seq";

/// The view, and the token counts it computed, to cache. `q` is a
/// repeatable-read transaction.
pub(super) async fn read_llm_view(
    q: &impl Query,
    thread_id: &str,
    options: LlmViewOptions,
) -> Result<(LlmView, Vec<TokenCount>), StoreError> {
    let mut read = ViewRead::new(options);
    while let Some((before, limit)) = read.next_page() {
        let rows = q
            .rows(
                PAGE,
                &[&thread_id, &sql_int(before), &sql_int(limit as u64)],
            )
            .await?;
        // An unknown thread has no rows: asked only when the first page
        // (the one below no ordinal) is empty, a round trip less for
        // every other view.
        if before == u64::MAX && rows.is_empty() && !reads::thread_exists(q, thread_id).await? {
            return Err(StoreError::UnknownThread(thread_id.to_owned()));
        }
        let log_end = catch_up::log_end(&rows)?;
        // The page comes whole, but a row is decoded only when the read
        // wants it (`view_read.rs`); an item still in progress is brought
        // up to date on its own (there are few: the turn in flight's).
        let mut taken = 0;
        let mut wanted = true;
        for row in &rows {
            let mut record = decode_item(row, thread_id)?;
            if record.envelope.status == ItemStatus::InProgress {
                catch_up::catch_up(q, thread_id, std::slice::from_mut(&mut record), log_end)
                    .await?;
            }
            taken += 1;
            if !read.take(record) {
                wanted = false;
                break;
            }
        }
        if wanted {
            read.end_page(taken);
        }
    }
    let ranks = match read.left_out() {
        Some((turn_id, oldest)) => {
            // Both at once: the connection pipelines them, one round trip.
            let (cut_turn, stop_rank) = tokio::join!(
                latest_cut_before(q, thread_id, oldest),
                rank(q, thread_id, turn_id)
            );
            let cut_rank = match cut_turn? {
                Some(cut_turn) => Some(rank(q, thread_id, &cut_turn).await?),
                None => None,
            };
            Some((stop_rank?, cut_rank))
        }
        None => None,
    };
    Ok(read.finish(ranks))
}

/// A turn's view rank (0 if it has none).
async fn rank(q: &impl Query, thread_id: &str, turn_id: &str) -> Result<i64, StoreError> {
    Ok(match q.opt_row(VIEW_RANK, &[&thread_id, &turn_id]).await? {
        Some(row) => row.try_get(0)?,
        None => 0,
    })
}

/// The turn of the latest finished compaction in the view older than
/// `ordinal` (unfinished or empty ones are skipped, as the view does).
async fn latest_cut_before(
    q: &impl Query,
    thread_id: &str,
    ordinal: u64,
) -> Result<Option<String>, StoreError> {
    for row in q
        .rows(COMPACTIONS_BEFORE, &[&thread_id, &sql_int(ordinal)])
        .await?
    {
        let record = decode_item(&row, thread_id)?;
        if is_cut_point(&record) {
            return Ok(Some(record.turn_id));
        }
    }
    Ok(None)
}

/// Caches token counts computed for items as of their seqs (a count for an
/// item that changed since is dropped by the seq guard).
pub(super) async fn cache_token_counts(
    q: &impl Query,
    thread_id: &str,
    counts: &[TokenCount],
) -> Result<(), StoreError> {
    let item_ids: Vec<&str> = counts.iter().map(|c| c.item_id.as_str()).collect();
    let seqs: Vec<i64> = counts.iter().map(|c| sql_int(c.seq)).collect();
    let values: Vec<i64> = counts.iter().map(|c| i64::from(c.token_count)).collect();
    q.exec(CACHE_TOKEN_COUNTS, &[&thread_id, &item_ids, &seqs, &values])
        .await?;
    Ok(())
}
