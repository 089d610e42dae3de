//! The committed rows a thread's writer state reads back
//! (`thread_state::rows`), on the writer's connection.

use rusqlite::{Connection, OptionalExtension};
use spool_core::{ItemRecord, TurnRecord};

use crate::error::StoreError;
use crate::sqlite::codec::{decode_item, item_columns};
use crate::sqlite::reads::{read_items, read_thread, read_turns};
use crate::thread_state::rows::{Kind, Rows};
use crate::types::ThreadRecord;

const ITEM: &str = concat!(
    "SELECT ",
    item_columns!(),
    " FROM items WHERE thread_id = ?1 AND item_id = ?2"
);
const ITEM_STATUS: &str = "SELECT status FROM items WHERE thread_id = ?1 AND item_id = ?2";
const TURN_STATUS: &str = "SELECT status FROM turns WHERE thread_id = ?1 AND turn_id = ?2";
// SQLite compares text byte by byte (the default BINARY collation), as
// Rust does.
const MAX_ITEM_ID: &str = "SELECT max(item_id) FROM items WHERE thread_id = ?1";
const MAX_TURN_ID: &str = "SELECT max(turn_id) FROM turns WHERE thread_id = ?1";
const RESERVED_UPTO: &str = "SELECT upto FROM seq_reservations WHERE thread_id = ?1";

impl Rows for Connection {
    fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        read_thread(self, thread_id)
    }

    fn items(&self, thread_id: &str, open_only: bool) -> Result<Vec<ItemRecord>, StoreError> {
        read_items(self, thread_id, open_only)
    }

    fn turns(&self, thread_id: &str, open_only: bool) -> Result<Vec<TurnRecord>, StoreError> {
        read_turns(self, thread_id, open_only)
    }

    fn item(&self, thread_id: &str, item_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        let mut stmt = self.prepare_cached(ITEM)?;
        stmt.query_row((thread_id, item_id), |row| Ok(decode_item(row, thread_id)))
            .optional()?
            .transpose()
    }

    fn status(&self, thread_id: &str, kind: Kind, id: &str) -> Result<Option<String>, StoreError> {
        let sql = match kind {
            Kind::Item => ITEM_STATUS,
            Kind::Turn => TURN_STATUS,
        };
        let mut stmt = self.prepare_cached(sql)?;
        Ok(stmt
            .query_row((thread_id, id), |row| row.get(0))
            .optional()?)
    }

    fn max_id(&self, thread_id: &str, kind: Kind) -> Result<Option<String>, StoreError> {
        let sql = match kind {
            Kind::Item => MAX_ITEM_ID,
            Kind::Turn => MAX_TURN_ID,
        };
        Ok(self
            .prepare_cached(sql)?
            .query_row((thread_id,), |row| row.get(0))?)
    }

    fn reserved_upto(&self, thread_id: &str) -> Result<u64, StoreError> {
        let upto: Option<i64> = self
            .prepare_cached(RESERVED_UPTO)?
            .query_row((thread_id,), |row| row.get(0))
            .optional()?;
        Ok(upto.map_or(0, |upto| u64::try_from(upto).unwrap_or(0)))
    }
}
