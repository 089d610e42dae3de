//! Whole-thread operations on PostgreSQL: archive, revert, fork, delete,
//! and the provider's history cursor. What each logs is
//! `thread_state::ops`'s business (the same as SQLite's); here each runs
//! in a transaction of its own after what was pending is committed
//! (`Writer::in_own_transaction`), so its answer means "durable".

use spool_core::{ItemRecord, ReduceError};
use spool_protocol::{ServerNotification, ThreadEvent};

use super::batch;
use super::query::Query;
use super::reads::{self, read_after_ordinal, read_item_in_view};
use super::requests::StateSource;
use super::writer::{Conn, Writer};
use crate::codec::{decode_history, sql_int};
use crate::error::StoreError;
use crate::thread_state::prepare::now_ms;
use crate::thread_state::{ThreadState, ops};
use crate::types::StoredHistory;
pub(crate) use crate::write_ops::ThreadOp;

const SET_HISTORY: &str = "INSERT INTO history_cursors (thread_id, cursor, conversation_id) \
     VALUES ($1, $2, $3) ON CONFLICT (thread_id) DO UPDATE \
     SET cursor = excluded.cursor, conversation_id = excluded.conversation_id";
const RUNNING_TURN: &str =
    "SELECT turn_id FROM turns WHERE thread_id = $1 AND status = 'inProgress' LIMIT 1";
const RECORD_DELETION: &str = "INSERT INTO deleted_threads (id, deleted_at_ms) VALUES ($1, $2) \
     ON CONFLICT (id) DO UPDATE SET deleted_at_ms = excluded.deleted_at_ms";
/// Every row of a thread, children first (the foreign keys).
const DELETE_THREAD: [&str; 10] = [
    "DELETE FROM pending_requests WHERE thread_id = $1",
    "DELETE FROM run_states WHERE thread_id = $1",
    "DELETE FROM running_processes WHERE thread_id = $1",
    "DELETE FROM history_cursors WHERE thread_id = $1",
    "DELETE FROM commands WHERE thread_id = $1",
    "DELETE FROM thread_leases WHERE thread_id = $1",
    "DELETE FROM items WHERE thread_id = $1",
    "DELETE FROM turns WHERE thread_id = $1",
    "DELETE FROM events WHERE thread_id = $1",
    "DELETE FROM threads WHERE id = $1",
];

impl Writer {
    pub(super) fn handle_thread_op(&mut self, op: ThreadOp) {
        match op {
            ThreadOp::SetArchived {
                thread_id,
                archived,
                reply,
            } => {
                let result = self.in_own_transaction(Some(&thread_id), |conn, source| {
                    let Some(notifications) = ops::archive(conn, &thread_id, archived)? else {
                        return Ok(Vec::new());
                    };
                    log(conn, source, &thread_id, notifications)
                });
                let _ = reply.send(result);
            }
            ThreadOp::Delete { thread_id, reply } => {
                self.threads.remove(&thread_id);
                let result =
                    self.in_own_transaction(Some(&thread_id), |conn, _| delete(conn, &thread_id));
                if result.is_ok() {
                    self.leases.remove(&thread_id);
                }
                let _ = reply.send(result);
            }
            ThreadOp::Revert {
                thread_id,
                first_turn_id,
                reply,
            } => {
                let result = self.in_own_transaction(Some(&thread_id), |conn, source| {
                    let (state, rows) = source.get(&thread_id)?;
                    let removals = ops::revert(rows, state, &thread_id, &first_turn_id)?;
                    if removals.is_empty() {
                        return Ok(Vec::new());
                    }
                    let events = ops::stage(rows, state, &thread_id, removals)?;
                    conn.block_on(batch::write_thread(&conn.client, &thread_id, state))?;
                    Ok(events)
                });
                let _ = reply.send(result);
            }
            ThreadOp::SetHistory {
                thread_id,
                cursor_json,
                conversation_id,
                reply,
            } => {
                let result = self.in_own_transaction(None, |conn, _| {
                    let q = &conn.client;
                    if !conn.block_on(reads::thread_exists(q, &thread_id))? {
                        return Err(StoreError::UnknownThread(thread_id.clone()));
                    }
                    conn.block_on(
                        q.exec(SET_HISTORY, &[&thread_id, &cursor_json, &conversation_id]),
                    )?;
                    Ok(())
                });
                let _ = reply.send(result);
            }
            ThreadOp::Fork {
                record,
                started_json,
                created_at_ms,
                source_id,
                before_turn,
                reply,
            } => {
                let thread_id = record.thread.id.clone();
                let result = self.in_own_transaction(Some(&thread_id), |conn, source| {
                    let copies =
                        ops::fork_copies(conn, &thread_id, &source_id, before_turn.as_deref())?;
                    let state = ThreadState::created(*record, started_json, created_at_ms);
                    source.threads.insert(thread_id.clone(), state);
                    log(conn, source, &thread_id, copies)?;
                    conn.block_on(reads::read_thread(&conn.client, &thread_id))?
                        .ok_or_else(|| StoreError::UnknownThread(thread_id.clone()))
                });
                let _ = reply.send(result);
            }
        }
    }
}

