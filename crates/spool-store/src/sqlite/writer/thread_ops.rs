//! Reshaping a thread as a whole: archiving it, reverting its latest
//! turns, forking it into a new thread.
//!
//! Like a pop (`pop.rs`), each commits what is pending first and then runs
//! in a transaction of its own, so the check (no turn in progress, which
//! items a turn holds) and the events that depend on it happen under one
//! write lock, and the answer means "durable". Nothing is rewritten:
//!
//! - archiving logs `thread/archived`; unarchiving only clears the
//!   thread row's flag (the protocol has no event for it yet);
//! - a revert logs `item/removed` for every item of the reverted turns,
//!   all or nothing; the log keeps their history, the projections drop
//!   them;
//! - a fork creates the new thread and logs, in its own log, a copy of
//!   each finished turn of the source: `turn/started`, each item as
//!   `item/started` + `item/completed`, `turn/completed`. The source is
//!   only read.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};
use spool_core::{ItemRecord, ReduceError, TurnRecord};
use spool_protocol::{
    ItemCompletedNotification, ItemRemovedNotification, ItemStartedNotification, ItemStatus,
    ServerNotification, ThreadArchivedNotification, ThreadEvent, ThreadRevertedNotification,
    ThreadStatus, ThreadStatusChangedNotification, ThreadUnarchivedNotification, Turn,
    TurnCompletedNotification, TurnStartedNotification, TurnStatus,
};

use super::requests::fresh_state;
use super::{Incoming, Reply, Threads, Writer, batch, held};
use crate::error::StoreError;
use crate::sqlite::codec::encode;
use crate::sqlite::reads::{read_items, read_thread, read_turns, thread_exists};
use crate::thread_state::ThreadState;
use crate::thread_state::prepare::now_ms;
use crate::types::{Appended, ThreadRecord};

const SET_HISTORY: &str = "INSERT OR REPLACE INTO history_cursors \
     (thread_id, cursor, conversation_id) VALUES (?1, ?2, ?3)";

/// Thread-wide operations (see the module docs).
pub(crate) enum ThreadOp {
    /// Archives (logging `thread/archived`) or unarchives a thread.
    SetArchived {
        thread_id: String,
        archived: bool,
        reply: Reply<Vec<ThreadEvent>>,
    },
    /// Removes the thread and everything of it, leaving its id in
    /// `deleted_threads`.
    Delete { thread_id: String, reply: Reply<()> },
    /// Removes `first_turn_id` and every later turn from the history.
    Revert {
        thread_id: String,
        first_turn_id: String,
        reply: Reply<Vec<ThreadEvent>>,
    },
    /// Records what the provider holds of the thread's history.
    SetHistory {
        thread_id: String,
        cursor_json: String,
        conversation_id: Option<String>,
        reply: Reply<()>,
    },
    /// Creates `record`'s thread holding a copy of the source's finished
    /// turns before `before_turn` (all of them when `None`).
    Fork {
        record: Box<ThreadRecord>,
        started_json: String,
        created_at_ms: i64,
        source_id: String,
        before_turn: Option<String>,
        reply: Reply<ThreadRecord>,
    },
}

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

