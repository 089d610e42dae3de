//! Requests a run waits on, and the state it resumes from.
//!
//! As in SQLite (`sqlite/writer/requests.rs`), each write runs in a
//! transaction of its own after what was pending is committed, so its
//! answer means "durable", and resolving checks and answers a request
//! under one row lock (`FOR UPDATE`): two answers cannot both win, and the
//! winner's `serverRequest/resolved` is logged in the answer's commit.

use serde_json::Value;
use spool_protocol::jsonrpc::RequestId;
use spool_protocol::{ServerNotification, ServerRequestResolvedNotification};

use super::batch;
use super::query::{CachedClient, Query};
use super::writer::{Conn, Writer};
use crate::codec::{decode_pending_request, encode};
use crate::error::StoreError;
use crate::thread_state::prepare::now_ms;
use crate::thread_state::rows::Rows;
use crate::thread_state::{Incoming, ThreadState};
use crate::types::{Appended, PendingRequest, ResolvedRequest, StoredRunState};
pub(crate) use crate::write_ops::RequestOp;

/// A `SELECT` of the columns `codec::decode_pending_request` reads.
macro_rules! select_requests {
    ($rest:literal) => {
        concat!(
            "SELECT request_id, thread_id, turn_id, item_id, request, created_at_ms, answer, \
             resolved_at_ms FROM pending_requests ",
            $rest
        )
    };
}

const INSERT_REQUEST: &str = "INSERT INTO pending_requests \
    (request_id, thread_id, turn_id, item_id, method, request, created_at_ms) \
    VALUES ($1, $2, $3, $4, $5, $6, $7)";
const LOCK_REQUEST: &str = select_requests!("WHERE request_id = $1 AND thread_id = $2 FOR UPDATE");
const RESOLVE_REQUEST: &str =
    "UPDATE pending_requests SET answer = $2, resolved_at_ms = $3 WHERE request_id = $1";
const UPSERT_RUN_STATE: &str = "INSERT INTO run_states (thread_id, turn_id, state, updated_at_ms) \
    VALUES ($1, $2, $3, $4) ON CONFLICT (thread_id, turn_id) \
    DO UPDATE SET state = excluded.state, updated_at_ms = excluded.updated_at_ms";
const DELETE_RUN_STATE: &str = "DELETE FROM run_states WHERE thread_id = $1 AND turn_id = $2";

