//! PostgreSQL's side of rows ⇄ records: the column lists its SQL names and
//! reading a column of a `tokio_postgres` row (the decoding itself is
//! `crate::codec`'s, the same as SQLite's).

use tokio_postgres::Row;

use crate::codec::Cells;
use crate::error::DecodeCause;

/// `SELECT` of `codec::decode_thread`'s columns from `threads`. The last
/// seq is the newest event's; the update time is raised to that event's
/// (the stored one may lag by under a second, as in SQLite).
macro_rules! select_thread {
    () => {
        "SELECT id, name, preview, model_provider, model, cwd, cli_version, history_mode, \
         dev_mode, forked_from_id, archived, created_at_ms, \
         greatest(updated_at_ms, coalesce((SELECT at_ms FROM events \
         WHERE events.thread_id = threads.id ORDER BY seq DESC LIMIT 1), updated_at_ms)), \
         (SELECT max(seq) FROM events WHERE events.thread_id = threads.id), ephemeral \
         FROM threads"
    };
}
pub(super) use select_thread;

impl Cells for Row {
    fn text(&self, idx: usize) -> Result<&str, DecodeCause> {
        Ok(self.try_get(idx)?)
    }

    fn opt_text(&self, idx: usize) -> Result<Option<&str>, DecodeCause> {
        Ok(self.try_get(idx)?)
    }

    fn int(&self, idx: usize) -> Result<i64, DecodeCause> {
        Ok(self.try_get(idx)?)
    }

    fn opt_int(&self, idx: usize) -> Result<Option<i64>, DecodeCause> {
        Ok(self.try_get(idx)?)
    }

    fn flag(&self, idx: usize) -> Result<bool, DecodeCause> {
        Ok(self.try_get(idx)?)
    }
}
