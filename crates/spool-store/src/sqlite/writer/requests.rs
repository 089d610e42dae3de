//! Requests a run waits on, and the state it resumes from.
//!
//! Like a pop (`pop.rs`), each of these commits what is pending first and
//! then runs in a transaction of its own, so its answer means "durable" and
//! a check and the write that depends on it happen under one write lock:
//! two answers to one request cannot both win, and the winner's
//! `serverRequest/resolved` is logged in the same commit as the answer.

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior};
use serde_json::Value;
use spool_protocol::jsonrpc::RequestId;
use spool_protocol::{ServerNotification, ServerRequestResolvedNotification};

use super::{Incoming, Threads, Writer, batch, held};
use crate::error::StoreError;
use crate::sqlite::codec::{encode, sql_int};
use crate::sqlite::keys::LAST_SEQ;
use crate::sqlite::requests_read::decode_pending_request;
use crate::thread_state::ThreadState;
use crate::thread_state::prepare::now_ms;
use crate::thread_state::rows::Rows;
use crate::types::{Appended, PendingRequest, ResolvedRequest};
pub(crate) use crate::write_ops::RequestOp;

const INSERT_REQUEST: &str = "INSERT INTO pending_requests \
    (request_id, thread_id, turn_id, item_id, method, request, created_at_ms) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const SELECT_REQUEST: &str = "SELECT request_id, thread_id, turn_id, item_id, request, \
    created_at_ms, answer, resolved_at_ms FROM pending_requests \
    WHERE request_id = ?1 AND thread_id = ?2";
const RESOLVE_REQUEST: &str =
    "UPDATE pending_requests SET answer = ?2, resolved_at_ms = ?3 WHERE request_id = ?1";
const UPSERT_RUN_STATE: &str = "INSERT INTO run_states (thread_id, turn_id, state, updated_at_ms) \
    VALUES (?1, ?2, ?3, ?4) ON CONFLICT (thread_id, turn_id) \
    DO UPDATE SET state = excluded.state, updated_at_ms = excluded.updated_at_ms";
const DELETE_RUN_STATE: &str = "DELETE FROM run_states WHERE thread_id = ?1 AND turn_id = ?2";

impl Writer {
    pub(super) fn handle_request_op(&mut self, op: RequestOp) {
        match op {
            RequestOp::Open {
                request,
                run_state,
                reply,
            } => {
                let _ = reply.send(
                    self.in_own_transaction(|tx, _| open(tx, &request, run_state.as_deref())),
                );
            }
            RequestOp::Resolve {
                thread_id,
                request_id,
                answer,
                reply,
            } => {
                let resolved = self.in_own_transaction(|tx, threads| {
                    resolve(tx, threads, &thread_id, &request_id, answer)
                });
                if resolved.is_err() {
                    // Whatever the state took in was not committed.
                    self.threads.remove(&thread_id);
                }
                let _ = reply.send(resolved);
            }
            RequestOp::SaveRunState {
                thread_id,
                turn_id,
                state,
                reply,
            } => {
                let _ = reply.send(self.in_own_transaction(|tx, _| {
                    tx.prepare_cached(UPSERT_RUN_STATE)?.execute((
                        &thread_id,
                        &turn_id,
                        &state,
                        now_ms(),
                    ))?;
                    Ok(())
                }));
            }
            RequestOp::ClearRunState {
                thread_id,
                turn_id,
                reply,
            } => {
                let _ = reply.send(self.in_own_transaction(|tx, _| {
                    tx.prepare_cached(DELETE_RUN_STATE)?
                        .execute((&thread_id, &turn_id))?;
                    Ok(())
                }));
            }
        }
    }

