//! The PostgreSQL store's `Store` methods: appends and other writes go to
//! writer threads with a connection of their own (`writer.rs`), each
//! writing the threads of its lane (`lane.rs`); reads use the pool's
//! connections. The handle they run on is in `handle.rs`.

use spool_core::llm::{LlmView, LlmViewOptions};
use spool_core::{ItemRecord, ThreadReducer, TurnRecord, View};
use spool_protocol::{ServerNotification, ThreadEvent};

use super::RemoteCommit;
use super::commands::{self, ForwardReply, Forwarded};
use super::handle::PgStore;
use super::requests::{self, RequestOp};
use super::thread_ops::{self, ThreadOp};
use super::writer::Request;
use super::{llm_read, reads, session};
use crate::Store;
use crate::codec::encode;
use crate::error::StoreError;
use crate::input_json::InputJson;
use crate::thread_state::prepare::{new_thread_record, prepare_append, prepare_entries};
use crate::types::{
    Appended, InputItems, ItemsPage, NewThread, PendingRequest, ResolvedRequest, StoredHistory,
    StoredRunState, ThreadListQuery, ThreadPage, ThreadRecord, ToAppend,
};

impl Store for PgStore {
    /// Listens from the first call on (on the caller's runtime).
    fn remote_commits(&self) -> Option<tokio::sync::broadcast::Receiver<RemoteCommit>> {
        let heard = self.heard();
        let first = self
            .inner
            .first_commits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        Some(first.unwrap_or_else(|| heard.commits.subscribe()))
    }

    async fn held_elsewhere(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        commands::held_elsewhere(&self.client().await?, thread_id, &self.inner.server_id).await
    }

