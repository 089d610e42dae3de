//! A PostgreSQL store's writer: a std thread with a connection of its
//! own, which takes requests from a channel and commits them in groups.
//! A store runs several, each writing the threads of its lane (`lane.rs`).
//!
//! It is the SQLite writer's model (`sqlite/writer`), simpler: the writer
//! takes one request, drains whatever else is queued (waiting up to half a
//! millisecond for the callers its last commit answered: `Linger`, `linger.rs`), checks every append
//! against its thread's state (`thread_state`, the same code as SQLite's),
//! writes the batch in one transaction and commits it, then answers each
//! caller. The transaction goes in one round trip: its statements are
//! pipelined (`pipeline.rs`), rows of every thread of the batch together
//! (`batch.rs`). Every append is answered after the commit that covers it,
//! deltas included: a seq a client saw is then always committed, so no
//! seq reservation is needed, at the price of a commit's round trip per
//! group of deltas. A refused append is answered at once.
//!
//! Every thread it writes it holds a lease on first (`holder.rs`): a
//! grant to this server after another holder is a takeover, which closes
//! what that holder left in progress; every commit is fenced by the leases
//! of its threads, and the heartbeat renews them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spool_core::ItemRecord;
use tokio::sync::{broadcast, oneshot};

use super::commit::{APPLIED, applied_commands, notify};
pub(super) use super::conn::Conn;
use super::lane::Lane;
use super::linger::{LINGER, Linger};
use super::listen::RemoteCommit;
use super::query::Query;
use super::requests::{RequestOp, StateSource};
use super::thread_ops::ThreadOp;
use super::{PgDatabase, reads};
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::thread_state::prepare::now_ms;
use crate::thread_state::rows::Rows;
use crate::thread_state::{Incoming, ThreadState};
use crate::types::{Appended, ThreadRecord};

pub(super) use crate::write_ops::Reply;

/// What the store asks of the writer.
pub(super) enum Request {
    Create {
        record: Box<ThreadRecord>,
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
    Flush {
        reply: Reply<()>,
    },
    Close {
        reply: Reply<()>,
    },
    /// Pending requests and run states (`requests.rs`).
    Requests(RequestOp),
    /// Archive, revert, fork, delete, history (`thread_ops.rs`).
    Threads(ThreadOp),
    /// A forwarded command is about to run on the thread: the thread's
    /// next commit records that it took effect (`commit.rs`).
    Applying {
        command_id: String,
        thread_id: String,
        reply: Reply<()>,
    },
    /// Removes the newest item in the model's view of the thread and
    /// answers with it (`session.rs`).
    PopNewest {
        thread_id: String,
        reply: Reply<Option<ItemRecord>>,
    },
}

/// Starts the writer of `lane`, a thread which opens a connection of its
/// own to `db`; returns once it is connected.
pub(super) async fn spawn(
    db: &PgDatabase,
    options: &StoreOptions,
    me: Arc<str>,
    lane: Lane,
    takeovers: broadcast::Sender<RemoteCommit>,
) -> Result<(Sender<Request>, JoinHandle<()>), StoreError> {
    let ttl = options.lease_ttl.max(Duration::from_millis(100));
    let (config, tls, database) = (db.config.clone(), db.tls.clone(), db.name.clone());
    let (cached_threads, max_batch_events) =
        (options.cached_threads, options.max_batch_events.max(1));
    let (requests, inbox) = std::sync::mpsc::channel();
    let (started, connected) = oneshot::channel();
    let handle = std::thread::Builder::new()
        .name(format!("spool-pg-writer-{}", lane.index))
        .spawn(move || {
            let conn = match Conn::open(&config, tls, &database) {
                Ok(conn) => conn,
                Err(error) => {
                    let _ = started.send(Err(error));
                    return;
                }
            };
            let _ = started.send(Ok(()));
            let writer = Writer {
                conn,
                threads: HashMap::new(),
                cached_threads,
                max_batch_events,
                me,
                lane,
                leases: HashMap::new(),
                ttl,
                next_beat: Instant::now() + super::holder::heartbeat(ttl),
                applying: HashMap::new(),
                linger: Linger::default(),
                takeovers,
            };
            writer.run(inbox);
        })
        .map_err(StoreError::WriterThread)?;
    match connected.await {
        Ok(Ok(())) => Ok((requests, handle)),
        Ok(Err(error)) => {
            let _ = handle.join();
            Err(error)
        }
        Err(_) => {
            let _ = handle.join();
            Err(StoreError::Closed)
        }
    }
}

pub(super) struct Writer {
    pub(super) conn: Conn,
    pub(super) threads: HashMap<String, ThreadState>,
    cached_threads: usize,
    max_batch_events: usize,
    /// This server's id: the holder its leases name.
    pub(super) me: Arc<str>,
    /// The threads it writes (`lane.rs`).
    pub(super) lane: Lane,
    /// The threads this server holds, with the generation of each grant.
    pub(super) leases: HashMap<String, i64>,
    pub(super) ttl: Duration,
    /// When the heartbeat is due next (`holder.rs`, `beat`).
    pub(super) next_beat: Instant,
    /// Forwarded commands running on each thread, not yet recorded as
    /// having taken effect.
    pub(super) applying: HashMap<String, Vec<String>>,
    /// Whether the next group commit waits for more appends.
    linger: Linger,
    /// Where this server's hub hears of the threads this writer took over
    /// (`holder.rs`): it drops its own commits' notices, and a takeover's
    /// events are appended by no run here.
    pub(super) takeovers: broadcast::Sender<RemoteCommit>,
}

/// A caller answered once the batch commits.
enum Waiter {
    Append(String, Reply<Vec<Appended>>, Vec<Appended>),
    Create(String, Reply<ThreadRecord>, Box<ThreadRecord>),
    Flush(Reply<()>),
}

/// One group commit in the making.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) dirty: Vec<String>,
    /// Threads this batch takes over (`holder.rs`): once it is committed,
    /// this server's own hub is told ([`Writer::takeovers`]).
    pub(super) taken_over: Vec<String>,
    waiters: Vec<Waiter>,
    events: usize,
    close: Option<Reply<()>>,
}

