//! spool's durable store: the append-only log of every thread and the
//! projections built from it (`docs/internals/log.md`).
//!
//! [`Store`] is the interface; [`SqliteStore`] the embedded implementation;
//! [`AnyStore`] the one type the layers above hold, whatever the backend.
//!
//! # Guarantees
//!
//! - Every stored event of a thread has a per-thread, gap-free seq starting
//!   at 1 (`thread/started`), assigned by the single writer at append.
//! - Every appended event goes through the one reducer
//!   ([`spool_core::ThreadReducer`]) first; an append with a protocol
//!   violation is refused whole ([`StoreError::Refused`]) and stores
//!   nothing, without affecting other appends.
//! - Lifecycle events are committed before `append` returns. Deltas are
//!   acknowledged with their seq at once and committed in groups within
//!   [`StoreOptions::delta_commit_delay`], or with the next lifecycle event;
//!   [`Store::flush`] waits for everything appended so far.
//! - The persistence policy is applied here: events about
//!   `status` items are never stored, `stateChange`/`resourceChange` only for
//!   threads in dev mode; they come back as [`Appended::Transient`].
//! - The item and turn projections (on SQLite both rows of `items`, on
//!   PostgreSQL `items` and `turns`) are updated in the same
//!   transaction as the events that changed them, so reads never replay
//!   the log.
//! - A row that cannot be decoded is a [`StoreError::CorruptRow`] naming the
//!   table, thread, seq and item; never a panic, never skipped.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod any;
mod appender;
mod born;
mod codec;
mod error;
mod input_json;
mod mark;
mod options;
pub mod phases;
pub mod postgres;
pub mod processes;
mod recovery;
mod session;
mod sqlite;
mod thread_state;
mod types;
mod view_read;
mod write_ops;

use std::future::Future;

use spool_core::llm::{LlmView, LlmViewOptions};
use spool_core::{ItemRecord, ThreadReducer, TurnRecord, View};
use spool_protocol::{ServerNotification, ThreadEvent};

pub use any::AnyStore;
pub use appender::Appender;
pub use error::{CorruptRow, DecodeCause, StoreError};
pub use input_json::InputJson;
pub use options::{Durability, StoreOptions};
pub use postgres::{ForwardReply, Forwarded, RemoteCommit};
pub use session::Session;
pub use sqlite::schema::{CHECKS_FOREIGN_KEYS, READER_MMAP_BYTES, SCHEMA_VERSION};
pub use sqlite::{SqliteStore, writer_vfs};
pub use types::{
    Appended, InputItems, ItemsPage, NewThread, PendingRequest, ResolvedRequest, StoredHistory,
    StoredRunState, ThreadListQuery, ThreadPage, ThreadRecord, ThreadSortKey, ToAppend,
};

/// A thread store: the log of every thread and its projections.
///
/// Writes go through one writer; reads see what is committed (deltas that
/// are acknowledged but not yet committed are not in reads until the next
/// group commit or [`Store::flush`]).
pub trait Store: Send + Sync {
    /// Creates a thread and logs its `thread/started` as seq 1, durably.
    fn create_thread(
        &self,
        new: NewThread,
    ) -> impl Future<Output = Result<ThreadRecord, StoreError>> + Send;

    /// Appends notifications of one thread, in order. Each comes back as
    /// [`Appended::Logged`] with its seq, or [`Appended::Transient`] if the
    /// persistence policy does not store it. All or nothing: if the reducer
    /// refuses one, nothing of this append is stored.
    ///
    /// Returns once the stored lifecycle events are committed; an append of
    /// deltas only returns as soon as they have their seqs. Once sent to the
    /// writer an append goes through even if this future is dropped.
    fn append(
        &self,
        thread_id: &str,
        notifications: Vec<ServerNotification>,
    ) -> impl Future<Output = Result<Vec<Appended>, StoreError>> + Send;

