//! Reshaping a thread as a whole on SQLite: archiving it, reverting its
//! latest turns, forking it, deleting it, recording its provider history.
//! What each logs is `thread_state::ops`'s business; here each commits
//! what is pending first and then runs in a transaction of its own
//! (`BEGIN IMMEDIATE`), so the check and the events that depend on it
//! happen under one write lock, and the answer means "durable".

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior};
use spool_core::ReduceError;
use spool_protocol::{ServerNotification, ThreadEvent};

use super::requests::fresh_state;
use super::{Threads, Writer, batch, held};
use crate::error::StoreError;
use crate::sqlite::keys;
use crate::sqlite::reads::{read_thread, thread_exists};
use crate::thread_state::prepare::now_ms;
use crate::thread_state::{ThreadState, ops};
use crate::types::ThreadRecord;
pub(crate) use crate::write_ops::ThreadOp;

const SET_HISTORY: &str = "INSERT OR REPLACE INTO history_cursors \
     (thread_id, cursor, conversation_id) VALUES (?1, ?2, ?3)";

impl Writer {
    pub(super) fn handle_thread_op(&mut self, op: ThreadOp) {
        match op {
            ThreadOp::SetArchived {
                thread_id,
                archived,
                reply,
            } => {
                let result = self.in_thread_transaction(&thread_id, |tx, threads| {
                    set_archived(tx, threads, &thread_id, archived)
                });
                let _ = reply.send(result);
            }
            ThreadOp::Delete { thread_id, reply } => {
                let result = self.in_thread_transaction(&thread_id, |tx, threads| {
                    threads.remove(&thread_id);
                    delete(tx, &thread_id)
                });
                // A deletion can lower the highest rowid the mark holds.
                self.mark.committed(held(&self.conn), true);
                let _ = reply.send(result);
            }
            ThreadOp::Revert {
                thread_id,
                first_turn_id,
                reply,
            } => {
                let result = self.in_thread_transaction(&thread_id, |tx, threads| {
                    revert(tx, threads, &thread_id, &first_turn_id)
                });
                let _ = reply.send(result);
            }
            ThreadOp::SetHistory {
                thread_id,
                cursor_json,
                conversation_id,
                reply,
            } => {
                // After the commit of everything pending: the cursor never
                // covers a record that a crash could still take back.
                let result = self.in_thread_transaction(&thread_id, |tx, _| {
                    if !thread_exists(tx, &thread_id)? {
                        return Err(StoreError::UnknownThread(thread_id.clone()));
                    }
                    tx.prepare_cached(SET_HISTORY)?.execute((
                        &thread_id,
                        &cursor_json,
                        &conversation_id,
                    ))?;
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
                let result = self.in_thread_transaction(&thread_id, |tx, threads| {
                    let state = fork(
                        tx,
                        *record,
                        started_json,
                        created_at_ms,
                        &source_id,
                        before_turn.as_deref(),
                    )?;
                    threads.insert(thread_id.clone(), state);
                    read_thread(tx, &thread_id)?
                        .ok_or_else(|| StoreError::UnknownThread(thread_id.clone()))
                });
                let _ = reply.send(result);
            }
        }
    }

    /// Commits what is pending, then runs `work` in a transaction of its
    /// own. On failure the thread's cached state is dropped (whatever it
    /// took in was not committed) and reloads when next used.
    fn in_thread_transaction<T>(
        &mut self,
        thread_id: &str,
        work: impl FnOnce(&Transaction<'_>, &mut Threads) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.commit().map_err(StoreError::Commit)?;
        let result = (|| {
            let tx = Transaction::new_unchecked(held(&self.conn), TransactionBehavior::Immediate)?;
            let value = work(&tx, &mut self.threads)?;
            tx.commit()?;
            Ok(value)
        })();
        if result.is_err() {
            self.threads.remove(thread_id);
        }
        result
    }
}

fn set_archived(
    tx: &Transaction<'_>,
    threads: &mut Threads,
    thread_id: &str,
    archived: bool,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let Some(notifications) = ops::archive(&**tx, thread_id, archived)? else {
        return Ok(Vec::new());
    };
    let state = fresh_state(tx, threads, thread_id)?;
    log(tx, state, thread_id, notifications)
}

/// Logs `notifications` through the thread's (fresh) state and writes its
/// rows in the transaction.
fn log(
    tx: &Transaction<'_>,
    state: &mut ThreadState,
    thread_id: &str,
    notifications: Vec<ServerNotification>,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let events = ops::stage(&**tx, state, thread_id, notifications)?;
    batch::write_thread(tx, thread_id, state)?;
    state.committed();
    Ok(events)
}

fn revert(
    tx: &Transaction<'_>,
    threads: &mut Threads,
    thread_id: &str,
    first_turn_id: &str,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let state = fresh_state(tx, threads, thread_id)?;
    let removals = ops::revert(&**tx, state, thread_id, first_turn_id)?;
    if removals.is_empty() {
        return Ok(Vec::new());
    }
    log(tx, state, thread_id, removals)
}

fn fork(
    tx: &Transaction<'_>,
    record: ThreadRecord,
    started_json: String,
    created_at_ms: i64,
    source_id: &str,
    before_turn: Option<&str>,
) -> Result<ThreadState, StoreError> {
    let thread_id = record.thread.id.clone();
    let copies = ops::fork_copies(&**tx, &thread_id, source_id, before_turn)?;
    let mut state = ThreadState::created(record, started_json, created_at_ms);
    log(tx, &mut state, &thread_id, copies)?;
    Ok(state)
}

/// Deletes every row of the thread, children first (the foreign keys),
/// and records the deletion. A turn in progress is refused: its run would
/// write into a thread that is gone.
fn delete(tx: &Transaction<'_>, thread_id: &str) -> Result<(), StoreError> {
    let exists: Option<i64> = tx
        .prepare_cached("SELECT 1 FROM threads WHERE id = ?1")?
        .query_row((thread_id,), |row| row.get(0))
        .optional()?;
    if exists.is_none() {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    }
    let running: Option<String> = tx
        .prepare_cached(
            "SELECT turn_id FROM items WHERE thread_id = ?1 AND is_turn = 1 \
             AND status = 'inProgress' LIMIT 1",
        )?
        .query_row((thread_id,), |row| row.get(0))
        .optional()?;
    if let Some(turn_id) = running {
        return Err(ops::refused(
            "thread/delete",
            ReduceError::ClearWhileTurnActive { turn_id },
        ));
    }
    for table in [
        "pending_requests",
        "run_states",
        "seq_reservations",
        "running_processes",
        "history_cursors",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE thread_id = ?1"),
            (thread_id,),
        )?;
    }
    // By their keys, while the thread's row still gives them: its items
    // and its turns.
    tx.execute(
        concat!("DELETE FROM items WHERE ", keys::of_thread!()),
        (thread_id,),
    )?;
    tx.execute(
        concat!("DELETE FROM events WHERE ", keys::of_thread!()),
        (thread_id,),
    )?;
    tx.execute("DELETE FROM threads WHERE id = ?1", (thread_id,))?;
    tx.prepare_cached(
        "INSERT OR REPLACE INTO deleted_threads (id, deleted_at_ms) VALUES (?1, ?2)",
    )?
    .execute((thread_id, now_ms()))?;
    Ok(())
}
