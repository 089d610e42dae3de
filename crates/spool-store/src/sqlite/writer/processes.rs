//! Commands running for a thread's items, recorded while they run so that
//! crash recovery can find any a crash left behind (`crate::processes`).

use super::{Reply, Writer, held};
use crate::error::StoreError;
use crate::sqlite::codec::sql_int;

pub(crate) enum ProcessOp {
    Started {
        thread_id: String,
        item_id: String,
        pgid: u32,
        start_ticks: u64,
        reply: Reply<()>,
    },
    Ended {
        thread_id: String,
        item_id: String,
        reply: Reply<()>,
    },
}

const INSERT: &str = "INSERT OR REPLACE INTO running_processes \
     (thread_id, item_id, pgid, start_ticks) VALUES (?1, ?2, ?3, ?4)";
const DELETE: &str = "DELETE FROM running_processes WHERE thread_id = ?1 AND item_id = ?2";

impl Writer {
    /// Each in a transaction of its own, beside the batch (which it does
    /// not touch): durable when answered.
    pub(super) fn handle_process_op(&mut self, op: ProcessOp) {
        match op {
            ProcessOp::Started {
                thread_id,
                item_id,
                pgid,
                start_ticks,
                reply,
            } => {
                let result = held(&self.conn)
                    .prepare_cached(INSERT)
                    .and_then(|mut stmt| {
                        stmt.execute((&thread_id, &item_id, pgid, sql_int(start_ticks)))
                    })
                    .map(|_| ())
                    .map_err(StoreError::from);
                let _ = reply.send(result);
            }
            ProcessOp::Ended {
                thread_id,
                item_id,
                reply,
            } => {
                let result = held(&self.conn)
                    .prepare_cached(DELETE)
                    .and_then(|mut stmt| stmt.execute((&thread_id, &item_id)))
                    .map(|_| ())
                    .map_err(StoreError::from);
                let _ = reply.send(result);
            }
        }
    }
}