impl Writer {
    pub(super) fn handle_request_op(&mut self, op: RequestOp) {
        match op {
            RequestOp::Open {
                request,
                run_state,
                reply,
            } => {
                let _ = reply.send(self.in_own_transaction(None, |conn, _| {
                    conn.block_on(open(&conn.client, &request, run_state.as_deref()))
                }));
            }
            RequestOp::Resolve {
                thread_id,
                request_id,
                answer,
                reply,
            } => {
                let resolved = self.in_own_transaction(Some(&thread_id), |conn, state| {
                    resolve(conn, state, &thread_id, &request_id, answer)
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
                let _ = reply.send(self.in_own_transaction(None, |conn, _| {
                    conn.block_on(
                        conn.client
                            .exec(UPSERT_RUN_STATE, &[&thread_id, &turn_id, &state, &now_ms()]),
                    )?;
                    Ok(())
                }));
            }
            RequestOp::ClearRunState {
                thread_id,
                turn_id,
                reply,
            } => {
                let _ = reply.send(self.in_own_transaction(None, |conn, _| {
                    conn.block_on(conn.client.exec(DELETE_RUN_STATE, &[&thread_id, &turn_id]))?;
                    Ok(())
                }));
            }
        }
    }
}

/// Resolves a request and logs it, inside the caller's transaction.
fn resolve(
    conn: &Conn,
    state: StateSource<'_>,
    thread_id: &str,
    request_id: &str,
    answer: Value,
) -> Result<ResolvedRequest, StoreError> {
    let q = &conn.client;
    let Some(row) = conn.block_on(q.opt_row(LOCK_REQUEST, &[&request_id, &thread_id]))? else {
        return Err(StoreError::UnknownRequest {
            thread_id: thread_id.to_owned(),
            request_id: request_id.to_owned(),
        });
    };
    let mut request = decode_pending_request(&row)?;
    if request.resolved_at_ms.is_some() {
        return Err(StoreError::RequestAlreadyResolved {
            request_id: request_id.to_owned(),
        });
    }
    let at_ms = now_ms();
    let answer_json = encode("request answer", &answer)?;
    conn.block_on(q.exec(RESOLVE_REQUEST, &[&request_id, &answer_json, &at_ms]))?;
    let notification =
        ServerNotification::ServerRequestResolved(ServerRequestResolvedNotification {
            thread_id: thread_id.to_owned(),
            request_id: RequestId::String(request_id.to_owned()),
        });
    let json = encode("notification", &notification)?;
    let (state, rows) = state.get(thread_id)?;
    let accepted = state
        .append(
            Some(rows),
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
    conn.block_on(batch::write_thread(q, thread_id, state))?;
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

/// Where an operation in its own transaction gets a thread's state.
pub(super) struct StateSource<'a> {
    pub(super) threads: &'a mut std::collections::HashMap<String, ThreadState>,
    pub(super) rows: &'a dyn Rows,
    /// Threads whose state the operation wrote: marked committed after
    /// the commit.
    pub(super) touched: &'a mut Vec<String>,
}

impl<'a> StateSource<'a> {
    /// The thread's state, loaded if it is not cached; noted as written.
    pub(super) fn get(
        self,
        thread_id: &str,
    ) -> Result<(&'a mut ThreadState, &'a dyn Rows), StoreError> {
        if !self.threads.contains_key(thread_id) {
            let state = ThreadState::load(self.rows, thread_id)?
                .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
            self.threads.insert(thread_id.to_owned(), state);
        }
        if !self.touched.iter().any(|id| id == thread_id) {
            self.touched.push(thread_id.to_owned());
        }
        let state = self
            .threads
            .get_mut(thread_id)
            .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
        Ok((state, self.rows))
    }
}

async fn open(
    q: &CachedClient,
    request: &PendingRequest,
    run_state: Option<&str>,
) -> Result<(), StoreError> {
    let request_json = encode("server request", &request.request)?;
    q.exec(
        INSERT_REQUEST,
        &[
            &request.request_id,
            &request.thread_id,
            &request.turn_id,
            &request.item_id,
            &request.request.method(),
            &request_json,
            &request.created_at_ms,
        ],
    )
    .await?;
    if let Some(state) = run_state {
        q.exec(
            UPSERT_RUN_STATE,
            &[&request.thread_id, &request.turn_id, &state, &now_ms()],
        )
        .await?;
    }
    Ok(())
}

/// The thread's requests still waiting for an answer, oldest first.
pub(super) async fn open_requests(
    q: &impl Query,
    thread_id: &str,
) -> Result<Vec<PendingRequest>, StoreError> {
    const SQL: &str = select_requests!(
        "WHERE thread_id = $1 AND resolved_at_ms IS NULL ORDER BY created_at_ms, request_id"
    );
    decode_all(q.rows(SQL, &[&thread_id]).await?)
}

/// Every request of the thread, oldest first.
pub(super) async fn all_requests(
    q: &impl Query,
    thread_id: &str,
) -> Result<Vec<PendingRequest>, StoreError> {
    const SQL: &str = select_requests!("WHERE thread_id = $1 ORDER BY created_at_ms, request_id");
    decode_all(q.rows(SQL, &[&thread_id]).await?)
}

/// One request of the thread, answered or not.
pub(super) async fn request(
    q: &impl Query,
    thread_id: &str,
    request_id: &str,
) -> Result<Option<PendingRequest>, StoreError> {
    const SQL: &str = select_requests!("WHERE request_id = $1 AND thread_id = $2");
    q.opt_row(SQL, &[&request_id, &thread_id])
        .await?
        .map(|row| decode_pending_request(&row))
        .transpose()
}

fn decode_all(rows: Vec<tokio_postgres::Row>) -> Result<Vec<PendingRequest>, StoreError> {
    rows.iter().map(decode_pending_request).collect()
}

/// The thread's resumable run states, oldest turn first.
pub(super) async fn run_states(
    q: &impl Query,
    thread_id: &str,
) -> Result<Vec<StoredRunState>, StoreError> {
    const SQL: &str = "SELECT r.turn_id, r.state, r.updated_at_ms FROM run_states r \
         JOIN turns t ON t.thread_id = r.thread_id AND t.turn_id = r.turn_id \
         WHERE r.thread_id = $1 ORDER BY t.ordinal";
    q.rows(SQL, &[&thread_id])
        .await?
        .iter()
        .map(|row| {
            Ok(StoredRunState {
                thread_id: thread_id.to_owned(),
                turn_id: row.try_get(0)?,
                state: row.try_get(1)?,
                updated_at_ms: row.try_get(2)?,
            })
        })
        .collect()
}