    async fn forward(
        &self,
        holder: &str,
        thread_id: &str,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<ForwardReply, StoreError> {
        // Listening before the command exists, so its reply is heard.
        let replies = self.heard().replies.subscribe();
        let client = self.client().await?;
        let me = &self.inner.server_id;
        commands::forward(&client, me, holder, thread_id, method, params, replies).await
    }

    /// Claims commands for this server as they are announced (and every
    /// second anyway), until the receiver is dropped.
    fn forwarded(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Forwarded>> {
        Some(commands::spawn_claims(
            self.clone(),
            self.heard().commands.clone(),
        ))
    }

    async fn forward_applying(&self, id: &str, thread_id: &str) -> Result<(), StoreError> {
        self.ask(self.lane(thread_id), |reply| Request::Applying {
            command_id: id.to_owned(),
            thread_id: thread_id.to_owned(),
            reply,
        })
        .await
    }

    async fn forward_done(&self, id: &str, reply: &ForwardReply) -> Result<(), StoreError> {
        commands::done(&self.client().await?, id, reply).await
    }

    async fn create_thread(&self, new: NewThread) -> Result<ThreadRecord, StoreError> {
        let (record, started_json, created_at_ms) = new_thread_record(new)?;
        let thread_id = record.thread.id.clone();
        self.ask(self.lane(&thread_id), |reply| Request::Create {
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
        let events = prepare_append(thread_id, notifications)?;
        self.send_append(thread_id, events, true).await
    }

    async fn append_quiet(
        &self,
        thread_id: &str,
        entries: Vec<ToAppend>,
    ) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let events = prepare_entries(thread_id, entries)?;
        self.send_append(thread_id, events, false).await?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.inner
            .writers
            .ask_all(|reply| Request::Flush { reply })
            .await
    }

    async fn close(&self) -> Result<(), StoreError> {
        let closed = self
            .inner
            .writers
            .ask_all(|reply| Request::Close { reply })
            .await;
        // A closed store hears no more and keeps no connection open, even
        // while clones of it live on.
        if let Some((_, listener)) = self.inner.heard.get() {
            listener.abort();
        }
        self.inner.db.pool.close();
        closed
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        reads::read_thread(&self.client().await?, thread_id).await
    }

    async fn list_threads(&self, query: ThreadListQuery) -> Result<ThreadPage, StoreError> {
        reads::list_threads(&self.client().await?, &query).await
    }

    async fn turns(&self, thread_id: &str) -> Result<Vec<TurnRecord>, StoreError> {
        let turns = reads::read_turns(&self.client().await?, thread_id, false).await?;
        self.thread_rows(thread_id, turns).await
    }

    async fn items(&self, thread_id: &str, view: View) -> Result<Vec<ItemRecord>, StoreError> {
        let records = reads::read_items(&self.client().await?, thread_id, false).await?;
        let records = spool_core::views::keep(records, view);
        self.thread_rows(thread_id, records).await
    }

    async fn items_page(
        &self,
        thread_id: &str,
        view: View,
        after: u64,
        limit: usize,
    ) -> Result<ItemsPage, StoreError> {
        let limit = limit.max(1);
        if view == View::Llm {
            return Ok(ItemsPage::of_view(
                self.items(thread_id, view).await?,
                after,
                limit,
            ));
        }
        let rows = reads::read_items_after(&self.client().await?, thread_id, after, limit).await?;
        let scanned = self.thread_rows(thread_id, rows).await?;
        Ok(ItemsPage::of_scan(scanned, view, limit))
    }

    async fn llm_view(
        &self,
        thread_id: &str,
        options: LlmViewOptions,
    ) -> Result<LlmView, StoreError> {
        let (view, counts) = self
            .snapshot(async |tx| llm_read::read_llm_view(tx, thread_id, options).await)
            .await?;
        if !counts.is_empty() {
            // A cache: written outside the writer, since only rows at the
            // seq the counts were computed for take them.
            llm_read::cache_token_counts(&self.client().await?, thread_id, &counts).await?;
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
        let events =
            reads::read_events_after(&self.client().await?, thread_id, after_seq, limit).await?;
        self.thread_rows(thread_id, events).await
    }

    /// One statement for every thread.
    async fn events_after_each(
        &self,
        tails: &[(String, u64)],
        limit: usize,
    ) -> Result<Vec<Vec<ThreadEvent>>, StoreError> {
        if tails.is_empty() || limit == 0 {
            return Ok(vec![Vec::new(); tails.len()]);
        }
        reads::read_events_after_each(&self.client().await?, tails, limit).await
    }

    async fn reducer(&self, thread_id: &str) -> Result<ThreadReducer, StoreError> {
        self.snapshot(async |tx| reads::read_reducer(tx, thread_id).await)
            .await
    }

    async fn input_items<T: InputJson>(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<InputItems<T>, StoreError> {
        self.snapshot(async |tx| session::read_input_items(tx, thread_id, limit).await)
            .await
    }

    async fn pop_item(&self, thread_id: &str) -> Result<Option<ItemRecord>, StoreError> {
        self.ask(self.lane(thread_id), |reply| Request::PopNewest {
            thread_id: thread_id.to_owned(),
            reply,
        })
        .await
    }

    async fn open_request(
        &self,
        request: PendingRequest,
        run_state: Option<String>,
    ) -> Result<(), StoreError> {
        let thread_id = request.thread_id.clone();
        self.ask(self.lane(&thread_id), |reply| {
            Request::Requests(RequestOp::Open {
                request: Box::new(request),
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
        let lane = self.lane(thread_id);
        let (thread_id, request_id) = (thread_id.to_owned(), request_id.to_owned());
        self.ask(lane, |reply| {
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
        requests::open_requests(&self.client().await?, thread_id).await
    }

    async fn requests(&self, thread_id: &str) -> Result<Vec<PendingRequest>, StoreError> {
        requests::all_requests(&self.client().await?, thread_id).await
    }

    async fn request(
        &self,
        thread_id: &str,
        request_id: &str,
    ) -> Result<Option<PendingRequest>, StoreError> {
        requests::request(&self.client().await?, thread_id, request_id).await
    }

    async fn save_run_state(
        &self,
        thread_id: &str,
        turn_id: &str,
        state: String,
    ) -> Result<(), StoreError> {
        let lane = self.lane(thread_id);
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        self.ask(lane, |reply| {
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
        let lane = self.lane(thread_id);
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        self.ask(lane, |reply| {
            Request::Requests(RequestOp::ClearRunState {
                thread_id,
                turn_id,
                reply,
            })
        })
        .await
    }

    async fn run_states(&self, thread_id: &str) -> Result<Vec<StoredRunState>, StoreError> {
        requests::run_states(&self.client().await?, thread_id).await
    }

    async fn set_archived(
        &self,
        thread_id: &str,
        archived: bool,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        let lane = self.lane(thread_id);
        let thread_id = thread_id.to_owned();
        self.ask(lane, |reply| {
            Request::Threads(ThreadOp::SetArchived {
                thread_id,
                archived,
                reply,
            })
        })
        .await
    }

    async fn revert_turns(
        &self,
        thread_id: &str,
        first_turn_id: &str,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        let lane = self.lane(thread_id);
        let (thread_id, first_turn_id) = (thread_id.to_owned(), first_turn_id.to_owned());
        self.ask(lane, |reply| {
            Request::Threads(ThreadOp::Revert {
                thread_id,
                first_turn_id,
                reply,
            })
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), StoreError> {
        let lane = self.lane(thread_id);
        let thread_id = thread_id.to_owned();
        self.ask(lane, |reply| {
            Request::Threads(ThreadOp::Delete { thread_id, reply })
        })
        .await
    }

    async fn process_started(
        &self,
        thread_id: &str,
        item_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError> {
        let me = &self.inner.server_id;
        let client = self.client().await?;
        thread_ops::process_started(&client, me, thread_id, item_id, pgid, start_ticks).await
    }

    async fn process_ended(&self, thread_id: &str, item_id: &str) -> Result<(), StoreError> {
        thread_ops::process_ended(&self.client().await?, thread_id, item_id).await
    }

    async fn deleted_at(&self, thread_id: &str) -> Result<Option<i64>, StoreError> {
        thread_ops::deleted_at(&self.client().await?, thread_id).await
    }

    async fn llm_records_after(
        &self,
        thread_id: &str,
        after_ordinal: u64,
        item_ids: &[String],
    ) -> Result<Vec<ItemRecord>, StoreError> {
        self.snapshot(async |tx| {
            thread_ops::records_after(tx, thread_id, after_ordinal, item_ids).await
        })
        .await
    }

    async fn history(&self, thread_id: &str) -> Result<Option<StoredHistory>, StoreError> {
        thread_ops::read_history(&self.client().await?, thread_id).await
    }

    async fn set_history(
        &self,
        thread_id: &str,
        history: &StoredHistory,
    ) -> Result<(), StoreError> {
        let lane = self.lane(thread_id);
        let thread_id = thread_id.to_owned();
        let cursor_json = encode("history cursor", &history.cursor)?;
        let conversation_id = history.conversation_id.clone();
        self.ask(lane, |reply| {
            Request::Threads(ThreadOp::SetHistory {
                thread_id,
                cursor_json,
                conversation_id,
                reply,
            })
        })
        .await
    }

    async fn fork_thread(
        &self,
        new: NewThread,
        source_id: &str,
        before_turn: Option<&str>,
    ) -> Result<ThreadRecord, StoreError> {
        let (record, started_json, created_at_ms) = new_thread_record(new)?;
        let (source_id, before_turn) = (source_id.to_owned(), before_turn.map(str::to_owned));
        let thread_id = record.thread.id.clone();
        self.ask(self.lane(&thread_id), |reply| {
            Request::Threads(ThreadOp::Fork {
                record: Box::new(record),
                started_json,
                created_at_ms,
                source_id,
                before_turn,
                reply,
            })
        })
        .await
    }
}
