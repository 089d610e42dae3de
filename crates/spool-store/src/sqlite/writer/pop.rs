//! Removing a thread's newest item atomically (the Session API's
//! `pop_item`).
//!
//! Reading the newest item and logging its removal happen in one
//! `BEGIN IMMEDIATE` transaction of the single writer, so nothing can come
//! between them: not another pop or append through this store (they queue
//! behind the writer), and not a writer of another store on the same file
//! (it waits for the write lock). Under the lock the thread's cached state
//! is checked against the table and reloaded if another writer moved the
//! thread on, so the choice is made on the committed truth.
//!
//! What is pending is committed first, so the pop's transaction holds only
//! the pop and its answer means "durable".

use crate::sqlite::keys;
use rusqlite::{Connection, Transaction, TransactionBehavior};
use spool_core::ItemRecord;
use spool_protocol::{ItemRemovedNotification, ServerNotification};

use super::requests::fresh_state;
use super::{Incoming, Writer, batch, held};
use crate::error::StoreError;
use crate::sqlite::codec::{decode_item, encode, item_columns};
use crate::thread_state::prepare::now_ms;
use crate::thread_state::rows::Rows;

/// The newest item in the model's view: what a session calls its newest
/// item (items outside that view are not session items).
const NEWEST_IN_VIEW: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE ",
    keys::of_thread!(),
    " AND is_turn = 0 AND llm = 1 ORDER BY pos DESC LIMIT 1"
);

impl Writer {
    /// Removes and returns the newest item in the model's view of a thread
    /// (see the module docs).
    pub(super) fn pop_newest(&mut self, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        self.commit().map_err(StoreError::Commit)?;
        let popped = self.pop_in_transaction(thread_id);
        if popped.is_err() {
            // Whatever the state took in, nothing of it was committed:
            // reload it from the table when next used.
            self.threads.remove(thread_id);
        }
        popped
    }

    fn pop_in_transaction(&mut self, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        let tx = Transaction::new_unchecked(held(&self.conn), TransactionBehavior::Immediate)?;
        fresh_state(&tx, &mut self.threads, thread_id)?;
        let Some(record) = newest_in_view(&tx, thread_id)? else {
            return Ok(None);
        };
        let notification = ServerNotification::ItemRemoved(ItemRemovedNotification {
            thread_id: thread_id.to_owned(),
            turn_id: record.turn_id.clone(),
            item_id: record.item.id().to_owned(),
        });
        let json = encode("notification", &notification)?;
        let incoming = vec![Incoming {
            notification,
            json: Some(json),
            born: false,
        }];
        let state = self
            .threads
            .get_mut(thread_id)
            .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
        state
            .append(
                Some(&*tx as &dyn Rows),
                thread_id,
                incoming,
                now_ms(),
                false,
            )
            .map_err(|refusal| refusal.error)?;
        batch::write_thread(&tx, thread_id, state)?;
        tx.commit()?;
        state.committed();
        Ok(Some(record))
    }
}

fn newest_in_view(conn: &Connection, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(NEWEST_IN_VIEW)?;
    let mut rows = stmt.query((thread_id,))?;
    match rows.next()? {
        Some(row) => decode_item(row, thread_id).map(Some),
        None => Ok(None),
    }
}