/// Logs `notifications` through the thread's state and writes its rows in
/// the operation's transaction.
fn log(
    conn: &Conn,
    source: StateSource<'_>,
    thread_id: &str,
    notifications: Vec<ServerNotification>,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let (state, rows) = source.get(thread_id)?;
    let events = ops::stage(rows, state, thread_id, notifications)?;
    conn.block_on(batch::write_thread(&conn.client, thread_id, state))?;
    Ok(events)
}

/// Deletes every row of the thread and records the deletion; refused while
/// a turn is in progress (its run would write into a thread that is gone).
fn delete(conn: &Conn, thread_id: &str) -> Result<(), StoreError> {
    let q = &conn.client;
    if !conn.block_on(reads::thread_exists(q, thread_id))? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    if let Some(row) = conn.block_on(q.opt_row(RUNNING_TURN, &[&thread_id]))? {
        return Err(ops::refused(
            "thread/delete",
            ReduceError::ClearWhileTurnActive {
                turn_id: row.try_get(0)?,
            },
        ));
    }
    for sql in DELETE_THREAD {
        conn.block_on(q.exec(sql, &[&thread_id]))?;
    }
    conn.block_on(q.exec(RECORD_DELETION, &[&thread_id, &now_ms()]))?;
    Ok(())
}

/// The thread's history cursor, if a provider holds its history.
pub(super) async fn read_history(
    q: &impl Query,
    thread_id: &str,
) -> Result<Option<StoredHistory>, StoreError> {
    const SQL: &str = "SELECT cursor, conversation_id FROM history_cursors WHERE thread_id = $1";
    let Some(row) = q.opt_row(SQL, &[&thread_id]).await? else {
        return Ok(None);
    };
    decode_history(&row, thread_id).map(Some)
}

/// When the thread was deleted, if it was.
pub(super) async fn deleted_at(q: &impl Query, thread_id: &str) -> Result<Option<i64>, StoreError> {
    const SQL: &str = "SELECT deleted_at_ms FROM deleted_threads WHERE id = $1";
    Ok(q.opt_row(SQL, &[&thread_id])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

/// The thread's records in the model's view after `after_ordinal`, and
/// those among `item_ids` at or before it, in ordinal order (rows here are
/// always current: no catching up from the log).
pub(super) async fn records_after(
    q: &impl Query,
    thread_id: &str,
    after_ordinal: u64,
    item_ids: &[String],
) -> Result<Vec<ItemRecord>, StoreError> {
    let mut records = Vec::new();
    for item_id in item_ids {
        if let Some(record) = read_item_in_view(q, thread_id, item_id).await?
            && record.ordinal <= after_ordinal
        {
            records.push(record);
        }
    }
    records.extend(read_after_ordinal(q, thread_id, after_ordinal).await?);
    if records.is_empty() && !reads::thread_exists(q, thread_id).await? {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    records.sort_by_key(|record| record.ordinal);
    records.dedup_by_key(|record| record.ordinal);
    Ok(records)
}

/// Records a running process group of `server_id`'s, in one statement
/// committed on its own: durable when answered. The row names the server:
/// only it can find the group on its machine.
pub(super) async fn process_started(
    q: &impl Query,
    server_id: &str,
    thread_id: &str,
    item_id: &str,
    pgid: u32,
    start_ticks: u64,
) -> Result<(), StoreError> {
    const SQL: &str = "INSERT INTO running_processes \
         (server_id, thread_id, item_id, pgid, start_ticks) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (thread_id, item_id) DO UPDATE SET server_id = excluded.server_id, \
         pgid = excluded.pgid, start_ticks = excluded.start_ticks";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] = [
        &server_id,
        &thread_id,
        &item_id,
        &i64::from(pgid),
        &sql_int(start_ticks),
    ];
    q.exec(SQL, &params).await?;
    Ok(())
}

/// Forgets a process group that ended.
pub(super) async fn process_ended(
    q: &impl Query,
    thread_id: &str,
    item_id: &str,
) -> Result<(), StoreError> {
    const SQL: &str = "DELETE FROM running_processes WHERE thread_id = $1 AND item_id = $2";
    q.exec(SQL, &[&thread_id, &item_id]).await?;
    Ok(())
}