    /// [`Store::append`] for a caller that does not use what was appended
    /// (the Session API): the same checks, the same durability, and only
    /// success or the error back. The writer then neither rebuilds the
    /// starts of items born complete nor copies their completions to hand
    /// them back. An item born complete may be given as its completion
    /// alone ([`ToAppend::BornComplete`]); a refusal's index counts it as
    /// its start and its completion.
    fn append_quiet(
        &self,
        thread_id: &str,
        entries: Vec<ToAppend>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Waits until everything appended before the call is committed.
    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Flushes and stops the writer; later writes fail with
    /// [`StoreError::Closed`]. Dropping the last handle does the same.
    fn close(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    fn thread(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Option<ThreadRecord>, StoreError>> + Send;

    /// Threads, newest first, one page at a time.
    fn list_threads(
        &self,
        query: ThreadListQuery,
    ) -> impl Future<Output = Result<ThreadPage, StoreError>> + Send;

    /// A thread's turns in the order they started.
    fn turns(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Vec<TurnRecord>, StoreError>> + Send;

    /// A thread's items in `view`, in the order they started. For
    /// [`View::Llm`] these are the records the model view is built from,
    /// unpacked; [`Store::llm_view`] packs them under a budget.
    fn items(
        &self,
        thread_id: &str,
        view: View,
    ) -> impl Future<Output = Result<Vec<ItemRecord>, StoreError>> + Send;

    /// One page of a thread's items in `view`: those with an ordinal
    /// greater than `after_ordinal`, in ordinal order, from at most `limit`
    /// item rows read (at least one), so a page costs the same whatever the
    /// thread's length. Pass [`ItemsPage::next_after`] back for the next
    /// page; concatenated, the pages are [`Store::items`]. An in-progress
    /// item comes with its committed deltas applied, as there.
    ///
    /// [`View::Llm`] depends on the whole thread (nothing before the latest
    /// compaction), so it is read whole and its first `limit` records
    /// after the cursor make the page.
    fn items_page(
        &self,
        thread_id: &str,
        view: View,
        after_ordinal: u64,
        limit: usize,
    ) -> impl Future<Output = Result<ItemsPage, StoreError>> + Send;

    /// The input of the thread's next model request, under the options'
    /// token budget. Token counts it had to compute are cached in the store.
    fn llm_view(
        &self,
        thread_id: &str,
        options: LlmViewOptions,
    ) -> impl Future<Output = Result<LlmView, StoreError>> + Send;

    /// At most `limit` committed events with seq greater than `after_seq`,
    /// in seq order: pass the last seq seen to get the next page.
    ///
    /// Acknowledged deltas that no commit has covered yet are not here; a
    /// reader that must see everything acknowledged so far (a reconnecting
    /// client joining the live tail) calls [`Store::flush`] first.
    fn events_after(
        &self,
        thread_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ThreadEvent>, StoreError>> + Send;

    /// For each `(thread, after_seq)` of `tails`, what
    /// [`Store::events_after`] gives it, in the same order (a thread that
    /// does not exist gives none): what a follower of many threads reads at
    /// once. A backend may read them all in one round trip.
    fn events_after_each(
        &self,
        tails: &[(String, u64)],
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Vec<ThreadEvent>>, StoreError>> + Send {
        async move {
            let mut all = Vec::with_capacity(tails.len());
            for (thread_id, after_seq) in tails {
                all.push(
                    match self.events_after(thread_id, *after_seq, limit).await {
                        Ok(events) => events,
                        Err(StoreError::UnknownThread(_)) => Vec::new(),
                        Err(error) => return Err(error),
                    },
                );
            }
            Ok(all)
        }
    }

    /// A reducer holding the thread's committed projection (all items and
    /// turns), ready to apply the events that follow.
    fn reducer(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<ThreadReducer, StoreError>> + Send;

    /// The newest `limit` of the thread's input items (`None`: all), oldest
    /// first: the items in the model's view, each as its raw input item
    /// when it has one (the Session API's) or converted as the model view
    /// converts it. Committed items only. Reading stops at the latest
    /// finished compaction, which comes as what it stands for (its summary
    /// or the provider's compacted items), as in the model view; `complete`
    /// is then false. No window rule is applied here: that is
    /// [`Session::get_items`]' business, the same for every store.
    fn input_items<T: InputJson>(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> impl Future<Output = Result<InputItems<T>, StoreError>> + Send;

    /// Atomically removes the thread's newest item in the model's view
    /// (logging `item/removed`) and returns it; `None` when there is none.
    /// Choosing the item and committing its removal are one step: two pops
    /// never get the same item, and an append cannot slip in between.
    /// Durable when it returns.
    fn pop_item(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Option<ItemRecord>, StoreError>> + Send;

    /// Records a request a run waits on (an approval, a client-run tool
    /// call) and, when given, the run state to resume from, in one
    /// transaction. Durable when it returns.
    fn open_request(
        &self,
        request: PendingRequest,
        run_state: Option<String>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Records the answer to a waiting request and logs
    /// `serverRequest/resolved`, in one transaction; returns the request
    /// with its answer. A request that does not exist in the thread is
    /// [`StoreError::UnknownRequest`]; one already answered is
    /// [`StoreError::RequestAlreadyResolved`] (the first answer stands).
    fn resolve_request(
        &self,
        thread_id: &str,
        request_id: &str,
        answer: serde_json::Value,
    ) -> impl Future<Output = Result<ResolvedRequest, StoreError>> + Send;

    /// The thread's requests still waiting for an answer, oldest first.
    fn open_requests(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Vec<PendingRequest>, StoreError>> + Send;

    /// Every request of the thread, answered or not, oldest first.
    fn requests(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Vec<PendingRequest>, StoreError>> + Send;

    /// One request of the thread, answered or not.
    fn request(
        &self,
        thread_id: &str,
        request_id: &str,
    ) -> impl Future<Output = Result<Option<PendingRequest>, StoreError>> + Send;

    /// Saves (replaces) the run state of a turn, durably. While a turn has
    /// one, crash recovery leaves it open for the runtime to resume.
    fn save_run_state(
        &self,
        thread_id: &str,
        turn_id: &str,
        state: String,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Forgets a turn's run state (the turn ended), durably.
    fn clear_run_state(
        &self,
        thread_id: &str,
        turn_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The thread's saved run states, in turn order.
    fn run_states(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Vec<StoredRunState>, StoreError>> + Send;

    /// Archives the thread (logging `thread/archived` and its status
    /// `notLoaded`) or unarchives it (logging `thread/unarchived`), and
    /// returns the logged events. Already in that state: nothing changes,
    /// none. Durable when it returns.
    fn set_archived(
        &self,
        thread_id: &str,
        archived: bool,
    ) -> impl Future<Output = Result<Vec<ThreadEvent>, StoreError>> + Send;

    /// Removes `first_turn_id` and every later turn from the thread's
    /// history by logging `item/removed` for each of their items (the log
    /// keeps them; the projections drop them), atomically, and returns the
    /// logged events. Refused ([`StoreError::Refused`]) while a turn is in
    /// progress or when the turn is unknown. Durable when it returns.
    fn revert_turns(
        &self,
        thread_id: &str,
        first_turn_id: &str,
    ) -> impl Future<Output = Result<Vec<ThreadEvent>, StoreError>> + Send;

    /// Deletes the thread: its log, projections, requests and run states,
    /// in one transaction, leaving only its id and the time in the record
    /// of deleted threads ([`Store::deleted_at`]). Refused
    /// ([`StoreError::Refused`]) while a turn is in progress. Durable when
    /// it returns.
    fn delete_thread(&self, thread_id: &str)
    -> impl Future<Output = Result<(), StoreError>> + Send;

    /// A command started for `item_id` runs as process group `pgid`, whose
    /// leader started `start_ticks` clock ticks after boot (field 22 of
    /// `/proc/PID/stat`). Recorded, durably, so that the crash recovery of
    /// the next open kills the group if a crash left it running; removed by
    /// [`Store::process_ended`].
    fn process_started(
        &self,
        thread_id: &str,
        item_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The command of `item_id` is over (see [`Store::process_started`]).
    fn process_ended(
        &self,
        thread_id: &str,
        item_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// When the thread was deleted (unix ms), if it was.
    fn deleted_at(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;

    /// The thread's records in the model's view after `after_ordinal`, and
    /// those among `item_ids` at or before it, in ordinal order: what the
    /// next request of a server-managed history is prepared from
    /// ([`spool_core::llm::HistoryCursor::prepare`]). Committed records
    /// only; the cost is the records returned.
    fn llm_records_after(
        &self,
        thread_id: &str,
        after_ordinal: u64,
        item_ids: &[String],
    ) -> impl Future<Output = Result<Vec<ItemRecord>, StoreError>> + Send;

    /// What a provider holds of the thread's history; `None` when nothing
    /// was recorded (a `replay` thread, or one that never made a request).
    fn history(
        &self,
        thread_id: &str,
    ) -> impl Future<Output = Result<Option<StoredHistory>, StoreError>> + Send;

    /// Records what a provider holds of the thread's history, after
    /// committing every event appended before it: the cursor never covers
    /// an event a crash could still lose.
    fn set_history(
        &self,
        thread_id: &str,
        history: &StoredHistory,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Creates the thread `new` holding a copy of `source_id`'s finished
    /// turns before `before_turn` (all of them when `None`; a turn in
    /// progress and what follows are never copied, nor turns whose items
    /// were all removed): each logged in the new thread as `turn/started`,
    /// its items as `item/started` + `item/completed`, and `turn/completed`,
    /// with the source's ids. One transaction; the source is only read.
    fn fork_thread(
        &self,
        new: NewThread,
        source_id: &str,
        before_turn: Option<&str>,
    ) -> impl Future<Output = Result<ThreadRecord, StoreError>> + Send;

    /// What other processes writing this store commit, as they commit it,
    /// for a server to pass on to its watchers of threads it does not
    /// write (PostgreSQL; `None` for a store only this process writes).
    /// A notice says when to read the log by cursor, never what is in it.
    fn remote_commits(&self) -> Option<tokio::sync::broadcast::Receiver<RemoteCommit>> {
        None
    }

    /// The server holding `thread_id` now, when it is another process than
    /// this one (PostgreSQL): a request that appends to the thread is
    /// [`Store::forward`]ed there. `None` for a store only this process
    /// writes.
    fn held_elsewhere(
        &self,
        _thread_id: &str,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send {
        async { Ok(None) }
    }

    /// Has the server `holder` run a client's request (a JSON-RPC `method`
    /// and its `params`) on `thread_id`, and answers with its reply. A
    /// request runs at most once: if `holder` dies before it took effect,
    /// whichever server takes the thread over runs it; if after, the reply
    /// is an error that says so.
    fn forward(
        &self,
        _holder: &str,
        _thread_id: &str,
        _method: &str,
        _params: &serde_json::Value,
    ) -> impl Future<Output = Result<ForwardReply, StoreError>> + Send {
        async { Err(StoreError::NoForwarding) }
    }

    /// Requests other servers forwarded to this one, claimed for it to run
    /// and answer with [`Store::forward_done`].
    fn forwarded(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Forwarded>> {
        None
    }

    /// A forwarded request (`id`) is about to run on `thread_id`: the next
    /// commit of the thread records that it took effect, with its first
    /// events, so that it never runs again elsewhere.
    fn forward_applying(
        &self,
        _id: &str,
        _thread_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Err(StoreError::NoForwarding) }
    }

    /// Records the reply to a forwarded request and tells its sender.
    fn forward_done(
        &self,
        _id: &str,
        _reply: &ForwardReply,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Err(StoreError::NoForwarding) }
    }
}
