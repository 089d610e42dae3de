//! One store type for every backend, chosen when a process starts.
//!
//! The server, the runtime it drives and the CLI's commands hold an
//! [`AnyStore`] and use it only through [`Store`], so none of them names a
//! backend: a backend is one more variant here and one more arm in each
//! method below. An enum rather than a trait object, because [`Store`]'s
//! methods return `impl Future` (and one is generic), which a `dyn Store`
//! cannot express; the cost of the choice is one `match` per call.

use spool_core::llm::{LlmView, LlmViewOptions};
use spool_core::{ItemRecord, ThreadReducer, TurnRecord, View};
use spool_protocol::{ServerNotification, ThreadEvent};

use crate::Store;
use crate::error::StoreError;
use crate::input_json::InputJson;
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::types::{
    Appended, InputItems, ItemsPage, NewThread, PendingRequest, ResolvedRequest, StoredHistory,
    StoredRunState, ThreadListQuery, ThreadPage, ThreadRecord, ToAppend,
};

/// A store of any backend (see the module docs). Cheap to clone: every
/// clone is a handle on the same store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyStore {
    /// The embedded store: one SQLite file, one writer thread.
    Sqlite(SqliteStore),
    /// PostgreSQL, being built (see `crate::postgres`): nothing selects it
    /// outside tests until it has every operation.
    Postgres(PgStore),
}

impl From<PgStore> for AnyStore {
    fn from(store: PgStore) -> Self {
        AnyStore::Postgres(store)
    }
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> Self {
        AnyStore::Sqlite(store)
    }
}

/// Runs `$call` on the backend behind `$self`, bound to `$store`.
macro_rules! on_backend {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($store) => $call,
            AnyStore::Postgres($store) => $call,
        }
    };
}

impl Store for AnyStore {
    fn remote_commits(&self) -> Option<tokio::sync::broadcast::Receiver<crate::RemoteCommit>> {
        on_backend!(self, store => store.remote_commits())
    }

    async fn held_elsewhere(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        on_backend!(self, store => store.held_elsewhere(thread_id).await)
    }

