//! The single writer: a plain std thread that owns the write connection and
//! takes requests from a channel.
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
//!   committed reservation (`reserve.rs`), else they wait for the commit
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

mod batch;
mod checkpoint;
mod dirty;
mod pop;
mod processes;
mod rank;
mod requests;
mod reserve;
mod state;
mod thread_ops;

pub(crate) use self::processes::ProcessOp;
pub(crate) use self::requests::RequestOp;
pub(crate) use self::thread_ops::ThreadOp;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use spool_core::ItemRecord;
use spool_protocol::ServerNotification;
use tokio::sync::oneshot;

use self::state::ThreadState;
use super::reads::thread_exists;
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::types::{Appended, ThreadRecord};

/// Where the writer sends its answer.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

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
}

/// A notification to append, with its JSON encoded by the caller (off the
/// writer thread). `json` is `None` for what is never stored whatever the
/// thread (status items), and empty for the start of an item born complete
/// whose completion follows: its row is the completion's (`born.rs`), and
/// the writer encodes it only should it not fold after all.
pub(crate) struct Incoming {
    pub(crate) notification: ServerNotification,
    pub(crate) json: Option<String>,
}

/// A token count computed for an item as of its `seq`.
pub(crate) struct TokenCount {
    pub(crate) item_id: String,
    pub(crate) seq: u64,
    pub(crate) token_count: u32,
}

/// Starts the writer thread on `conn`.
pub(crate) fn spawn(
    conn: Connection,
    path: &std::path::Path,
    options: &StoreOptions,
) -> Result<(Sender<Request>, JoinHandle<()>), StoreError> {
    let (requests, inbox) = std::sync::mpsc::channel();
    conn.pragma_update(None, "wal_autocheckpoint", checkpoint::BACKSTOP_PAGES)?;
    let writer = Writer {
        checkpointer: checkpoint::Checkpointer::start(path)?,
        conn,
        mark: crate::mark::CommitMark::new(path),
        delta_commit_delay: options.delta_commit_delay,
        max_batch_events: options.max_batch_events.max(1),
        cached_threads: options.cached_threads,
        threads: HashMap::new(),
        batch: Batch::default(),
    };
    let handle = std::thread::Builder::new()
        .name("spool-store-writer".to_owned())
        .spawn(move || writer.run(inbox))
        .map_err(StoreError::WriterThread)?;
    Ok((requests, handle))
}

struct Writer {
    /// Declared before `conn`, so it stops first: the writer's connection
    /// is then the file's last, whose closing checkpoints and removes the
    /// WAL.
    checkpointer: checkpoint::Checkpointer,
    conn: Connection,
    /// What is committed, kept outside the WAL (`mark.rs`).
    mark: crate::mark::CommitMark,
    delta_commit_delay: Duration,
    max_batch_events: usize,
    cached_threads: usize,
    threads: Threads,
    batch: Batch,
}

