//! The embedded SQLite store: one writer thread (see [`writer`]) and a pool
//! of reader connections, over a WAL-mode file.

mod catch_up;
mod codec;
mod history;
mod input_read;
pub(crate) mod keys;
mod llm_read;
mod projected;
mod reads;
mod requests_read;
pub(crate) mod schema;
mod thread_ops;
mod vfs;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use rusqlite::Connection;
use spool_core::llm::{LlmView, LlmViewOptions};
use spool_core::{ItemRecord, ThreadReducer, TurnRecord, View};
use spool_protocol::{ServerNotification, ThreadEvent};
use tokio::sync::oneshot;

use self::reads::ReaderPool;
use self::writer::{Request, RequestOp};
use crate::Store;
use crate::error::StoreError;
use crate::input_json::InputJson;
use crate::options::StoreOptions;
use crate::phases::{Phase, Timer};
use crate::recovery;
use crate::thread_state::Incoming;
use crate::thread_state::prepare::{new_thread_record, prepare_append, prepare_entries};
use crate::types::{
    Appended, InputItems, ItemsPage, NewThread, PendingRequest, ResolvedRequest, StoredHistory,
    StoredRunState, ThreadListQuery, ThreadPage, ThreadRecord, ToAppend,
};

/// Model views of up to this many input items are read on the caller's
/// task (a few hundred microseconds at most).
const INLINE_VIEW_ITEMS: usize = 512;
/// Threads whose last view size is remembered; past it the memory starts
/// over (a hint, not a cache of data).
const MAX_VIEW_SIZES: usize = 4_096;

