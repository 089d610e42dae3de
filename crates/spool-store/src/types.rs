//! What goes into the store and what comes out, besides items and turns
//! (which are `spool_core::{ItemRecord, TurnRecord}`).

use spool_core::{ItemRecord, View};
use spool_protocol::{
    HistoryMode, ItemCompletedNotification, ServerNotification, Thread, ThreadEvent,
};

/// The settings of a thread to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewThread {
    /// `None` gives a fresh UUIDv7.
    pub id: Option<String>,
    pub name: Option<String>,
    pub model_provider: String,
    pub model: Option<String>,
    pub cwd: String,
    pub cli_version: String,
    pub history_mode: HistoryMode,
    /// Persist `stateChange`/`resourceChange` items too (a debugging aid:
    /// other threads drop them, being UI state with no history worth keeping).
    pub dev_mode: bool,
    pub forked_from_id: Option<String>,
    /// Never listed; deleted once no client has it loaded.
    pub ephemeral: bool,
}

impl NewThread {
    /// A thread with the given provider and working directory and every
    /// other setting at its default.
    pub fn new(model_provider: impl Into<String>, cwd: impl Into<String>) -> Self {
        NewThread {
            id: None,
            name: None,
            model_provider: model_provider.into(),
            model: None,
            cwd: cwd.into(),
            cli_version: env!("CARGO_PKG_VERSION").to_owned(),
            history_mode: HistoryMode::default(),
            dev_mode: false,
            forked_from_id: None,
            ephemeral: false,
        }
    }
}

/// A thread as stored: the wire shape plus what only the store knows.
///
/// `thread.status` is always `notLoaded` (whether a thread is loaded is the
/// thread manager's knowledge, not the store's) and `thread.turns` is empty.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    pub thread: Thread,
    pub dev_mode: bool,
    pub archived: bool,
    /// The seq of the thread's last committed event.
    pub last_seq: u64,
}

/// One entry of [`crate::Store::append_quiet`].
#[derive(Debug, Clone, PartialEq)]
pub enum ToAppend {
    /// A notification, as [`crate::Store::append`] takes it.
    Notification(ServerNotification),
    /// The completion of an item born complete, standing for the start
    /// `spool_core::reducer::born::start_of` gives it: the two take two
    /// seqs, the start first, and are stored, read and checked exactly as
    /// that start followed by this completion would be. A caller that has
    /// the completion spares building a start only to have it compared and
    /// dropped. Refused if it has no envelope (the start needs one).
    BornComplete(ItemCompletedNotification),
}

impl From<ServerNotification> for ToAppend {
    fn from(notification: ServerNotification) -> Self {
        ToAppend::Notification(notification)
    }
}

/// The outcome of one notification given to `append`, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Appended {
    /// Stored under a seq. For a lifecycle event it is committed when
    /// `append` returns; a delta is committed by the next group commit.
    Logged(ThreadEvent),
    /// Not stored, by the persistence policy (a `status` item, or a
    /// `stateChange`/`resourceChange` outside dev mode). It has no seq;
    /// stream it to live clients as it is.
    Transient(ServerNotification),
}

impl Appended {
    pub fn notification(&self) -> &ServerNotification {
        match self {
            Appended::Logged(event) => &event.payload,
            Appended::Transient(notification) => notification,
        }
    }

    /// The log event, if the notification was stored.
    pub fn event(&self) -> Option<&ThreadEvent> {
        match self {
            Appended::Logged(event) => Some(event),
            Appended::Transient(_) => None,
        }
    }

    pub fn seq(&self) -> Option<u64> {
        self.event().map(|event| event.seq)
    }
}

/// The order of [`crate::Store::list_threads`] (newest first either way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ThreadSortKey {
    #[default]
    CreatedAt,
    UpdatedAt,
}

/// Which threads to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadListQuery {
    /// At most this many threads per page.
    pub limit: usize,
    pub sort_key: ThreadSortKey,
    /// List archived threads instead of the others (as Codex's `thread/list`).
    pub archived: bool,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only threads whose title (the name, else the preview) contains this
    /// text, ignoring case (of ASCII letters at least).
    pub search: Option<String>,
}

impl Default for ThreadListQuery {
    fn default() -> Self {
        ThreadListQuery {
            limit: 50,
            sort_key: ThreadSortKey::default(),
            archived: false,
            cursor: None,
            search: None,
        }
    }
}

/// One page of threads.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPage {
    pub threads: Vec<ThreadRecord>,
    /// Give it back in [`ThreadListQuery::cursor`] for the next page; `None`
    /// on the last page.
    pub next_cursor: Option<String>,
}

/// A thread's newest items as Responses API input items, oldest first
/// ([`crate::Store::input_items`]).
#[derive(Debug, Clone, PartialEq)]
pub struct InputItems<T = serde_json::Value> {
    pub items: Vec<T>,
    /// Whether these are all of the thread's input items, so nothing was
    /// left out before the first one.
    pub complete: bool,
}

/// A server → client request a run waits on (an approval, a client-run
/// tool call), as the store keeps it from the moment it is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRequest {
    /// Stable across reconnects and restarts: clients answer by it.
    pub request_id: String,
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub request: spool_protocol::ServerRequest,
    pub created_at_ms: i64,
    /// The answer as given (`None` while waiting).
    pub answer: Option<serde_json::Value>,
    pub resolved_at_ms: Option<i64>,
}

/// An answered request and the `serverRequest/resolved` event its answer
/// logged (stream it to the thread's watchers).
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRequest {
    pub request: PendingRequest,
    pub event: ThreadEvent,
}

/// The RunState JSON of a turn that can be resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRunState {
    pub thread_id: String,
    pub turn_id: String,
    pub state: String,
    pub updated_at_ms: i64,
}

/// What a provider holds of a thread's history, in the server-managed
/// modes (`previousResponseId`, `conversationId`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredHistory {
    pub cursor: spool_core::llm::HistoryCursor,
    /// The OpenAI conversation holding the history (`conversationId`
    /// mode), once one exists.
    pub conversation_id: Option<String>,
}

/// One page of a thread's items in a view ([`crate::Store::items_page`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemsPage {
    /// The page's records in the view, in ordinal order.
    pub items: Vec<ItemRecord>,
    /// Give it back as `after_ordinal` for the next page; `None` once the
    /// thread has nothing further. A page may be shorter than the limit,
    /// even empty, and still have a next one: the limit counts the rows
    /// read, and the view may leave some of them out.
    pub next_after: Option<u64>,
}

impl ItemsPage {
    /// The page made of `scanned`, the item rows after the cursor in
    /// ordinal order, read up to `limit` of them: the view filters them,
    /// and a scan that reached the limit may have stopped short of the end.
    pub(crate) fn of_scan(scanned: Vec<ItemRecord>, view: View, limit: usize) -> ItemsPage {
        let next_after = match scanned.last() {
            Some(last) if scanned.len() >= limit => Some(last.ordinal),
            _ => None,
        };
        ItemsPage {
            items: spool_core::views::keep(scanned, view),
            next_after,
        }
    }

    /// The page of a view read whole (the model's, which depends on the
    /// whole thread): its first `limit` records after `after_ordinal`.
    pub(crate) fn of_view(records: Vec<ItemRecord>, after_ordinal: u64, limit: usize) -> ItemsPage {
        let mut items: Vec<ItemRecord> = records
            .into_iter()
            .filter(|record| record.ordinal > after_ordinal)
            .collect();
        let more = items.len() > limit;
        items.truncate(limit);
        ItemsPage {
            next_after: if more {
                items.last().map(|r| r.ordinal)
            } else {
                None
            },
            items,
        }
    }
}
