//! The single writer: the write connection and the threads' states, behind
//! a lock, run by a plain std thread that takes requests from a channel —
//! or, for an append whose caller finds it idle, by that caller
//! (`shared.rs`). Either way one request runs at a time, in arrival order.
//!
//! Group commit: the writer takes one request, then drains whatever else is
//! queued (what arrived while it was busy, typically while the previous
//! commit was syncing) and covers it all with one `BEGIN IMMEDIATE`
//! transaction, so concurrent appenders share fsyncs. Each caller is
//! answered after the commit that covers its write, except:
//!
//! - an append of deltas only (and transient events) is answered as soon as
//!   its seqs are assigned: deltas are streamed at once and committed by
//!   the next commit, which comes at the latest `delta_commit_delay` after
//!   the first uncommitted one, or sooner with the next lifecycle event,
//!   `flush`, or a full batch. Their seqs must lie within the thread's
//!   committed reservation (`thread_state/reserve.rs`), else they wait for the commit
//!   like a lifecycle event: a seq a client saw is never given to another
//!   event, even after a crash;
//! - a refused append is answered at once with the refusal;
//! - a pop (removal of a thread's newest item, see `pop.rs`) commits what
//!   is pending first and then runs in a transaction of its own, because
//!   choosing the item and logging its removal must happen under one write
//!   lock.
//!
//! Order is preserved: events are committed in the order their seqs were
//! assigned, and a commit covers everything assigned before it.
//!
//! The group commit's `COMMIT` runs on the commit thread (`commit.rs`)
//! while the writer goes on giving deltas their seqs (`lend.rs`); commits
//! that a caller waits for inside a request (a pop, a thread operation,
//! closing) run on the writer itself. The idle writer also lends the
//! connection there for the catch-up after a checkpoint (`checkpoint.rs`).

mod batch;
mod checkpoint;
mod commit;
#[cfg(test)]
mod door;
mod lend;
#[cfg(test)]
mod lent_tests;
mod multi_row;
mod pop;
mod processes;
mod rank;
mod requests;
mod rows;
mod shared;
mod slice;
#[cfg(test)]
mod slice_tests;
#[cfg(test)]
mod test_events;
#[cfg(test)]
mod tests;
mod thread_ops;
mod worker;

pub(crate) use self::processes::ProcessOp;
pub(crate) use self::requests::RequestOp;
pub(crate) use self::shared::Shared;
pub(crate) use self::thread_ops::ThreadOp;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) use crate::thread_state::prepare::now_ms;

use crate::thread_state::rows::Rows;
use rusqlite::Connection;
use spool_core::ItemRecord;

use super::reads::thread_exists;
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::phases::{Phase, Timer};
pub(crate) use crate::thread_state::Incoming;
use crate::thread_state::ThreadState;
use crate::thread_state::pending::Pending;
use crate::types::{Appended, ThreadRecord};

pub(crate) use crate::write_ops::Reply;

/// What the store asks of the writer.
pub(crate) enum Request {
    Create {
        /// `last_seq` is 1: `thread/started`. Boxed: creations are rare and
        /// every request is as large as the largest.
        record: Box<ThreadRecord>,
        /// The `thread/started` notification, encoded.
        started_json: String,
        created_at_ms: i64,
        reply: Reply<ThreadRecord>,
    },
    Append {
        thread_id: String,
        events: Vec<Incoming>,
        /// Answer with what was appended (else with nothing).
        echo: bool,
        reply: Reply<Vec<Appended>>,
    },
    /// Removes the newest item in the model's view of the thread and
    /// answers with it (`None`: the thread has no such item).
    PopNewest {
        thread_id: String,
        reply: Reply<Option<ItemRecord>>,
    },
    CacheTokenCounts {
        thread_id: String,
        counts: Vec<TokenCount>,
    },
    Flush {
        reply: Reply<()>,
    },
    /// Pending requests and run states (`requests.rs`).
    Requests(RequestOp),
    /// Archive, revert, fork (`thread_ops.rs`).
    Threads(ThreadOp),
    /// Commands running for items (`processes.rs`).
    Processes(ProcessOp),
    Close {
        reply: Reply<()>,
    },
    /// Nothing to do: a caller that ran a request on the idle writer left
    /// a batch to commit by its deadline, which the sleeping thread must
    /// learn.
    Wake,
    /// Every handle on the store is gone: commit what was accepted and
    /// stop. (The end of the channel cannot say so: the commit thread
    /// holds a sender to answer with.)
    Stop,
    /// The connection back from the commit thread, with how its `COMMIT`
    /// went (`commit.rs`).
    Committed {
        conn: Box<Connection>,
        result: Result<(), rusqlite::Error>,
    },
}