/// The writer's cached thread states, by thread id.
type Threads = HashMap<String, ThreadState>;

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
    fn run(mut self, inbox: Receiver<Request>) {
        tracing::debug!("store writer started");
        loop {
            let deadline = self.deadline();
            let request = match deadline {
                None => match inbox.recv() {
                    Ok(request) => request,
                    Err(_) => break,
                },
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        let _ = self.commit();
                        continue;
                    }
                    match inbox.recv_timeout(deadline - now) {
                        Ok(request) => request,
                        Err(RecvTimeoutError::Timeout) => {
                            let _ = self.commit();
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            if let Flow::Stop = self.handle(request) {
                return;
            }
            // Drain what queued up meanwhile into the same batch.
            loop {
                if self.batch.events >= self.max_batch_events {
                    let _ = self.commit();
                }
                match inbox.try_recv() {
                    Ok(request) => {
                        if let Flow::Stop = self.handle(request) {
                            return;
                        }
                    }
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            let overdue = self.deadline().is_some_and(|d| Instant::now() >= d);
            // Token counts are committed at once too: nobody waits for
            // them, but a model view read before they land counts again.
            let counts = !self.batch.token_counts.is_empty();
            if !self.batch.waiters.is_empty() || overdue || counts {
                let _ = self.commit();
            }
        }
        // Every handle on the store is gone: make what was accepted durable.
        self.flush_updated_at(false);
        self.release_reservations();
        let _ = self.commit();
        self.mark.committed(&self.conn, true);
        tracing::debug!("store writer stopped");
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
                reply,
            } => self.append(thread_id, events, reply),
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
                self.flush_updated_at(false);
                self.release_reservations();
                let result = self.commit().map_err(StoreError::Commit);
                self.mark.committed(&self.conn, true);
                let _ = reply.send(result);
                return Flow::Stop;
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
            false => thread_exists(&self.conn, &thread_id),
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

    fn append(&mut self, thread_id: String, events: Vec<Incoming>, reply: Reply<Vec<Appended>>) {
        match self.accept(thread_id, events) {
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
    ) -> Result<(Vec<Appended>, bool), StoreError> {
        if !self.threads.contains_key(&thread_id) {
            let state = ThreadState::load(&self.conn, &thread_id)?
                .ok_or_else(|| StoreError::UnknownThread(thread_id.clone()))?;
            self.threads.insert(thread_id.clone(), state);
        }
        let Some(state) = self.threads.get_mut(&thread_id) else {
            return Err(StoreError::UnknownThread(thread_id)); // inserted just above
        };
        let was_clean = state.pending.is_empty();
        match state.append(&self.conn, &thread_id, events, now_ms()) {
            Ok(accepted) => {
                // A seq past the committed reservation must not reach a
                // client before it is committed (see `reserve.rs`).
                let unreserved = accepted
                    .appended
                    .iter()
                    .filter_map(Appended::seq)
                    .max()
                    .is_some_and(|seq| !state.seqs.covers(seq));
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
                if refusal.reducer_dirty
                    && let Err(error) = state.rebuild(&self.conn, &thread_id)
                {
                    tracing::error!(%thread_id, %error, "cannot undo a refused append");
                    self.fail_batch(Arc::new(error));
                    self.threads.remove(&thread_id);
                }
                Err(refusal.error)
            }
        }
    }

    /// Commits the batch and answers its waiters; on failure every waiter
    /// gets the error and the states of the batch's threads are dropped, to
    /// be reloaded from what is committed.
    fn commit(&mut self) -> Result<(), Arc<StoreError>> {
        if self.threads.len() > self.cached_threads {
            // Idle threads are dropped after this commit: first write what
            // they owe the thread row.
            self.flush_updated_at(true);
        }
        if self.batch.is_empty() {
            self.answer_waiters();
            return Ok(());
        }
        let started = Instant::now();
        let written = batch::write(
            &self.conn,
            &self.batch.dirty_threads,
            &mut self.threads,
            &self.batch.token_counts,
        );
        if let Err(error) = written {
            let error = Arc::new(error);
            tracing::error!(%error, events = self.batch.events, "store commit failed");
            self.fail_batch(error.clone());
            return Err(error);
        }
        for thread_id in &self.batch.dirty_threads {
            if let Some(state) = self.threads.get_mut(thread_id) {
                state.committed();
            }
        }
        tracing::debug!(
            events = self.batch.events,
            threads = self.batch.dirty_threads.len(),
            waiters = self.batch.waiters.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "store commit"
        );
        self.answer_waiters();
        self.checkpointer.nudge();
        self.mark.committed(&self.conn, false);
        if self.threads.len() > self.cached_threads {
            self.threads.retain(|_, state| !state.is_idle());
        }
        Ok(())
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

    /// Answers every waiter with success and starts a new batch.
    fn answer_waiters(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        for waiter in batch.waiters {
            match waiter {
                Waiter::Append(reply, appended) => {
                    let _ = reply.send(Ok(appended));
                }
                Waiter::Create(reply, record) => {
                    let _ = reply.send(Ok(*record));
                }
                Waiter::Flush(reply) => {
                    let _ = reply.send(Ok(()));
                }
            }
        }
    }

    /// Drops the batch: its waiters get `error`, and its threads' states
    /// are forgotten so they reload from the committed projection.
    fn fail_batch(&mut self, error: Arc<StoreError>) {
        let batch = std::mem::take(&mut self.batch);
        for thread_id in &batch.dirty_threads {
            self.threads.remove(thread_id);
        }
        let failed = || StoreError::Commit(error.clone());
        for waiter in batch.waiters {
            match waiter {
                Waiter::Append(reply, _) => {
                    let _ = reply.send(Err(failed()));
                }
                Waiter::Create(reply, _) => {
                    let _ = reply.send(Err(failed()));
                }
                Waiter::Flush(reply) => {
                    let _ = reply.send(Err(failed()));
                }
            }
        }
    }
}

/// Now, in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}