/// Appends `notifications` to a thread whose state is fresh, writes them
/// with the thread's projections, and returns the logged events.
fn log(
    tx: &Connection,
    state: &mut ThreadState,
    thread_id: &str,
    notifications: Vec<ServerNotification>,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let incoming = notifications
        .into_iter()
        .map(|notification| {
            let json = encode("notification", &notification)?;
            Ok(Incoming {
                notification,
                json: Some(json),
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let accepted = state
        .append(Some(tx), thread_id, incoming, now_ms())
        .map_err(|refusal| refusal.error)?;
    batch::write_thread(tx, thread_id, state)?;
    state.committed();
    Ok(accepted
        .appended
        .into_iter()
        .filter_map(|appended| match appended {
            Appended::Logged(event) => Some(event),
            Appended::Transient(_) => None,
        })
        .collect())
}

fn set_archived(
    tx: &Transaction<'_>,
    threads: &mut Threads,
    thread_id: &str,
    archived: bool,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let current: Option<bool> = tx
        .prepare_cached("SELECT archived FROM threads WHERE id = ?1")?
        .query_row((thread_id,), |row| row.get(0))
        .optional()?;
    let Some(current) = current else {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    };
    if current == archived {
        return Ok(Vec::new());
    }
    let state = fresh_state(tx, threads, thread_id)?;
    let thread_id_owned = thread_id.to_owned();
    let notifications = if archived {
        // An archived thread is put away: not loaded, as Codex says it.
        vec![
            ServerNotification::ThreadArchived(ThreadArchivedNotification {
                thread_id: thread_id_owned.clone(),
            }),
            ServerNotification::ThreadStatusChanged(ThreadStatusChangedNotification {
                thread_id: thread_id_owned,
                status: ThreadStatus::NotLoaded,
            }),
        ]
    } else {
        vec![ServerNotification::ThreadUnarchived(
            ThreadUnarchivedNotification {
                thread_id: thread_id_owned,
            },
        )]
    };
    log(tx, state, thread_id, notifications)
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
            "SELECT turn_id FROM turns WHERE thread_id = ?1 AND status = 'inProgress' LIMIT 1",
        )?
        .query_row((thread_id,), |row| row.get(0))
        .optional()?;
    if let Some(turn_id) = running {
        return Err(refused(
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
        "items",
        "turns",
        "events",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE thread_id = ?1"),
            (thread_id,),
        )?;
    }
    tx.execute("DELETE FROM threads WHERE id = ?1", (thread_id,))?;
    tx.prepare_cached(
        "INSERT OR REPLACE INTO deleted_threads (id, deleted_at_ms) VALUES (?1, ?2)",
    )?
    .execute((thread_id, now_ms()))?;
    Ok(())
}

/// A refusal of a whole-thread operation, in the reducer's words.
fn refused(method: &'static str, source: ReduceError) -> StoreError {
    StoreError::Refused {
        index: 0,
        method,
        source,
    }
}

fn find_turn<'a>(
    turns: &'a [TurnRecord],
    turn_id: &str,
    method: &'static str,
) -> Result<&'a TurnRecord, StoreError> {
    turns.iter().find(|turn| turn.id == turn_id).ok_or_else(|| {
        refused(
            method,
            ReduceError::UnknownTurnEvent {
                method,
                turn_id: turn_id.to_owned(),
            },
        )
    })
}

fn revert(
    tx: &Transaction<'_>,
    threads: &mut Threads,
    thread_id: &str,
    first_turn_id: &str,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let state = fresh_state(tx, threads, thread_id)?;
    if let Some(active) = state.reducer.active_turn() {
        return Err(refused(
            "item/removed",
            ReduceError::ClearWhileTurnActive {
                turn_id: active.id.clone(),
            },
        ));
    }
    let turns = read_turns(tx, thread_id, false)?;
    let first = find_turn(&turns, first_turn_id, "item/removed")?.ordinal;
    let reverted: Vec<&str> = turns
        .iter()
        .filter(|turn| turn.ordinal >= first)
        .map(|turn| turn.id.as_str())
        .collect();
    let mut removals: Vec<ServerNotification> = read_items(tx, thread_id, false)?
        .into_iter()
        .filter(|record| reverted.contains(&record.turn_id.as_str()))
        .map(|record| {
            ServerNotification::ItemRemoved(ItemRemovedNotification {
                thread_id: thread_id.to_owned(),
                turn_id: record.turn_id.clone(),
                item_id: record.item.id().to_owned(),
            })
        })
        .collect();
    if removals.is_empty() {
        return Ok(Vec::new());
    }
    removals.push(ServerNotification::ThreadReverted(
        ThreadRevertedNotification {
            thread_id: thread_id.to_owned(),
        },
    ));
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
    if !thread_exists(tx, source_id)? {
        return Err(StoreError::UnknownThread(source_id.to_owned()));
    }
    if thread_exists(tx, &thread_id)? {
        return Err(StoreError::ThreadExists(thread_id));
    }
    let turns = read_turns(tx, source_id, false)?;
    let end = match before_turn {
        Some(turn_id) => find_turn(&turns, turn_id, "turn/started")?.ordinal,
        None => u64::MAX,
    };
    let items = read_items(tx, source_id, false)?;
    let mut copies = Vec::new();
    for turn in turns.iter().filter(|turn| turn.ordinal < end) {
        // A turn in progress is not history yet, and neither is what follows.
        if !turn.status.is_terminal() {
            break;
        }
        let of_turn: Vec<&ItemRecord> = items.iter().filter(|r| r.turn_id == turn.id).collect();
        // A turn whose items were all removed (reverted) is no history.
        if of_turn.is_empty() {
            continue;
        }
        copy_turn(&thread_id, turn, &of_turn, &mut copies);
    }
    let mut state = ThreadState::created(record, started_json, created_at_ms);
    log(tx, &mut state, &thread_id, copies)?;
    Ok(state)
}

/// The events of `turn` with its finished items, as a new thread logs them.
fn copy_turn(
    thread_id: &str,
    turn: &TurnRecord,
    items: &[&ItemRecord],
    out: &mut Vec<ServerNotification>,
) {
    let mut started = Turn::new(turn.id.clone(), TurnStatus::InProgress);
    started.started_at = turn.started_at;
    out.push(ServerNotification::TurnStarted(TurnStartedNotification {
        thread_id: thread_id.to_owned(),
        turn: started,
    }));
    for record in items {
        let mut open = record.envelope.clone();
        open.status = ItemStatus::InProgress;
        open.completed_at_ms = None;
        out.push(ServerNotification::ItemStarted(ItemStartedNotification {
            item: record.item.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn.id.clone(),
            started_at_ms: record.envelope.started_at_ms,
            envelope: Some(open),
        }));
        let mut done = record.envelope.clone();
        if !done.status.is_terminal() {
            done.status = ItemStatus::Incomplete;
        }
        out.push(ServerNotification::ItemCompleted(
            ItemCompletedNotification {
                item: record.item.clone(),
                thread_id: thread_id.to_owned(),
                turn_id: turn.id.clone(),
                completed_at_ms: done.completed_at_ms.unwrap_or_default(),
                envelope: Some(done),
            },
        ));
    }
    out.push(ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: thread_id.to_owned(),
            turn: turn.to_turn(Vec::new()),
        },
    ));
}