pub(crate) use crate::view_read::TokenCount;

/// A started writer.
pub(crate) struct Spawned {
    /// Its inbox.
    pub(crate) requests: Sender<Request>,
    /// Its thread, which ends after `Request::Stop` or `Close`.
    pub(crate) thread: JoinHandle<()>,
    /// Its state, which callers that find it idle run (`shared.rs`).
    pub(crate) shared: Arc<Shared>,
}

/// Starts the writer thread on `conn`.
pub(crate) fn spawn(
    mut conn: Connection,
    path: &std::path::Path,
    options: &StoreOptions,
) -> Result<Spawned, StoreError> {
    let (requests, inbox) = std::sync::mpsc::channel();
    let writer = Writer {
        checkpointer: checkpoint::Checkpointer::start(path, &mut conn)?,
        committer: commit::Committer::start(requests.clone())?,
        conn: Some(conn),
        in_flight: None,
        deferred: lend::Deferred::default(),
        rebuilds: Vec::new(),
        mark: crate::mark::CommitMark::new(path),
        delta_commit_delay: options.delta_commit_delay,
        max_batch_events: options.max_batch_events.max(1),
        cached_threads: options.cached_threads,
        threads: Threads::default(),
        batch: Batch::default(),
        lone_caller: true,
    };
    let shared = Arc::new(Shared::new(writer));
    let on_thread = shared.clone();
    let handle = std::thread::Builder::new()
        .name("spool-store-writer".to_owned())
        .spawn(move || shared::run(&on_thread, inbox))
        .map_err(StoreError::WriterThread)?;
    Ok(Spawned {
        requests,
        thread: handle,
        shared,
    })
}

struct Writer {
    /// Declared before `conn`, so it stops first: the writer's connection
    /// is then the file's last, whose closing checkpoints and removes the
    /// WAL.
    checkpointer: checkpoint::Checkpointer,
    committer: commit::Committer,
    /// `None` while the commit thread holds it (`lend.rs`): use it through
    /// [`held`], only where requests run that wait for its return.
    conn: Option<Connection>,
    /// The batch whose `COMMIT` the commit thread runs.
    in_flight: Option<Batch>,
    /// Requests that came while the connection was lent and need it (or
    /// came after one they must follow), in arrival order (`lend.rs`).
    deferred: lend::Deferred,
    /// Threads whose reducer a refusal left dirty while the connection was
    /// lent: rebuilt when it is back, before anything else of theirs.
    rebuilds: Vec<String>,
    /// What is committed, kept outside the WAL (`mark.rs`).
    mark: crate::mark::CommitMark,
    delta_commit_delay: Duration,
    max_batch_events: usize,
    cached_threads: usize,
    threads: Threads,
    batch: Batch,
    /// Whether the last commit answered one caller at most: callers come
    /// one at a time, and one that finds the writer idle may run its
    /// request itself (`shared.rs`).
    lone_caller: bool,
}

/// The writer's cached thread states, by thread id, hashed with foldhash:
/// a thread is looked up several times an append, and std's SipHash cost
/// ~800 instructions more a one-item `add_items` (callgrind). The seed is
/// random, as the reducer's is: thread ids come from callers.
type Threads = HashMap<String, ThreadState, foldhash::fast::RandomState>;