    /// Commits what is pending, then runs `work` in a transaction of its
    /// own and commits it.
    fn in_own_transaction<T>(
        &mut self,
        work: impl FnOnce(&Transaction<'_>, &mut Threads) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.commit().map_err(StoreError::Commit)?;
        let tx = Transaction::new_unchecked(held(&self.conn), TransactionBehavior::Immediate)?;
        let value = work(&tx, &mut self.threads)?;
        tx.commit()?;
        Ok(value)
    }
}

fn resolve(
    tx: &Transaction<'_>,
    threads: &mut Threads,
    thread_id: &str,
    request_id: &str,
    answer: Value,
) -> Result<ResolvedRequest, StoreError> {
    let found = tx
        .prepare_cached(SELECT_REQUEST)?
        .query_row((request_id, thread_id), |row| {
            Ok(decode_pending_request(row))
        })
        .optional()?;
    let Some(found) = found else {
        return Err(StoreError::UnknownRequest {
            thread_id: thread_id.to_owned(),
            request_id: request_id.to_owned(),
        });
    };
    let mut request = found?;
    if request.resolved_at_ms.is_some() {
        return Err(StoreError::RequestAlreadyResolved {
            request_id: request_id.to_owned(),
        });
    }
    let at_ms = now_ms();
    let answer_json = encode("request answer", &answer)?;
    tx.prepare_cached(RESOLVE_REQUEST)?
        .execute((request_id, &answer_json, at_ms))?;
    let notification =
        ServerNotification::ServerRequestResolved(ServerRequestResolvedNotification {
            thread_id: thread_id.to_owned(),
            request_id: RequestId::String(request_id.to_owned()),
        });
    let json = encode("notification", &notification)?;
    let state = fresh_state(tx, threads, thread_id)?;
    let accepted = state
        .append(
            Some(&**tx as &dyn Rows),
            thread_id,
            vec![Incoming {
                notification,
                json: Some(json),
                born: false,
            }],
            at_ms,
            true,
        )
        .map_err(|refusal| refusal.error)?;
    batch::write_thread(tx, thread_id, state)?;
    state.committed();
    request.answer = Some(answer);
    request.resolved_at_ms = Some(at_ms);
    let Some(Appended::Logged(event)) = accepted.appended.into_iter().next() else {
        return Err(StoreError::StateLost {
            thread_id: thread_id.to_owned(),
            reason: "serverRequest/resolved was not logged".to_owned(),
        });
    };
    Ok(ResolvedRequest { request, event })
}

/// The thread's cached state, reloaded if it is not cached or another
/// store's writer moved the thread on since it was.
pub(super) fn fresh_state<'a>(
    tx: &Transaction<'_>,
    threads: &'a mut Threads,
    thread_id: &str,
) -> Result<&'a mut ThreadState, StoreError> {
    // `max` answers NULL for a thread without events: an unknown one.
    let last_seq: Option<i64> = tx
        .prepare_cached(LAST_SEQ)?
        .query_row((thread_id,), |row| row.get(0))?;
    let Some(last_seq) = last_seq else {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    };
    let cached = threads
        .get(thread_id)
        .map(|s| sql_int(s.reducer.last_seq()));
    if cached != Some(last_seq) {
        let state = ThreadState::load(&**tx, thread_id)?
            .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
        threads.insert(thread_id.to_owned(), state);
    }
    threads
        .get_mut(thread_id)
        .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))
}

fn open(
    tx: &Transaction<'_>,
    request: &PendingRequest,
    run_state: Option<&str>,
) -> Result<(), StoreError> {
    let request_json = encode("server request", &request.request)?;
    tx.prepare_cached(INSERT_REQUEST)?.execute((
        &request.request_id,
        &request.thread_id,
        &request.turn_id,
        &request.item_id,
        request.request.method(),
        &request_json,
        request.created_at_ms,
    ))?;
    if let Some(state) = run_state {
        tx.prepare_cached(UPSERT_RUN_STATE)?.execute((
            &request.thread_id,
            &request.turn_id,
            state,
            now_ms(),
        ))?;
    }
    Ok(())
}
