//! A compacting session: the Session API's conversation memory, kept
//! within a model's context window by compaction, as the Agents SDK's
//! compaction session wraps another session.
//!
//! It wraps a [`Session`] and a [`Runner`]. Items go in and come out as
//! the session's do. After each `add_items`, when the session's history
//! would pass the runner's [`CompactionPolicy`](crate::CompactionPolicy),
//! the runner compacts the session's thread: a turn of its own whose
//! `contextCompaction` item holds a summary written by the agent's model
//! (or, in no other case here, the provider's compacted items; a session
//! is always in `replay` mode). From then on `get_items` returns the
//! summary, as one user message, and the items added after it.
//!
//! Nothing is deleted, unlike the Agents SDK's compaction session, which
//! clears the session it wraps and refills it: the `all` view, and the
//! thread's log, still hold every item the caller added. `pop_item` right
//! after a compaction removes the compaction itself, which undoes it.
//!
//! A compaction reads the history it summarizes before it records its
//! item. Items another handle adds to the same session in between are in
//! neither the summary nor the items after it; callers that add from
//! several places at once should compact from one of them only.

use std::sync::Arc;

use serde_json::Value;
use spool_store::{Session, Store, StoreError};

use crate::agent::Agent;
use crate::runner::{RunError, RunResult, Runner};

/// A [`Session`] that compacts itself (see the module docs).
pub struct CompactingSession<S> {
    session: Session<S>,
    runner: Runner<S>,
    agent: Arc<Agent>,
}

impl<S: Store + Clone + 'static> CompactingSession<S> {
    /// Opens the session with this id in the runner's store, creating it
    /// if it does not exist. Summaries are written by `agent`'s model,
    /// through the runner's provider; the runner's `compaction` policy
    /// says when (`None`: only when [`CompactingSession::compact`] is
    /// called).
    pub async fn open(
        runner: Runner<S>,
        agent: Arc<Agent>,
        session_id: &str,
    ) -> Result<CompactingSession<S>, RunError> {
        let session = Session::open(runner.store.clone(), session_id).await?;
        Ok(CompactingSession {
            session,
            runner,
            agent,
        })
    }

    /// The session it wraps.
    pub fn session(&self) -> &Session<S> {
        &self.session
    }

    pub fn id(&self) -> &str {
        self.session.id()
    }

    /// As [`Session::get_items`]: after a compaction, its summary first,
    /// then the newer items.
    pub async fn get_items(&self, limit: Option<usize>) -> Result<Vec<Value>, StoreError> {
        self.session.get_items(limit).await
    }

    /// As [`Session::get_items_raw`]: [`CompactingSession::get_items`]'s
    /// items as JSON text.
    pub async fn get_items_raw(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<Box<serde_json::value::RawValue>>, StoreError> {
        self.session.get_items_raw(limit).await
    }

    /// Adds the items as [`Session::add_items`] does (durable before any
    /// model call), then compacts when the history passes the policy.
    /// Returns the compaction's result when there was one. A compaction
    /// whose model call fails is recorded as a failed turn and replaces
    /// nothing (the items are all still there); it is tried again after
    /// the next `add_items`. An `Err` after the items were added (the
    /// model provider or the store failing) leaves them added.
    pub async fn add_items(&self, items: Vec<Value>) -> Result<Option<RunResult>, RunError> {
        self.session.add_items(items).await?;
        if !self.runner.needs_compaction(self.session.id(), &[]).await? {
            return Ok(None);
        }
        self.compact().await.map(Some)
    }

    /// Compacts now, whatever the policy says.
    pub async fn compact(&self) -> Result<RunResult, RunError> {
        self.runner
            .compact(self.agent.clone(), self.session.id())
            .await
    }

    /// As [`Session::pop_item`].
    pub async fn pop_item(&self) -> Result<Option<Value>, StoreError> {
        self.session.pop_item().await
    }

    /// As [`Session::clear`]: the summary goes too.
    pub async fn clear(&self) -> Result<(), StoreError> {
        self.session.clear().await
    }
}