    async fn forward(
        &self,
        holder: &str,
        thread_id: &str,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<crate::ForwardReply, StoreError> {
        on_backend!(self, store => store.forward(holder, thread_id, method, params).await)
    }

    fn forwarded(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<crate::Forwarded>> {
        on_backend!(self, store => store.forwarded())
    }

    async fn forward_applying(&self, id: &str, thread_id: &str) -> Result<(), StoreError> {
        on_backend!(self, store => store.forward_applying(id, thread_id).await)
    }

    async fn forward_done(&self, id: &str, reply: &crate::ForwardReply) -> Result<(), StoreError> {
        on_backend!(self, store => store.forward_done(id, reply).await)
    }

    async fn create_thread(&self, new: NewThread) -> Result<ThreadRecord, StoreError> {
        on_backend!(self, store => store.create_thread(new).await)
    }

    async fn append(
        &self,
        thread_id: &str,
        notifications: Vec<ServerNotification>,
    ) -> Result<Vec<Appended>, StoreError> {
        on_backend!(self, store => store.append(thread_id, notifications).await)
    }

    async fn append_quiet(
        &self,
        thread_id: &str,
        entries: Vec<ToAppend>,
    ) -> Result<(), StoreError> {
        on_backend!(self, store => store.append_quiet(thread_id, entries).await)
    }

    async fn flush(&self) -> Result<(), StoreError> {
        on_backend!(self, store => store.flush().await)
    }

    async fn close(&self) -> Result<(), StoreError> {
        on_backend!(self, store => store.close().await)
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        on_backend!(self, store => store.thread(thread_id).await)
    }

    async fn list_threads(&self, query: ThreadListQuery) -> Result<ThreadPage, StoreError> {
        on_backend!(self, store => store.list_threads(query).await)
    }

    async fn turns(&self, thread_id: &str) -> Result<Vec<TurnRecord>, StoreError> {
        on_backend!(self, store => store.turns(thread_id).await)
    }

    async fn items(&self, thread_id: &str, view: View) -> Result<Vec<ItemRecord>, StoreError> {
        on_backend!(self, store => store.items(thread_id, view).await)
    }

    async fn items_page(
        &self,
        thread_id: &str,
        view: View,
        after_ordinal: u64,
        limit: usize,
    ) -> Result<ItemsPage, StoreError> {
        on_backend!(self, store => store.items_page(thread_id, view, after_ordinal, limit).await)
    }

    async fn llm_view(
        &self,
        thread_id: &str,
        options: LlmViewOptions,
    ) -> Result<LlmView, StoreError> {
        on_backend!(self, store => store.llm_view(thread_id, options).await)
    }

    async fn events_after(
        &self,
        thread_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        on_backend!(self, store => store.events_after(thread_id, after_seq, limit).await)
    }

    async fn events_after_each(
        &self,
        tails: &[(String, u64)],
        limit: usize,
    ) -> Result<Vec<Vec<ThreadEvent>>, StoreError> {
        on_backend!(self, store => store.events_after_each(tails, limit).await)
    }

    async fn reducer(&self, thread_id: &str) -> Result<ThreadReducer, StoreError> {
        on_backend!(self, store => store.reducer(thread_id).await)
    }

    async fn input_items<T: InputJson>(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<InputItems<T>, StoreError> {
        on_backend!(self, store => store.input_items(thread_id, limit).await)
    }

    async fn pop_item(&self, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        on_backend!(self, store => store.pop_item(thread_id).await)
    }

    async fn open_request(
        &self,
        request: PendingRequest,
        run_state: Option<String>,
    ) -> Result<(), StoreError> {
        on_backend!(self, store => store.open_request(request, run_state).await)
    }

    async fn resolve_request(
        &self,
        thread_id: &str,
        request_id: &str,
        answer: serde_json::Value,
    ) -> Result<ResolvedRequest, StoreError> {
        on_backend!(self, store => store.resolve_request(thread_id, request_id, answer).await)
    }

    async fn open_requests(&self, thread_id: &str) -> Result<Vec<PendingRequest>, StoreError> {
        on_backend!(self, store => store.open_requests(thread_id).await)
    }

    async fn requests(&self, thread_id: &str) -> Result<Vec<PendingRequest>, StoreError> {
        on_backend!(self, store => store.requests(thread_id).await)
    }

    async fn request(
        &self,
        thread_id: &str,
        request_id: &str,
    ) -> Result<Option<PendingRequest>, StoreError> {
        on_backend!(self, store => store.request(thread_id, request_id).await)
    }

    async fn save_run_state(
        &self,
        thread_id: &str,
        turn_id: &str,
        state: String,
    ) -> Result<(), StoreError> {
        on_backend!(self, store => store.save_run_state(thread_id, turn_id, state).await)
    }

    async fn clear_run_state(&self, thread_id: &str, turn_id: &str) -> Result<(), StoreError> {
        on_backend!(self, store => store.clear_run_state(thread_id, turn_id).await)
    }

    async fn run_states(&self, thread_id: &str) -> Result<Vec<StoredRunState>, StoreError> {
        on_backend!(self, store => store.run_states(thread_id).await)
    }

    async fn set_archived(
        &self,
        thread_id: &str,
        archived: bool,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        on_backend!(self, store => store.set_archived(thread_id, archived).await)
    }

    async fn revert_turns(
        &self,
        thread_id: &str,
        first_turn_id: &str,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        on_backend!(self, store => store.revert_turns(thread_id, first_turn_id).await)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), StoreError> {
        on_backend!(self, store => store.delete_thread(thread_id).await)
    }

    async fn process_started(
        &self,
        thread_id: &str,
        item_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError> {
        on_backend!(self, store => store.process_started(thread_id, item_id, pgid, start_ticks).await)
    }

    async fn process_ended(&self, thread_id: &str, item_id: &str) -> Result<(), StoreError> {
        on_backend!(self, store => store.process_ended(thread_id, item_id).await)
    }

    async fn deleted_at(&self, thread_id: &str) -> Result<Option<i64>, StoreError> {
        on_backend!(self, store => store.deleted_at(thread_id).await)
    }

    async fn llm_records_after(
        &self,
        thread_id: &str,
        after_ordinal: u64,
        item_ids: &[String],
    ) -> Result<Vec<ItemRecord>, StoreError> {
        on_backend!(self, store => store.llm_records_after(thread_id, after_ordinal, item_ids).await)
    }

    async fn history(&self, thread_id: &str) -> Result<Option<StoredHistory>, StoreError> {
        on_backend!(self, store => store.history(thread_id).await)
    }

    async fn set_history(
        &self,
        thread_id: &str,
        history: &StoredHistory,
    ) -> Result<(), StoreError> {
        on_backend!(self, store => store.set_history(thread_id, history).await)
    }

    async fn fork_thread(
        &self,
        new: NewThread,
        source_id: &str,
        before_turn: Option<&str>,
    ) -> Result<ThreadRecord, StoreError> {
        on_backend!(self, store => store.fork_thread(new, source_id, before_turn).await)
    }
}