/// The SQLite store. Cheap to clone: clones share the writer and readers.
/// The writer stops, after committing what it accepted, when [`Store::close`]
/// is called or the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    requests: Option<Sender<Request>>,
    /// The writer's state, which an append whose caller finds the writer
    /// idle runs on the caller's thread (`writer/shared.rs`).
    shared: Arc<writer::Shared>,
    writer: Option<JoinHandle<()>>,
    readers: Arc<ReaderPool>,
    /// Input items of each thread's last model view: small views are read
    /// on the caller's task (see `llm_view`).
    view_sizes: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    /// Held for the store's lifetime (see `crate::recovery`). A field, so it
    /// is released only after `drop` below has joined the writer: a new
    /// opener must not recover turns whose deltas are still being committed.
    lock: recovery::StoreLock,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // `Stop` tells the writer to commit and stop (the channel does not
        // end with this sender: the commit thread holds one); waiting for
        // it makes "dropped" mean "durable".
        if let Some(requests) = self.requests.take() {
            let _ = requests.send(Request::Stop);
        }
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!(path = %self.path.display(), "the store writer panicked");
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` and migrates its
    /// schema. Blocks while it does; from async code, consider
    /// `spawn_blocking`.
    pub fn open(path: impl AsRef<Path>, options: StoreOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        // Before touching the file: an opener that finds itself alone
        // recovers turns left in progress, and others wait for it.
        let lock = recovery::StoreLock::acquire(&path)?;
        crate::mark::check_file(&path, options.accept_data_loss)?;
        let conn = schema::open_writer(&path, &options)?;
        crate::mark::check_events(&path, &conn, options.accept_data_loss)?;
        if lock.alone() {
            recovery::repair_updated_at(&conn, &path)?;
            // Before any item is closed as "stopped before it finished".
            crate::processes::kill_leftovers(&conn)?;
        }
        let writer::Spawned {
            requests,
            thread: writer,
            shared,
        } = writer::spawn(conn, &path, &options)?;
        tracing::debug!(path = %path.display(), "store opened");
        let store = SqliteStore {
            inner: Arc::new(Inner {
                readers: Arc::new(ReaderPool::new(path.clone(), options.clone())),
                view_sizes: std::sync::Mutex::default(),
                path,
                requests: Some(requests),
                shared,
                writer: Some(writer),
                lock,
            }),
        };
        recovery::recover_if_alone(&store, &store.inner.lock, &options)?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// [`Store::append`], also when there is nothing to append: the writer
    /// still loads the thread, which logs the `thread/eventsLost` of seqs a
    /// crash voided (crash recovery relies on it).
    pub(crate) async fn append_even_empty(
        &self,
        thread_id: &str,
        notifications: Vec<ServerNotification>,
    ) -> Result<Vec<Appended>, StoreError> {
        let events = prepare_append(thread_id, notifications)?;
        self.send_append(thread_id, events, true).await
    }

    /// Has the writer take a checked append and waits for the answer;
    /// `echo`: answer with what was appended.
    async fn send_append(
        &self,
        thread_id: &str,
        events: Vec<Incoming>,
        echo: bool,
    ) -> Result<Vec<Appended>, StoreError> {
        let thread_id = thread_id.to_owned();
        let (reply, answer) = oneshot::channel();
        self.run_or_send(Request::Append {
            thread_id,
            events,
            echo,
            reply,
        })?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs an append on this thread if the writer is idle (a lone
    /// caller, `writer/shared.rs`), else sends it to the writer thread.
    fn run_or_send(&self, request: Request) -> Result<(), StoreError> {
        match self.inner.shared.try_run(request) {
            Ok(false) => Ok(()),
            Ok(true) => self.send(Request::Wake),
            Err(request) => self.send(request),
        }
    }

    /// Sends a request to the writer and waits for its answer.
    async fn ask<T>(
        &self,
        request: impl FnOnce(writer::Reply<T>) -> Request,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(request(reply))?;
        // A dropped reply means the writer stopped before answering.
        answer.await.map_err(|_| StoreError::Closed)?
    }

    fn send(&self, request: Request) -> Result<(), StoreError> {
        let requests = self.inner.requests.as_ref().ok_or(StoreError::Closed)?;
        self.inner.shared.sending();
        requests.send(request).map_err(|_| StoreError::Closed)
    }

    /// Runs a read on a pooled reader connection, off the async runtime.
    async fn read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let readers = self.inner.readers.clone();
        tokio::task::spawn_blocking(move || readers.with(read))
            .await
            .map_err(|e| StoreError::ReadTask(e.to_string()))?
    }

    /// Reads the rows of a thread; an empty answer is checked against the
    /// thread table so an unknown thread is an error, not an empty list.
    async fn read_thread_rows<T, F>(&self, thread_id: &str, read: F) -> Result<Vec<T>, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &str) -> Result<Vec<T>, StoreError> + Send + 'static,
    {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| {
            let rows = read(conn, &thread_id)?;
            if rows.is_empty() && !reads::thread_exists(conn, &thread_id)? {
                return Err(StoreError::UnknownThread(thread_id));
            }
            Ok(rows)
        })
        .await
    }
}

impl Store for SqliteStore {
    async fn create_thread(&self, new: NewThread) -> Result<ThreadRecord, StoreError> {
        let (record, started_json, created_at_ms) = new_thread_record(new)?;
        self.ask(|reply| Request::Create {
            record: Box::new(record),
            started_json,
            created_at_ms,
            reply,
        })
        .await
    }

    async fn append(
        &self,
        thread_id: &str,
        notifications: Vec<ServerNotification>,
    ) -> Result<Vec<Appended>, StoreError> {
        if notifications.is_empty() {
            return Ok(Vec::new());
        }
        self.append_even_empty(thread_id, notifications).await
    }

    async fn append_quiet(
        &self,
        thread_id: &str,
        entries: Vec<ToAppend>,
    ) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let timer = Timer::start();
        let events = prepare_entries(thread_id, entries)?;
        timer.stop(Phase::Prepare);
        self.send_append(thread_id, events, false).await?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.ask(|reply| Request::Flush { reply }).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.ask(|reply| Request::Close { reply }).await
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| reads::read_thread(conn, &thread_id))
            .await
    }

    async fn list_threads(&self, query: ThreadListQuery) -> Result<ThreadPage, StoreError> {
        self.read(move |conn| reads::list_threads(conn, &query))
            .await
    }

    async fn turns(&self, thread_id: &str) -> Result<Vec<TurnRecord>, StoreError> {
        self.read_thread_rows(thread_id, |conn, id| reads::read_turns(conn, id, false))
            .await
    }

    async fn items(&self, thread_id: &str, view: View) -> Result<Vec<ItemRecord>, StoreError> {
        self.read_thread_rows(thread_id, move |conn, id| {
            let records = reads::read_items(conn, id, false)?;
            Ok(spool_core::views::keep(records, view))
        })
        .await
    }

    async fn items_page(
        &self,
        thread_id: &str,
        view: View,
        after_ordinal: u64,
        limit: usize,
    ) -> Result<ItemsPage, StoreError> {
        let limit = limit.max(1);
        if view == View::Llm {
            let records = self.items(thread_id, view).await?;
            return Ok(ItemsPage::of_view(records, after_ordinal, limit));
        }
        let scanned = self
            .read_thread_rows(thread_id, move |conn, id| {
                reads::read_items_after(conn, id, after_ordinal, limit)
            })
            .await?;
        Ok(ItemsPage::of_scan(scanned, view, limit))
    }

    async fn llm_view(
        &self,
        thread_id: &str,
        options: LlmViewOptions,
    ) -> Result<LlmView, StoreError> {
        // A view known to be small is read here: the hop to a blocking
        // thread and back costs more than the read (the agent loop reads
        // one before every model call). Others, and a thread's first, are
        // read and packed (which may count tokens) off the async runtime.
        let known_small = self
            .inner
            .view_sizes
            .lock()
            .map(|sizes| {
                sizes
                    .get(thread_id)
                    .is_some_and(|&n| n <= INLINE_VIEW_ITEMS)
            })
            .unwrap_or(false);
        let (view, counts) = match known_small {
            true => self
                .inner
                .readers
                .with(|conn| llm_read::read_llm_view(conn, thread_id, options))?,
            false => {
                let id = thread_id.to_owned();
                self.read(move |conn| llm_read::read_llm_view(conn, &id, options))
                    .await?
            }
        };
        if let Ok(mut sizes) = self.inner.view_sizes.lock() {
            if sizes.len() >= MAX_VIEW_SIZES {
                sizes.clear();
            }
            sizes.insert(thread_id.to_owned(), view.input.len());
        }
        if !counts.is_empty() {
            // A cache, so fire and forget: committed with the next batch.
            self.send(Request::CacheTokenCounts {
                thread_id: thread_id.to_owned(),
                counts,
            })?;
        }
        Ok(view)
    }

    async fn events_after(
        &self,
        thread_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read_thread_rows(thread_id, move |conn, id| {
            reads::read_events_after(conn, id, after_seq, limit)
        })
        .await
    }

    async fn reducer(&self, thread_id: &str) -> Result<ThreadReducer, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| reads::read_reducer(conn, &thread_id))
            .await
    }

    async fn input_items<T: InputJson>(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<InputItems<T>, StoreError> {
        self.read_input_items(thread_id, limit).await
    }

    async fn pop_item(&self, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.ask(|reply| Request::PopNewest { thread_id, reply })
            .await
    }

    async fn open_request(
        &self,
        request: PendingRequest,
        run_state: Option<String>,
    ) -> Result<(), StoreError> {
        let request = Box::new(request);
        self.ask(|reply| {
            Request::Requests(RequestOp::Open {
                request,
                run_state,
                reply,
            })
        })
        .await
    }

    async fn resolve_request(
        &self,
        thread_id: &str,
        request_id: &str,
        answer: serde_json::Value,
    ) -> Result<ResolvedRequest, StoreError> {
        let (thread_id, request_id) = (thread_id.to_owned(), request_id.to_owned());
        self.ask(|reply| {
            Request::Requests(RequestOp::Resolve {
                thread_id,
                request_id,
                answer,
                reply,
            })
        })
        .await
    }

    async fn open_requests(&self, thread_id: &str) -> Result<Vec<PendingRequest>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| requests_read::open_requests(conn, &thread_id))
            .await
    }

    async fn requests(&self, thread_id: &str) -> Result<Vec<PendingRequest>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| requests_read::all_requests(conn, &thread_id))
            .await
    }

    async fn request(
        &self,
        thread_id: &str,
        request_id: &str,
    ) -> Result<Option<PendingRequest>, StoreError> {
        let (thread_id, request_id) = (thread_id.to_owned(), request_id.to_owned());
        self.read(move |conn| requests_read::request(conn, &thread_id, &request_id))
            .await
    }

    async fn save_run_state(
        &self,
        thread_id: &str,
        turn_id: &str,
        state: String,
    ) -> Result<(), StoreError> {
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        self.ask(|reply| {
            Request::Requests(RequestOp::SaveRunState {
                thread_id,
                turn_id,
                state,
                reply,
            })
        })
        .await
    }

    async fn clear_run_state(&self, thread_id: &str, turn_id: &str) -> Result<(), StoreError> {
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        self.ask(|reply| {
            Request::Requests(RequestOp::ClearRunState {
                thread_id,
                turn_id,
                reply,
            })
        })
        .await
    }

    async fn run_states(&self, thread_id: &str) -> Result<Vec<StoredRunState>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| requests_read::run_states(conn, &thread_id))
            .await
    }

    async fn set_archived(
        &self,
        thread_id: &str,
        archived: bool,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        self.set_archived_op(thread_id, archived).await
    }

    async fn revert_turns(
        &self,
        thread_id: &str,
        first_turn_id: &str,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        self.revert_turns_op(thread_id, first_turn_id).await
    }

    async fn llm_records_after(
        &self,
        thread_id: &str,
        after_ordinal: u64,
        item_ids: &[String],
    ) -> Result<Vec<ItemRecord>, StoreError> {
        // A delta is a few records: read here, as the small views are.
        self.inner
            .readers
            .with(|conn| history::read_records_after(conn, thread_id, after_ordinal, item_ids))
    }

    async fn history(&self, thread_id: &str) -> Result<Option<StoredHistory>, StoreError> {
        self.inner
            .readers
            .with(|conn| history::read_cursor(conn, thread_id))
    }

    async fn set_history(
        &self,
        thread_id: &str,
        history: &StoredHistory,
    ) -> Result<(), StoreError> {
        self.set_history_op(thread_id, history).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), StoreError> {
        self.delete_thread_op(thread_id).await
    }

    async fn process_started(
        &self,
        thread_id: &str,
        item_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError> {
        let (thread_id, item_id) = (thread_id.to_owned(), item_id.to_owned());
        self.ask(|reply| {
            Request::Processes(writer::ProcessOp::Started {
                thread_id,
                item_id,
                pgid,
                start_ticks,
                reply,
            })
        })
        .await
    }

    async fn process_ended(&self, thread_id: &str, item_id: &str) -> Result<(), StoreError> {
        let (thread_id, item_id) = (thread_id.to_owned(), item_id.to_owned());
        self.ask(|reply| {
            Request::Processes(writer::ProcessOp::Ended {
                thread_id,
                item_id,
                reply,
            })
        })
        .await
    }

    async fn deleted_at(&self, thread_id: &str) -> Result<Option<i64>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.read(move |conn| {
            use rusqlite::OptionalExtension;
            Ok(conn
                .prepare_cached("SELECT deleted_at_ms FROM deleted_threads WHERE id = ?1")?
                .query_row((thread_id,), |row| row.get(0))
                .optional()?)
        })
        .await
    }

    async fn fork_thread(
        &self,
        new: NewThread,
        source_id: &str,
        before_turn: Option<&str>,
    ) -> Result<ThreadRecord, StoreError> {
        self.fork_thread_op(new, source_id, before_turn).await
    }
}

/// The VFS the writer's connection opens the file through (`spool-wal`,
/// which writes a commit's WAL frames in one call), or `None` where it
/// could not be registered. For tools that write a store file as the store
/// does: the bench's layout floors.
pub fn writer_vfs() -> Option<&'static std::ffi::CStr> {
    vfs::name()
}
