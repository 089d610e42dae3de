//! The Session API's reads and pops on PostgreSQL: a thread's newest
//! input items, and removing its newest item atomically.

use spool_core::ItemRecord;
use spool_protocol::{ItemRemovedNotification, ServerNotification};

use super::batch;
use super::query::Query;
use super::reads;
use super::writer::Writer;
use crate::codec::{decode_item, push_input_items, sql_int};
use crate::error::StoreError;
use crate::input_json::InputJson;
use crate::thread_state::ops;
use crate::types::InputItems;

/// Rows of the first page of input items when the window is unbounded;
/// pages double up to [`MAX_PAGE`].
const FIRST_PAGE: usize = 128;
const MAX_PAGE: usize = 4_096;

const NEWEST_BEFORE: &str = "SELECT seq, item_id, turn_id, ordinal, item, envelope, \
     token_count, input_item FROM items WHERE thread_id = $1 AND llm AND ordinal < $2 \
     ORDER BY ordinal DESC LIMIT $3";

/// The newest `limit` input items of a thread, oldest first (`None`: all
/// since the latest compaction), as SQLite reads them (`input_read.rs`):
/// newest-first, stopping when the window is full or at the latest
/// finished compaction. `q` is one snapshot.
pub(super) async fn read_input_items<T: InputJson>(
    q: &impl Query,
    thread_id: &str,
    limit: Option<usize>,
) -> Result<InputItems<T>, StoreError> {
    if limit == Some(0) {
        // An empty window: whether anything is left out is not asked.
        if !reads::thread_exists(q, thread_id).await? {
            return Err(StoreError::UnknownThread(thread_id.to_owned()));
        }
        return Ok(InputItems {
            items: Vec::new(),
            complete: false,
        });
    }
    let cap = limit.unwrap_or(usize::MAX);
    // Most rows give one item: the window plus one is the first page.
    let mut page_size = limit.map_or(FIRST_PAGE, |limit| limit.saturating_add(1).min(MAX_PAGE));
    let mut before = i64::MAX;
    let mut newest_first: Vec<T> = Vec::new();
    let mut row_items = Vec::new();
    let mut complete = true;
    'read: loop {
        let rows = q
            .rows(
                NEWEST_BEFORE,
                &[&thread_id, &before, &sql_int(page_size as u64)],
            )
            .await?;
        let full_page = rows.len() == page_size;
        for row in &rows {
            before = row.try_get(3)?;
            row_items.clear();
            let cut = push_input_items(row, thread_id, &mut row_items)?;
            newest_first.extend(row_items.drain(..).rev());
            // One more than asked tells that something is left out; so
            // does a compaction, which stands for what came before it.
            if newest_first.len() > cap || cut {
                complete = false;
                break 'read;
            }
        }
        if !full_page {
            break;
        }
        page_size = (page_size * 2).min(MAX_PAGE);
    }
    if newest_first.is_empty() && !reads::thread_exists(q, thread_id).await? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    newest_first.truncate(cap);
    newest_first.reverse();
    Ok(InputItems {
        items: newest_first,
        complete,
    })
}

impl Writer {
    /// Removes and returns the newest item in the model's view of a thread,
    /// choosing it and logging its removal in one transaction.
    pub(super) fn pop_newest(&mut self, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        const NEWEST_IN_VIEW: &str = "SELECT seq, item_id, turn_id, ordinal, item, envelope, \
             token_count, input_item FROM items WHERE thread_id = $1 AND llm \
             ORDER BY ordinal DESC LIMIT 1";
        self.in_own_transaction(Some(thread_id), |conn, source| {
            let (state, rows) = source.get(thread_id)?;
            let Some(row) = conn.block_on(conn.client.opt_row(NEWEST_IN_VIEW, &[&thread_id]))?
            else {
                return Ok(None);
            };
            let record = decode_item(&row, thread_id)?;
            let removal = ServerNotification::ItemRemoved(ItemRemovedNotification {
                thread_id: thread_id.to_owned(),
                turn_id: record.turn_id.clone(),
                item_id: record.item.id().to_owned(),
            });
            ops::stage(rows, state, thread_id, vec![removal])?;
            conn.block_on(batch::write_thread(&conn.client, thread_id, state))?;
            Ok(Some(record))
        })
    }
}
