//! The PostgreSQL store's writer: a std thread with a connection of its
//! own, which takes requests from a channel and commits them in groups.
//!
//! It is the SQLite writer's model (`sqlite/writer`), simpler: the writer
//! takes one request, drains whatever else is queued, checks every append
//! against its thread's state (`thread_state`, the same code as SQLite's),
//! writes the batch in one transaction and commits it, then answers each
//! caller. Every append is answered after the commit that covers it,
//! deltas included: a seq a client saw is then always committed, so no
//! seq reservation is needed, at the price of a commit's round trip per
//! group of deltas. A refused append is answered at once.
//!
//! The connection is driven by a current-thread runtime that this thread
//! owns: each statement is a `block_on`, which keeps the writer's state
//! checks (which read committed rows through [`Rows`]) synchronous, as
//! SQLite's are.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;

use spool_core::{ItemRecord, TurnRecord};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::query::CachedClient;
use super::requests::{RequestOp, StateSource};
use super::thread_ops::ThreadOp;
use super::{PgDatabase, batch, reads};
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::thread_state::prepare::now_ms;
use crate::thread_state::rows::{Kind, Rows};
use crate::thread_state::{Incoming, ThreadState};
use crate::types::{Appended, ThreadRecord};

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

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
    /// Removes the newest item in the model's view of the thread and
    /// answers with it (`session.rs`).
    PopNewest {
        thread_id: String,
        reply: Reply<Option<ItemRecord>>,
    },
}

/// The writer's connection and the runtime that drives it.
pub(super) struct Conn {
    runtime: Runtime,
    pub(super) client: CachedClient,
}

impl Conn {
    pub(super) fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }
}

impl Rows for Conn {
    fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        self.block_on(reads::read_thread(&self.client, thread_id))
    }

    fn items(&self, thread_id: &str, open_only: bool) -> Result<Vec<ItemRecord>, StoreError> {
        self.block_on(reads::read_items(&self.client, thread_id, open_only))
    }

    fn turns(&self, thread_id: &str, open_only: bool) -> Result<Vec<TurnRecord>, StoreError> {
        self.block_on(reads::read_turns(&self.client, thread_id, open_only))
    }

    fn item(&self, thread_id: &str, item_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        self.block_on(reads::read_item(&self.client, thread_id, item_id))
    }

    fn status(&self, thread_id: &str, kind: Kind, id: &str) -> Result<Option<String>, StoreError> {
        self.block_on(reads::status(&self.client, thread_id, kind, id))
    }

    fn max_id(&self, thread_id: &str, kind: Kind) -> Result<Option<String>, StoreError> {
        self.block_on(reads::max_id(&self.client, thread_id, kind))
    }

    /// No reservations: every seq is committed before it is answered.
    fn reserved_upto(&self, _thread_id: &str) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// Starts the writer's thread, which opens a connection of its own to
/// `db`; returns once it is connected.
pub(super) async fn spawn(
    db: &PgDatabase,
    options: &StoreOptions,
) -> Result<(Sender<Request>, JoinHandle<()>), StoreError> {
    let (config, tls, database) = (db.config.clone(), db.tls.clone(), db.name.clone());
    let (cached_threads, max_batch_events) =
        (options.cached_threads, options.max_batch_events.max(1));
    let (requests, inbox) = std::sync::mpsc::channel();
    let (started, connected) = oneshot::channel();
    let handle = std::thread::Builder::new()
        .name("spool-pg-writer".to_owned())
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

impl Conn {
    /// Connects on a runtime of this thread's own.
    fn open(config: &Config, tls: MakeRustlsConnect, database: &str) -> Result<Conn, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StoreError::WriterThread)?;
        let (client, connection) =
            runtime
                .block_on(config.connect(tls))
                .map_err(|e| StoreError::PgConnect {
                    database: database.to_owned(),
                    reason: e.to_string(),
                })?;
        runtime.spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "the store writer's PostgreSQL connection ended");
            }
        });
        Ok(Conn {
            runtime,
            client: CachedClient::new(client),
        })
    }
}

pub(super) struct Writer {
    pub(super) conn: Conn,
    pub(super) threads: HashMap<String, ThreadState>,
    cached_threads: usize,
    max_batch_events: usize,
}

/// A caller answered once the batch commits.
enum Waiter {
    Append(Reply<Vec<Appended>>, Vec<Appended>),
    Create(Reply<ThreadRecord>, Box<ThreadRecord>),
    Flush(Reply<()>),
}

/// One group commit in the making.
#[derive(Default)]
pub(super) struct Batch {
    dirty: Vec<String>,
    waiters: Vec<Waiter>,
    events: usize,
    close: Option<Reply<()>>,
}

