//! What a store's writer is asked beside appends, the same for every
//! backend: pending requests and run states, and whole-thread operations.
//! Each is answered through a [`Reply`] once it is durable.

use serde_json::Value;
use tokio::sync::oneshot;

use crate::error::StoreError;
use crate::types::{PendingRequest, ResolvedRequest, ThreadRecord};
use spool_protocol::ThreadEvent;

/// Where a writer sends its answer.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What the writer is asked about requests and run states.
pub(crate) enum RequestOp {
    /// Records a request (and the run state that waits on it).
    Open {
        request: Box<PendingRequest>,
        run_state: Option<String>,
        reply: Reply<()>,
    },
    /// Records the answer and logs `serverRequest/resolved`.
    Resolve {
        thread_id: String,
        request_id: String,
        answer: Value,
        reply: Reply<ResolvedRequest>,
    },
    SaveRunState {
        thread_id: String,
        turn_id: String,
        state: String,
        reply: Reply<()>,
    },
    ClearRunState {
        thread_id: String,
        turn_id: String,
        reply: Reply<()>,
    },
}

/// Thread-wide operations: archive, delete, revert, the history cursor,
/// fork (what each logs is `thread_state::ops`'s).
pub(crate) enum ThreadOp {
    /// Archives (logging `thread/archived`) or unarchives a thread.
    SetArchived {
        thread_id: String,
        archived: bool,
        reply: Reply<Vec<ThreadEvent>>,
    },
    /// Removes the thread and everything of it, leaving its id in
    /// `deleted_threads`.
    Delete { thread_id: String, reply: Reply<()> },
    /// Removes `first_turn_id` and every later turn from the history.
    Revert {
        thread_id: String,
        first_turn_id: String,
        reply: Reply<Vec<ThreadEvent>>,
    },
    /// Records what the provider holds of the thread's history.
    SetHistory {
        thread_id: String,
        cursor_json: String,
        conversation_id: Option<String>,
        reply: Reply<()>,
    },
    /// Creates `record`'s thread holding a copy of the source's finished
    /// turns before `before_turn` (all of them when `None`).
    Fork {
        record: Box<ThreadRecord>,
        started_json: String,
        created_at_ms: i64,
        source_id: String,
        before_turn: Option<String>,
        reply: Reply<ThreadRecord>,
    },
}
