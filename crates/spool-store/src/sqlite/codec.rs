//! SQLite's side of rows ⇄ records: the column lists its SQL names, and
//! reading a column of a `rusqlite` row (the decoding is `crate::codec`'s).

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};
use spool_protocol::ThreadEvent;

use super::projected::RowBodies;
use crate::codec::Cells;
use crate::error::{DecodeCause, StoreError};

pub(crate) use crate::codec::{
    decode_event, decode_item, decode_thread, decode_turn, encode, sql_int,
};

/// Columns [`decode_item`] reads, in order (a macro so SQL can `concat!` it).
macro_rules! item_columns {
    () => {
        "seq, item_id, turn_id, ordinal, item, envelope, token_count, input_item"
    };
}
/// Columns [`decode_turn`] reads, in order.
macro_rules! turn_columns {
    () => {
        "seq, turn_id, ordinal, status, error, started_at, completed_at, duration_ms, token_usage"
    };
}
/// Columns [`decode_thread`] reads, in order (from `threads`). The last
/// seq is the newest event's, found on the primary key of `events`. The
/// update time is exact: the stored `updated_at_ms` may lag the newest
/// event by under a second while a writer runs (see `writer/batch.rs`), so
/// it is raised to that event's time, one more probe of the same key.
macro_rules! thread_columns {
    () => {
        concat!(
            "id, name, preview, model_provider, model, cwd, cli_version, history_mode, dev_mode, \
             forked_from_id, archived, created_at_ms, max(updated_at_ms, coalesce(",
            crate::sqlite::keys::newest_event_of!("at_ms", "threads.key"),
            ", updated_at_ms)), ",
            crate::sqlite::keys::newest_event_of!("seq", "threads.key"),
            ", ephemeral"
        )
    };
}
/// Columns [`decode_event`] reads, in order; [`decode_log_row`] also
/// reads the method and item id.
macro_rules! event_columns {
    () => {
        "seq, at_ms, payload, method, item_id"
    };
}
pub(crate) use {event_columns, item_columns, thread_columns, turn_columns};

impl Cells for Row<'_> {
    fn text(&self, idx: usize) -> Result<&str, DecodeCause> {
        Ok(self.get_ref(idx)?.as_str()?)
    }

    fn opt_text(&self, idx: usize) -> Result<Option<&str>, DecodeCause> {
        Ok(self.get_ref(idx)?.as_str_or_null()?)
    }

    fn int(&self, idx: usize) -> Result<i64, DecodeCause> {
        Ok(self.get_ref(idx)?.as_i64()?)
    }

    fn opt_int(&self, idx: usize) -> Result<Option<i64>, DecodeCause> {
        Ok(self.get_ref(idx)?.as_i64_or_null()?)
    }

    fn flag(&self, idx: usize) -> Result<bool, DecodeCause> {
        match self.get_ref(idx)? {
            ValueRef::Integer(value) => Ok(value != 0),
            other => Err(format!("a flag holds {:?}", other.data_type()).into()),
        }
    }
}

/// [`crate::codec::decode_log_row`] for a row of `events` read on `conn`,
/// where the projection row a log row leaves its body to is read too.
pub(crate) fn decode_log_row(
    conn: &Connection,
    row: &Row<'_>,
    thread_id: &str,
    after_seq: u64,
    out: &mut Vec<ThreadEvent>,
) -> Result<(), StoreError> {
    let bodies = RowBodies { conn, thread_id };
    crate::codec::decode_log_row(row, thread_id, after_seq, out, &bodies)
}