impl Writer {
    fn run(mut self, inbox: Receiver<Request>) {
        tracing::debug!("PostgreSQL store writer started");
        loop {
            let Ok(first) = inbox.recv() else {
                break; // every handle is gone, and with it every request
            };
            let mut batch = Batch::default();
            self.take(first, &mut batch);
            while batch.close.is_none() && batch.events < self.max_batch_events {
                match inbox.try_recv() {
                    Ok(request) => self.take(request, &mut batch),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
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
        for waiter in batch.waiters.drain(..) {
            match waiter {
                Waiter::Append(reply, appended) => {
                    let _ = reply.send(outcome(&result, appended));
                }
                Waiter::Create(reply, record) => {
                    let _ = reply.send(outcome(&result, *record));
                }
                Waiter::Flush(reply) => {
                    let _ = reply.send(outcome(&result, ()));
                }
            }
        }
        batch.events = 0;
        match batch.close.take() {
            Some(reply) => {
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
                batch.dirty.push(thread_id);
                batch.events += 1;
                batch.waiters.push(Waiter::Create(reply, record));
            }
            Request::Append {
                thread_id,
                events,
                reply,
            } => match self.accept(&thread_id, events, batch) {
                Ok(appended) => batch.waiters.push(Waiter::Append(reply, appended)),
                Err(error) => {
                    let _ = reply.send(Err(error));
                }
            },
            Request::Flush { reply } => batch.waiters.push(Waiter::Flush(reply)),
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
                // Every thread's row gets its newest event's time.
                for (thread_id, state) in &mut self.threads {
                    state.flush_updated_at = true;
                    if state.updated_at_stale() && !batch.dirty.contains(thread_id) {
                        batch.dirty.push(thread_id.clone());
                    }
                }
                batch.close = Some(reply);
            }
        }
    }

    /// Checks an append against its thread's state and adds it to the
    /// batch.
    fn accept(
        &mut self,
        thread_id: &str,
        events: Vec<Incoming>,
        batch: &mut Batch,
    ) -> Result<Vec<Appended>, StoreError> {
        if !self.threads.contains_key(thread_id) {
            let state = ThreadState::load(&self.conn, thread_id)?
                .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
            self.threads.insert(thread_id.to_owned(), state);
        }
        let Some(state) = self.threads.get_mut(thread_id) else {
            return Err(StoreError::UnknownThread(thread_id.to_owned())); // inserted above
        };
        let was_clean = state.pending.is_empty();
        match state.append(Some(&self.conn as &dyn Rows), thread_id, events, now_ms()) {
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

    /// Writes the dirty threads in one transaction and commits it. On
    /// failure nothing of the batch is stored, and the states of its
    /// threads are dropped (they held what was not stored): the next
    /// append of each loads it again from what is committed.
    fn commit(&mut self, dirty: &[String]) -> Result<(), Arc<StoreError>> {
        if dirty.is_empty() {
            return Ok(());
        }
        let result = self.conn.block_on(async {
            let client = &self.conn.client;
            client.simple("BEGIN").await?;
            for thread_id in dirty {
                let Some(state) = self.threads.get_mut(thread_id) else {
                    return Err(StoreError::StateLost {
                        thread_id: thread_id.clone(),
                        reason: "its state was dropped before the commit".to_owned(),
                    });
                };
                batch::write_thread(client, thread_id, state).await?;
            }
            client.simple("COMMIT").await?;
            Ok(())
        });
        match result {
            Ok(()) => {
                for thread_id in dirty {
                    if let Some(state) = self.threads.get_mut(thread_id) {
                        state.committed();
                    }
                }
                Ok(())
            }
            Err(error) => {
                let _ = self.conn.block_on(self.conn.client.simple("ROLLBACK"));
                for thread_id in dirty {
                    self.threads.remove(thread_id);
                }
                tracing::error!(%error, "a PostgreSQL group commit failed");
                Err(Arc::new(error))
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
        work: impl FnOnce(&Conn, StateSource<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut touched = Vec::new();
        let conn = &self.conn;
        let result = conn
            .block_on(conn.client.simple("BEGIN"))
            .map_err(StoreError::from)
            .and_then(|()| {
                let source = StateSource {
                    threads: &mut self.threads,
                    rows: conn,
                    touched: &mut touched,
                };
                let value = work(conn, source)?;
                conn.block_on(conn.client.simple("COMMIT"))?;
                Ok(value)
            });
        match result {
            Ok(value) => {
                for thread_id in &touched {
                    if let Some(state) = self.threads.get_mut(thread_id) {
                        state.committed();
                    }
                }
                Ok(value)
            }
            Err(error) => {
                let _ = conn.block_on(conn.client.simple("ROLLBACK"));
                for thread_id in &touched {
                    self.threads.remove(thread_id);
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
        }
    }
}

/// A waiter's answer: `value` if the commit went through.
fn outcome<T>(commit: &Result<(), Arc<StoreError>>, value: T) -> Result<T, StoreError> {
    match commit {
        Ok(()) => Ok(value),
        Err(error) => Err(StoreError::Commit(error.clone())),
    }
}
