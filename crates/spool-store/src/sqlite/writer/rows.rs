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
    " FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 0"
);
const ITEM_STATUS: &str =
    "SELECT status FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 0";
const TURN_STATUS: &str =
    "SELECT status FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 1";
// SQLite compares text byte by byte (the default BINARY collation), as
// Rust does.
// The thread's own greatest ids: a scan of its run of items and turns (by
// `pos`), since the id index leads with the id.
const MAX_ITEM_ID: &str = concat!(
    "SELECT max(item_id) FROM items WHERE ",
    crate::sqlite::keys::of_thread!(),
    " AND is_turn = 0"
);
const MAX_TURN_ID: &str = concat!(
    "SELECT max(item_id) FROM items WHERE ",
    crate::sqlite::keys::of_thread!(),
    " AND is_turn = 1"
);
// The greatest id of every item and turn of every thread: one seek to the
// end of the id index, a bound of both kinds (a looser one only costs
// probes).
const ID_BOUND: &str = "SELECT max(item_id) FROM items";
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

    fn id_bound(&self, _thread_id: &str, _kind: Kind) -> Result<Option<String>, StoreError> {
        Ok(self
            .prepare_cached(ID_BOUND)?
            .query_row((), |row| row.get(0))?)
    }

    fn reserved_upto(&self, thread_id: &str) -> Result<u64, StoreError> {
        let upto: Option<i64> = self
            .prepare_cached(RESERVED_UPTO)?
            .query_row((thread_id,), |row| row.get(0))
            .optional()?;
        Ok(upto.map_or(0, |upto| u64::try_from(upto).unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreOptions;
    use crate::sqlite::schema::open_writer;

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // Unbound parameters are NULL: the plan does not depend on them.
        let mut rows = stmt.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("; ")
    }

    /// The id indexes lead with the id: the bounds are a seek to an
    /// index's end, a thread's own ids are read along its rows' key, and a
    /// lookup by thread and id still finds its row through the index.
    #[test]
    fn id_reads_use_the_keys_they_are_written_for() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_writer(&dir.path().join("spool.db"), &StoreOptions::default()).unwrap();
        assert!(
            plan(&conn, ID_BOUND).contains("COVERING INDEX items_by_id"),
            "{}",
            plan(&conn, ID_BOUND)
        );
        for own in [MAX_ITEM_ID, MAX_TURN_ID] {
            let found = plan(&conn, own);
            assert!(
                found.contains("SEARCH items USING INTEGER PRIMARY KEY"),
                "{own}: {found}"
            );
        }
        for by_id in [ITEM, ITEM_STATUS, TURN_STATUS] {
            let found = plan(&conn, by_id);
            assert!(
                found.contains("INDEX items_by_id (item_id=? AND thread_id=? AND is_turn=?)"),
                "{by_id}: {found}"
            );
        }
    }
}