/// Everything accepted since the last commit.
#[derive(Default)]
struct Batch {
    /// Threads with pending changes, each once.
    dirty_threads: Vec<String>,
    events: usize,
    token_counts: Vec<(String, Vec<TokenCount>)>,
    /// Callers answered when the batch commits.
    waiters: Vec<Waiter>,
    /// When the first uncommitted change was accepted.
    opened_at: Option<Instant>,
    /// When its rows were written, for the log's commit time.
    written_at: Option<Instant>,
    /// The threads' pending changes once written: dropped with the batch,
    /// after its waiters are answered (a 100-item `add_items` owns each
    /// item's completion until then).
    spent: Vec<Pending>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.dirty_threads.is_empty() && self.token_counts.is_empty()
    }

    fn note_change(&mut self) {
        self.opened_at.get_or_insert_with(Instant::now);
    }
}

enum Waiter {
    Append(Reply<Vec<Appended>>, Vec<Appended>),
    Create(Reply<ThreadRecord>, Box<ThreadRecord>),
    Flush(Reply<()>),
}

enum Flow {
    Continue,
    Stop,
}

impl Writer {
    /// The store is closing: makes what was accepted durable and leaves
    /// no seq reservation behind.
    fn shut_down(&mut self) -> Result<(), Arc<StoreError>> {
        self.flush_updated_at(false);
        self.release_reservations();
        let result = self.commit();
        self.mark.committed(held(&self.conn), true);
        tracing::debug!("store writer stopped");
        result
    }

    /// Whether another thread may stream while a commit runs: at least two
    /// cached threads have a turn in progress. (A closed turn is forgotten
    /// by the writer's reducers, so each looks at its open turns alone.)
    fn others_may_stream(&self) -> bool {
        let mut active = self
            .threads
            .values()
            .filter(|state| state.reducer.active_turn().is_some());
        active.next().is_some() && active.next().is_some()
    }

    /// When the pending batch must be committed even if nothing else comes.
    fn deadline(&self) -> Option<Instant> {
        self.batch
            .opened_at
            .map(|opened| opened + self.delta_commit_delay)
    }

    fn handle(&mut self, request: Request) -> Flow {
        match request {
            Request::Create {
                record,
                started_json,
                created_at_ms,
                reply,
            } => self.create(record, started_json, created_at_ms, reply),
            Request::Append {
                thread_id,
                events,
                echo,
                reply,
            } => {
                let timer = Timer::start();
                self.append(thread_id, events, echo, reply);
                timer.stop(Phase::Apply);
            }
            Request::PopNewest { thread_id, reply } => {
                let _ = reply.send(self.pop_newest(&thread_id));
            }
            Request::CacheTokenCounts { thread_id, counts } => {
                if !counts.is_empty() {
                    self.batch.token_counts.push((thread_id, counts));
                    self.batch.note_change();
                }
            }
            Request::Requests(op) => self.handle_request_op(op),
            Request::Processes(op) => self.handle_process_op(op),
            Request::Threads(op) => self.handle_thread_op(op),
            Request::Flush { reply } => {
                if self.batch.is_empty() {
                    let _ = reply.send(Ok(()));
                } else {
                    self.batch.waiters.push(Waiter::Flush(reply));
                }
            }
            Request::Close { reply } => {
                let _ = reply.send(self.shut_down().map_err(StoreError::Commit));
                return Flow::Stop;
            }
            Request::Wake => {}
            Request::Stop => {
                let _ = self.shut_down();
                return Flow::Stop;
            }
            // `take` handles it before it gets here.
            Request::Committed { conn, result } => {
                return self.take(Request::Committed { conn, result });
            }
        }
        Flow::Continue
    }

    fn create(
        &mut self,
        record: Box<ThreadRecord>,
        started_json: String,
        created_at_ms: i64,
        reply: Reply<ThreadRecord>,
    ) {
        let thread_id = record.thread.id.clone();
        let exists = match self.threads.contains_key(&thread_id) {
            true => Ok(true),
            false => thread_exists(held(&self.conn), &thread_id),
        };
        match exists {
            Ok(false) => {}
            Ok(true) => {
                let _ = reply.send(Err(StoreError::ThreadExists(thread_id)));
                return;
            }
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        }
        let state = ThreadState::created((*record).clone(), started_json, created_at_ms);
        self.threads.insert(thread_id.clone(), state);
        self.batch.dirty_threads.push(thread_id);
        self.batch.events += 1;
        self.batch.note_change();
        self.batch.waiters.push(Waiter::Create(reply, record));
    }

