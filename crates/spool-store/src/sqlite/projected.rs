//! Log rows whose body is the item's row in `items` (`item/projected`,
//! see `born.rs`): reading them back, and giving them their body before
//! the item row goes. And log rows whose body is a turn's row
//! (`turn/projected-start`, `turn/projected-end`): reading them back; a
//! turn's row goes only with its thread's log, so they never need theirs.
//!
//! Invariant: an `item/projected` row at seq S about item X has an `items`
//! row for X whose `seq` is S, a finished item, and that row is exactly the
//! completion the log row stands for (`born::completion_of`). The writer
//! keeps it so: it writes such a log row only in the transaction that
//! writes the item row at that seq; a finished item's row changes no more
//! (only its cached token count); and every statement that deletes item
//! rows runs [`restore`] first, in the same transaction.

use rusqlite::Connection;
use spool_core::TurnRecord;
use spool_protocol::{ItemCompletedNotification, ServerNotification};

use super::codec::{decode_item, decode_turn, encode, item_columns, sql_int, turn_columns};
use super::keys;
use crate::born::{PROJECTED, RECORDED, completion_of};
use crate::codec::Bodies;
use crate::error::{CorruptRow, StoreError};

const ITEM_ROW: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 0"
);

/// A turn's row by its ordinal: the row's own key.
const TURN_ROW: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM items WHERE pos = ",
    keys::thread_lo!(),
    " + ?2 AND is_turn = 1"
);

/// The projection rows of one thread read on `conn`, as
/// [`crate::codec::decode_log_row`] needs them.
pub(crate) struct RowBodies<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) thread_id: &'a str,
}

impl Bodies for RowBodies<'_> {
    fn item_completion(
        &self,
        seq: u64,
        item_id: Option<&str>,
    ) -> Result<ItemCompletedNotification, StoreError> {
        read_completion(self.conn, self.thread_id, seq, item_id)
    }

    fn turn(&self, ordinal: u64) -> Result<Option<TurnRecord>, StoreError> {
        let mut stmt = self.conn.prepare_cached(TURN_ROW)?;
        let mut rows = stmt.query((self.thread_id, sql_int(ordinal)))?;
        match rows.next()? {
            Some(row) => decode_turn(row, self.thread_id, "items").map(Some),
            None => Ok(None),
        }
    }
}

/// The thread's item rows that are the body of an `item/projected` log
/// row; [`BODY_OF_ITEM`] narrows it to one item.
/// The log row at an item row's seq has the `pos` of the item row, moved
/// from its ordinal to its seq (both under the thread's key).
macro_rules! bodies {
    ($rows:expr) => {
        concat!(
            "SELECT ",
            item_columns!(),
            " FROM items WHERE ",
            $rows,
            " AND EXISTS (SELECT 1 FROM events WHERE \
             events.pos = items.pos - items.ordinal + items.seq \
             AND events.method = 'item/projected')"
        )
    };
}
const BODIES: &str = bodies!(concat!(keys::of_thread!(), " AND is_turn = 0"));
const BODY_OF_ITEM: &str = bodies!("item_id = ?2 AND thread_id = ?1 AND is_turn = 0");

const GIVE_BODY: &str = concat!(
    "UPDATE events SET method = ?3, payload = ?4 WHERE pos = ",
    keys::thread_lo!(),
    " + ?2 AND method = ?5"
);

/// The completion an `item/projected` row at `seq` about `item_id` stands
/// for, read from the item's row.
fn read_completion(
    conn: &Connection,
    thread_id: &str,
    seq: u64,
    item_id: Option<&str>,
) -> Result<ItemCompletedNotification, StoreError> {
    let corrupt = |cause: String| {
        StoreError::CorruptRow(Box::new(CorruptRow {
            table: "events",
            thread_id: thread_id.to_owned(),
            seq: Some(seq),
            item_id: item_id.map(str::to_owned),
            column: "method",
            cause: format!("an {PROJECTED} row: {cause}").into(),
        }))
    };
    let item_id = item_id.ok_or_else(|| corrupt("no item id".to_owned()))?;
    let mut stmt = conn.prepare_cached(ITEM_ROW)?;
    let mut rows = stmt.query((thread_id, item_id))?;
    let Some(row) = rows.next()? else {
        return Err(corrupt("the item has no row".to_owned()));
    };
    let record = decode_item(row, thread_id)?;
    if record.seq != seq {
        return Err(corrupt(format!("the item's row is at seq {}", record.seq)));
    }
    completion_of(record).ok_or_else(|| corrupt("the item's row is not finished".to_owned()))
}

/// Gives every `item/projected` row whose body is an item row about to be
/// deleted (the thread's all, or `item_id`'s) its completion as payload,
/// as an `item/recorded` row. Runs in the deleting transaction, before the
/// delete. Returns how many log rows it rewrote.
pub(crate) fn restore(
    conn: &Connection,
    thread_id: &str,
    item_id: Option<&str>,
) -> Result<usize, StoreError> {
    let mut bodies = Vec::new();
    {
        let sql = if item_id.is_some() {
            BODY_OF_ITEM
        } else {
            BODIES
        };
        let mut stmt = conn.prepare_cached(sql)?;
        let mut rows = match item_id {
            Some(item_id) => stmt.query((thread_id, item_id))?,
            None => stmt.query((thread_id,))?,
        };
        while let Some(row) = rows.next()? {
            bodies.push(decode_item(row, thread_id)?);
        }
    }
    let mut give_body = conn.prepare_cached(GIVE_BODY)?;
    let count = bodies.len();
    for record in bodies {
        let seq = record.seq;
        let item_id = record.item.id().to_owned();
        let Some(completion) = completion_of(record) else {
            return Err(StoreError::CorruptRow(Box::new(CorruptRow {
                table: "items",
                thread_id: thread_id.to_owned(),
                seq: Some(seq),
                item_id: Some(item_id),
                column: "status",
                cause: format!("the body of an {PROJECTED} row is not a finished item").into(),
            })));
        };
        let payload = encode(
            "notification",
            &ServerNotification::ItemCompleted(completion),
        )?;
        give_body.execute((thread_id, sql_int(seq), RECORDED, payload, PROJECTED))?;
    }
    Ok(count)
}
