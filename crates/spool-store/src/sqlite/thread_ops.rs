//! Whole-thread operations of the SQLite store: archive, revert, fork.
//! The writer does the work in one transaction each
//! (`writer/thread_ops.rs`); this side prepares the requests.

use spool_protocol::ThreadEvent;

use super::SqliteStore;
use super::codec::encode;
use super::writer::{Request, ThreadOp};
use crate::error::StoreError;
use crate::thread_state::prepare::new_thread_record;
use crate::types::{NewThread, StoredHistory, ThreadRecord};

impl SqliteStore {
    pub(super) async fn set_archived_op(
        &self,
        thread_id: &str,
        archived: bool,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        let thread_id = thread_id.to_owned();
        self.ask(|reply| {
            Request::Threads(ThreadOp::SetArchived {
                thread_id,
                archived,
                reply,
            })
        })
        .await
    }

    pub(super) async fn set_history_op(
        &self,
        thread_id: &str,
        history: &StoredHistory,
    ) -> Result<(), StoreError> {
        let thread_id = thread_id.to_owned();
        let cursor_json = encode("history cursor", &history.cursor)?;
        let conversation_id = history.conversation_id.clone();
        self.ask(|reply| {
            Request::Threads(ThreadOp::SetHistory {
                thread_id,
                cursor_json,
                conversation_id,
                reply,
            })
        })
        .await
    }

    pub(super) async fn delete_thread_op(&self, thread_id: &str) -> Result<(), StoreError> {
        let thread_id = thread_id.to_owned();
        self.ask(|reply| Request::Threads(ThreadOp::Delete { thread_id, reply }))
            .await
    }

    pub(super) async fn revert_turns_op(
        &self,
        thread_id: &str,
        first_turn_id: &str,
    ) -> Result<Vec<ThreadEvent>, StoreError> {
        let (thread_id, first_turn_id) = (thread_id.to_owned(), first_turn_id.to_owned());
        self.ask(|reply| {
            Request::Threads(ThreadOp::Revert {
                thread_id,
                first_turn_id,
                reply,
            })
        })
        .await
    }

    pub(super) async fn fork_thread_op(
        &self,
        new: NewThread,
        source_id: &str,
        before_turn: Option<&str>,
    ) -> Result<ThreadRecord, StoreError> {
        let (record, started_json, created_at_ms) = new_thread_record(new)?;
        let source_id = source_id.to_owned();
        let before_turn = before_turn.map(str::to_owned);
        self.ask(|reply| {
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
