//! What the turn loop needs from the store: append events and get seqs
//! back, read the model's view of history, and the thread's token total.

use std::future::Future;

use spool_protocol::responses::ResponseItem;
use spool_protocol::{ServerNotification, ThreadEvent, TokenUsageBreakdown};

use crate::RuntimeError;

/// An event as the turn loop hands it to its caller.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamedEvent {
    /// Stored in the thread's log under `seq` (deltas may not be committed yet).
    Logged(ThreadEvent),
    /// Streamed only, never stored (the persistence policy of DESIGN §1).
    Transient(ServerNotification),
}

impl StreamedEvent {
    pub fn payload(&self) -> &ServerNotification {
        match self {
            StreamedEvent::Logged(e) => &e.payload,
            StreamedEvent::Transient(n) => n,
        }
    }
}

/// The store, as the turn loop sees it.
pub trait EventSink: Send + Sync {
    /// Appends events in order; resolves once lifecycle events are durable
    /// and deltas have their seq.
    fn append(
        &self,
        thread_id: &str,
        payloads: Vec<ServerNotification>,
    ) -> impl Future<Output = Result<Vec<StreamedEvent>, RuntimeError>> + Send;

    /// The `llm` view of the thread as Responses API input items.
    fn llm_input(
        &self,
        thread_id: &str,
        token_budget: Option<usize>,
    ) -> impl Future<Output = Result<Vec<ResponseItem>, RuntimeError>> + Send;

    /// Token usage of the thread's completed turns, summed.
    fn token_usage_total(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<TokenUsageBreakdown, RuntimeError>> + Send;
}