    fn append(
        &mut self,
        thread_id: String,
        events: Vec<Incoming>,
        echo: bool,
        reply: Reply<Vec<Appended>>,
    ) {
        match self.accept(thread_id, events, echo) {
            // Lifecycle events are answered once committed.
            Ok((appended, true)) => self.batch.waiters.push(Waiter::Append(reply, appended)),
            Ok((appended, false)) => {
                let _ = reply.send(Ok(appended));
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    /// Checks an append and adds it to the batch; answers what was
    /// appended and whether it holds a lifecycle event.
    fn accept(
        &mut self,
        thread_id: String,
        events: Vec<Incoming>,
        echo: bool,
    ) -> Result<(Vec<Appended>, bool), StoreError> {
        if !self.threads.contains_key(&thread_id) {
            let state = ThreadState::load(held(&self.conn), &thread_id)?
                .ok_or_else(|| StoreError::UnknownThread(thread_id.clone()))?;
            self.threads.insert(thread_id.clone(), state);
        }
        let Some(state) = self.threads.get_mut(&thread_id) else {
            return Err(StoreError::UnknownThread(thread_id)); // inserted just above
        };
        let was_clean = state.pending.is_empty();
        match state.append(
            self.conn.as_ref().map(|conn| conn as &dyn Rows),
            &thread_id,
            events,
            now_ms(),
            echo,
        ) {
            Ok(accepted) => {
                // A seq past the committed reservation must not reach a
                // client before it is committed (see `thread_state/reserve.rs`).
                let unreserved = accepted.last_seq.is_some_and(|seq| !state.seqs.covers(seq));
                if accepted.logged > 0 {
                    if was_clean {
                        self.batch.dirty_threads.push(thread_id);
                    }
                    self.batch.events += accepted.logged;
                    self.batch.note_change();
                }
                Ok((accepted.appended, accepted.lifecycle || unreserved))
            }
            Err(refusal) => {
                tracing::debug!(%thread_id, error = %refusal.error, "append refused");
                let Some(conn) = &self.conn else {
                    if refusal.reducer_dirty {
                        self.rebuilds.push(thread_id);
                    }
                    return Err(refusal.error);
                };
                if refusal.reducer_dirty
                    && let Err(error) = state.rebuild(conn, &thread_id)
                {
                    tracing::error!(%thread_id, %error, "cannot undo a refused append");
                    let batch = std::mem::take(&mut self.batch);
                    self.fail(batch, &Arc::new(error));
                    self.threads.remove(&thread_id);
                }
                Err(refusal.error)
            }
        }
    }

    /// Has the next commit write `threads.updated_at_ms` of every cached
    /// thread (or of the idle ones only) where it lags, however little:
    /// before the store closes or the states are dropped, so the lag never
    /// outlives this writer but in a crash (which the next open that is
    /// alone repairs, see `recovery.rs`).
    fn flush_updated_at(&mut self, only_idle: bool) {
        for (thread_id, state) in &mut self.threads {
            if !state.updated_at_stale() || (only_idle && state.reducer.active_turn().is_some()) {
                continue;
            }
            if state.pending.is_empty() {
                self.batch.dirty_threads.push(thread_id.clone());
            }
            state.flush_updated_at = true;
        }
    }

    /// Has the next commit delete every seq reservation this writer holds:
    /// it stops, and everything it handed out is committed by that commit,
    /// so no seq is left that a client saw and the log lacks.
    fn release_reservations(&mut self) {
        for (thread_id, state) in &mut self.threads {
            if !state.seqs.held() {
                continue;
            }
            if state.pending.is_empty() && !self.batch.dirty_threads.contains(thread_id) {
                self.batch.dirty_threads.push(thread_id.clone());
            }
            state.seqs.release = true;
        }
    }
}

/// The write connection, where only requests run that wait for it to be
/// back from the commit thread.
#[allow(clippy::expect_used)]
fn held(conn: &Option<Connection>) -> &Connection {
    conn.as_ref()
        .expect("requests that need the connection wait while it is lent (lend.rs)")
}
