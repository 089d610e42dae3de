//! A thread's newest items as Responses API input items (what the Session
//! API's `get_items` returns, before its window rule).
//!
//! Rows in the model's view (`items.llm = 1`) are read newest-first on the
//! `(thread_id, ordinal)` index, and reading stops when the window is full
//! or at the latest finished compaction (which stands for everything
//! before it, as in the model view). A row added through the Session API
//! has its raw input item in a column of its own, and only that column is
//! decoded; any other row (an item the runtime produced, a compaction) is
//! decoded whole and converted as the model view converts it, which may
//! give it more than one input item (a tool call and its output) or none.

use crate::sqlite::keys;
use rusqlite::Connection;

use super::SqliteStore;
use super::codec::item_columns;
use super::reads::thread_exists;
use crate::codec::push_input_items as push_row;
use crate::error::StoreError;
use crate::input_json::{InputJson, Text, build_on_caller};
use crate::types::InputItems;

const NEWEST: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE ",
    keys::of_thread!(),
    " AND is_turn = 0 AND llm = 1 ORDER BY pos DESC"
);

/// Windows up to this many items are read on the caller's task rather
/// than on a blocking thread.
const INLINE_LIMIT: usize = 200;

impl SqliteStore {
    /// [`crate::Store::input_items`] on this store.
    pub(super) async fn read_input_items<T: InputJson>(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<InputItems<T>, StoreError> {
        match limit {
            // A small window reads a few dozen rows in tens of microseconds:
            // less than the hop to a blocking thread and back, so it runs
            // here (a WAL reader does not wait for the writer).
            Some(limit) if limit <= INLINE_LIMIT => self
                .inner
                .readers
                .with(|conn| read_input_items(conn, thread_id, Some(limit))),
            // A large window of `Value`s is read there as text and built
            // here, where its blocks will be freed (`input_json.rs`).
            Some(_) | None if T::BUILT_ON_CALLER => {
                let id = thread_id.to_owned();
                let texts = self
                    .read(move |conn| read_input_items::<Text>(conn, &id, limit))
                    .await?;
                build_on_caller(texts, thread_id).await
            }
            Some(_) | None => {
                let thread_id = thread_id.to_owned();
                self.read(move |conn| read_input_items(conn, &thread_id, limit))
                    .await
            }
        }
    }
}

/// The newest `limit` input items of a thread, oldest first (`None`: all
/// since the latest compaction).
pub(crate) fn read_input_items<T: InputJson>(
    conn: &Connection,
    thread_id: &str,
    limit: Option<usize>,
) -> Result<InputItems<T>, StoreError> {
    let found = read_newest(conn, thread_id, limit)?;
    if found.items.is_empty() && !thread_exists(conn, thread_id)? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    Ok(found)
}

fn read_newest<T: InputJson>(
    conn: &Connection,
    thread_id: &str,
    limit: Option<usize>,
) -> Result<InputItems<T>, StoreError> {
    if limit == Some(0) {
        // An empty window: whether anything is left out is not asked.
        return Ok(InputItems {
            items: Vec::new(),
            complete: false,
        });
    }
    let cap = limit.unwrap_or(usize::MAX);
    // No LIMIT: rows stream from the index newest-first and reading stops
    // as soon as the window is full, however many items each row gives.
    let mut stmt = conn.prepare_cached(NEWEST)?;
    let mut rows = stmt.query((thread_id,))?;
    let mut newest_first = Vec::with_capacity(limit.map_or(64, |limit| limit.min(4_096) + 1));
    let mut row_items = Vec::new();
    let mut complete = true;
    while let Some(row) = rows.next()? {
        row_items.clear();
        // Decoded straight from SQLite's buffer: no copy of the JSON.
        let cut = push_row(row, thread_id, &mut row_items)?;
        newest_first.extend(row_items.drain(..).rev());
        // One more than asked tells that something is left out; so does a
        // compaction, which stands for what came before it.
        if newest_first.len() > cap || cut {
            complete = false;
            break;
        }
    }
    newest_first.truncate(cap);
    newest_first.reverse();
    Ok(InputItems {
        items: newest_first,
        complete,
    })
}