impl Writer {
    fn run(mut self, inbox: Receiver<Request>) {
        tracing::debug!("PostgreSQL store writer started");
        loop {
            if Instant::now() >= self.next_beat {
                self.beat();
            }
            let due = self.next_beat.saturating_duration_since(Instant::now());
            let first = match inbox.recv_timeout(due) {
                Ok(request) => request,
                Err(RecvTimeoutError::Timeout) => continue,
                // Every handle is gone, and with it every request.
                Err(RecvTimeoutError::Disconnected) => {
                    let mut batch = Batch::default();
                    self.closing(&mut batch);
                    self.finish(&mut batch);
                    self.release_all();
                    break;
                }
            };
            let mut batch = Batch::default();
            let mut wait_for = match first {
                Request::Append { .. } => self.linger.threads(),
                _ => 0,
            };
            let waited_for = wait_for;
            self.take(first, &mut batch);
            let until = Instant::now() + LINGER;
            let mut timed_out = false;
            while batch.close.is_none() && batch.events < self.max_batch_events {
                let next = match batch.dirty.len() < wait_for {
                    true => match inbox.recv_timeout(until - Instant::now().min(until)) {
                        Ok(request) => Ok(request),
                        Err(RecvTimeoutError::Timeout) => {
                            timed_out = true;
                            Err(TryRecvError::Empty)
                        }
                        Err(RecvTimeoutError::Disconnected) => Err(TryRecvError::Disconnected),
                    },
                    false => inbox.try_recv(),
                };
                match next {
                    Ok(request) => {
                        if !matches!(request, Request::Append { .. }) {
                            wait_for = 0;
                        }
                        self.take(request, &mut batch);
                    }
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.linger.after(batch.dirty.len(), waited_for, timed_out);
            if self.finish(&mut batch) {
                break;
            }
            self.evict();
        }
        tracing::debug!("PostgreSQL store writer stopped");
    }

    /// Commits the batch and answers its callers; whether the store closed.
    pub(super) fn finish(&mut self, batch: &mut Batch) -> bool {
        let result = self.commit(&std::mem::take(&mut batch.dirty));
        let lost = |thread_id: &String| match &result {
            Ok(lost) => lost.contains(thread_id),
            Err(_) => false,
        };
        let lease_lost = |thread_id: String| StoreError::LeaseLost { thread_id };
        for waiter in batch.waiters.drain(..) {
            match waiter {
                Waiter::Append(thread_id, reply, _) if lost(&thread_id) => {
                    let _ = reply.send(Err(lease_lost(thread_id)));
                }
                Waiter::Create(thread_id, reply, _) if lost(&thread_id) => {
                    let _ = reply.send(Err(lease_lost(thread_id)));
                }
                Waiter::Append(_, reply, appended) => {
                    let _ = reply.send(outcome(&result, appended));
                }
                Waiter::Create(_, reply, record) => {
                    let _ = reply.send(outcome(&result, *record));
                }
                Waiter::Flush(reply) => {
                    let _ = reply.send(outcome(&result, ()));
                }
            }
        }
        if let Ok(lost) = &result {
            for thread_id in batch.taken_over.drain(..) {
                if let Some(state) = self.threads.get(&thread_id)
                    && !lost.contains(&thread_id)
                {
                    let last_seq = state.reducer.last_seq();
                    let _ = self.takeovers.send(RemoteCommit::Commit {
                        thread_id,
                        last_seq,
                    });
                }
            }
        }
        batch.taken_over.clear();
        let result = result.map(|_| ());
        batch.events = 0;
        match batch.close.take() {
            Some(reply) => {
                // Let go before answering: a closed store holds nothing.
                self.release_all();
                let _ = reply.send(result.map_err(StoreError::Commit));
                true
            }
            None => false,
        }
    }

    fn take(&mut self, request: Request, batch: &mut Batch) {
        match request {
            Request::Create {
                record,
                started_json,
                created_at_ms,
                reply,
            } => {
                let thread_id = record.thread.id.clone();
                let exists = match self.threads.contains_key(&thread_id) {
                    true => Ok(true),
                    false => self
                        .conn
                        .block_on(reads::thread_exists(&self.conn.client, &thread_id)),
                };
                // A new thread is held by the server that creates it.
                let exists = exists.and_then(|exists| match exists {
                    true => Ok(true),
                    false => self.hold(&thread_id, batch).map(|_| false),
                });
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
                batch.dirty.push(thread_id.clone());
                batch.events += 1;
                batch.waiters.push(Waiter::Create(thread_id, reply, record));
            }
            Request::Append {
                thread_id,
                events,
                echo,
                reply,
            } => match self.accept(&thread_id, events, echo, batch) {
                Ok(appended) => batch
                    .waiters
                    .push(Waiter::Append(thread_id, reply, appended)),
                Err(error) => {
                    let _ = reply.send(Err(error));
                }
            },
            Request::Flush { reply } => batch.waiters.push(Waiter::Flush(reply)),
            Request::Applying {
                command_id,
                thread_id,
                reply,
            } => {
                self.applying.entry(thread_id).or_default().push(command_id);
                let _ = reply.send(Ok(()));
            }
            Request::Requests(op) => {
                // Its own transaction, after what came before it.
                self.finish(batch);
                self.handle_request_op(op);
            }
            Request::Threads(op) => {
                self.finish(batch);
                self.handle_thread_op(op);
            }
            Request::PopNewest { thread_id, reply } => {
                self.finish(batch);
                let _ = reply.send(self.pop_newest(&thread_id));
            }
            Request::Close { reply } => {
                self.closing(batch);
                batch.close = Some(reply);
            }
        }
    }

    /// The store closes: every thread's row gets its newest event's time
    /// with the last commit.
    fn closing(&mut self, batch: &mut Batch) {
        for (thread_id, state) in &mut self.threads {
            state.flush_updated_at = true;
            if state.updated_at_stale() && !batch.dirty.contains(thread_id) {
                batch.dirty.push(thread_id.clone());
            }
        }
    }

    /// Checks an append against its thread's state and adds it to the
    /// batch.
    fn accept(
        &mut self,
        thread_id: &str,
        events: Vec<Incoming>,
        echo: bool,
        batch: &mut Batch,
    ) -> Result<Vec<Appended>, StoreError> {
        self.hold(thread_id, batch)?;
        if !self.threads.contains_key(thread_id) {
            let state = ThreadState::load(&self.conn, thread_id)?
                .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
            self.threads.insert(thread_id.to_owned(), state);
        }
        let Some(state) = self.threads.get_mut(thread_id) else {
            return Err(StoreError::UnknownThread(thread_id.to_owned())); // inserted above
        };
        let was_clean = state.pending.is_empty();
        let rows = Some(&self.conn as &dyn Rows);
        match state.append(rows, thread_id, events, now_ms(), echo) {
            Ok(accepted) => {
                if was_clean && accepted.logged > 0 {
                    batch.dirty.push(thread_id.to_owned());
                }
                batch.events += accepted.logged;
                Ok(accepted.appended)
            }
            Err(refusal) => {
                if refusal.reducer_dirty
                    && let Err(error) = state.rebuild(&self.conn, thread_id)
                {
                    // The state cannot be trusted: drop it, and what it
                    // had pending with it (the commit then fails those
                    // callers' appends; see `commit`).
                    tracing::error!(thread_id, %error, "cannot rebuild a thread's state");
                    self.threads.remove(thread_id);
                }
                Err(refusal.error)
            }
        }
    }

    /// Runs `work` in a transaction of its own and commits it (the caller
    /// committed what was pending before). `work` runs each statement
    /// with [`Conn::block_on`]: a thread's state reads rows that way too,
    /// and `block_on`s do not nest. States it wrote are marked committed,
    /// or dropped if the transaction fails.
    pub(super) fn in_own_transaction<T>(
        &mut self,
        fenced: Option<&str>,
        work: impl FnOnce(&Conn, StateSource<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(thread_id) = fenced {
            // Held first; what a takeover closes is committed on its own.
            let mut batch = Batch::default();
            self.hold(thread_id, &mut batch)?;
            if self.finish(&mut batch) {
                return Err(StoreError::Closed);
            }
        }
        let mut touched = Vec::new();
        let fence = |writer: &Self| match fenced {
            Some(thread_id) => match writer.fence(&[thread_id.to_owned()])?.is_empty() {
                true => Ok(()),
                false => Err(StoreError::LeaseLost {
                    thread_id: thread_id.to_owned(),
                }),
            },
            None => Ok(()),
        };
        let fenced_ok = self
            .conn
            .block_on(self.conn.client.simple("BEGIN"))
            .map_err(StoreError::from)
            .and_then(|()| fence(self));
        let conn = &self.conn;
        let result = fenced_ok.and_then(|()| {
            let source = StateSource {
                threads: &mut self.threads,
                rows: conn,
                touched: &mut touched,
            };
            let value = work(conn, source)?;
            let applied = applied_commands(&self.applying, touched.iter());
            if !applied.is_empty() {
                conn.block_on(conn.client.exec(APPLIED, &[&applied]))?;
            }
            let written: Vec<&String> = touched.iter().collect();
            conn.block_on(notify(&conn.client, &self.me, &written, &self.threads))?;
            conn.block_on(conn.client.simple("COMMIT"))?;
            Ok(value)
        });
        match result {
            Ok(value) => {
                for thread_id in &touched {
                    if let Some(state) = self.threads.get_mut(thread_id) {
                        state.committed();
                    }
                    self.applying.remove(thread_id);
                }
                Ok(value)
            }
            Err(error) => {
                let _ = conn.block_on(conn.client.simple("ROLLBACK"));
                for thread_id in &touched {
                    self.threads.remove(thread_id);
                }
                if let StoreError::LeaseLost { thread_id } = &error {
                    self.forget(thread_id);
                }
                Err(error)
            }
        }
    }

    /// Drops idle thread states past the cache's size.
    fn evict(&mut self) {
        if self.threads.len() <= self.cached_threads {
            return;
        }
        let idle: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, state)| state.is_idle())
            .map(|(id, _)| id.clone())
            .take(self.threads.len() - self.cached_threads)
            .collect();
        for thread_id in idle {
            self.threads.remove(&thread_id);
            // Nothing of it is in flight: any server may take it at once.
            self.release(&thread_id);
        }
    }
}

/// A waiter's answer: `value` if the commit went through.
fn outcome<T, C>(commit: &Result<C, Arc<StoreError>>, value: T) -> Result<T, StoreError> {
    match commit {
        Ok(_) => Ok(value),
        Err(error) => Err(StoreError::Commit(error.clone())),
    }
}
