//! The writer's state of one thread: the reducer that validates its events
//! and the changes not yet committed. The same for every backend; what it
//! reads back of the committed tables it reads through [`Rows`].
//!
//! Memory stays bounded on long threads: after a commit the reducer keeps
//! only open turns and items (plus a few recently closed ones), since those
//! are all a later event can legally touch. What it no longer holds is
//! checked against the projection tables instead: a start whose id is
//! already stored is a duplicate, and an event for a stored, closed item or
//! turn gets the precise "terminal" refusal rather than "unknown".

mod append;
pub(crate) mod dirty;
mod fresh_ids;
pub(crate) mod ops;
pub(crate) mod pending;
pub(crate) mod prepare;
pub(crate) mod ranks;
mod refusals;
pub(crate) mod reserve;
pub(crate) mod rows;

use spool_core::{Closed, ThreadReducer};
use spool_protocol::{ServerNotification, ThreadEvent};

use self::dirty::{ApplyError, Dirty};
use self::fresh_ids::FreshIds;
use self::pending::{Pending, PendingEvent, Source};
use self::reserve::Reservation;
use self::rows::Rows;
use crate::born::Body;
use crate::error::StoreError;
use crate::types::ThreadRecord;

/// A notification to append, with its JSON encoded by the caller (off the
/// writer thread). `json` is `None` for what is never stored whatever the
/// thread (status items), and may be empty for the completion of an item
/// born complete, whose row usually leaves the body to the item's row: the
/// writer encodes it only should the row need the text after all.
pub(crate) struct Incoming {
    pub(crate) notification: ServerNotification,
    pub(crate) json: Option<String>,
    /// The completion of an item born complete, standing for its start
    /// too (`prepare::prepare_entries`): it takes two seqs.
    pub(crate) born: bool,
}

/// Closed items and turns a reducer may hold before it is compacted: enough
/// that a busy thread is not rebuilt after every commit.
const KEEP_CLOSED: usize = 64;

pub(crate) struct ThreadState {
    pub(crate) reducer: ThreadReducer,
    dev_mode: bool,
    has_preview: bool,
    pub(crate) pending: Pending,
    /// `at_ms` of the newest accepted event (`i64::MIN`: none since the
    /// state was loaded).
    pub(crate) updated_at_ms: i64,
    /// What `threads.updated_at_ms` holds as far as this writer knows
    /// (`i64::MIN`: unknown, so the next chance writes it).
    pub(crate) stored_updated_at_ms: i64,
    /// Write `updated_at_ms` with the next commit however little it lags
    /// (the store closes, or the state is about to be dropped).
    pub(crate) flush_updated_at: bool,
    /// The seqs reserved for deltas answered before their commit
    /// (`reserve.rs`).
    pub(crate) seqs: Reservation,
    /// Bounds above which a started id needs no duplicate probe.
    fresh: FreshIds,
    /// The view rank of the newest committed turn, when the writer knows it
    /// (the writers rank turns newer than it themselves: `ranks.rs`).
    pub(crate) rank_tail: RankTail,
    /// The SQLite store's integer key of the thread (`sqlite/keys.rs`),
    /// once its writer has read or given it; unused by PostgreSQL.
    pub(crate) key: Option<i64>,
}

/// What a writer knows of a thread's newest committed turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RankTail {
    /// Nothing: read it from the thread's turn rows.
    Unknown,
    /// The thread has no committed turn.
    Empty,
    /// Its newest committed turn's ordinal and `view_rank`.
    Turn { ordinal: i64, rank: i64 },
}

impl ThreadState {
    /// The state of a thread created in this batch: `thread/started` is its
    /// seq 1.
    pub(crate) fn created(record: ThreadRecord, started_json: String, at_ms: i64) -> Self {
        let reducer = ThreadReducer::from_parts(&record.thread.id, 1, Vec::new(), Vec::new());
        let pending = Pending {
            events: vec![PendingEvent {
                seq: 1,
                at_ms,
                method: "thread/started",
                item_id: None,
                source: Source::Json(started_json),
                born: false,
                body: Body::Own,
            }],
            ..Pending::default()
        };
        ThreadState {
            reducer,
            dev_mode: record.dev_mode,
            has_preview: !record.thread.preview.is_empty(),
            pending: Pending {
                created: Some(record),
                created_at_ms: at_ms,
                ..pending
            },
            // The inserted row says `updated_at_ms = created_at_ms`.
            updated_at_ms: at_ms,
            stored_updated_at_ms: at_ms,
            flush_updated_at: false,
            seqs: Reservation::default(),
            fresh: FreshIds::empty(),
            rank_tail: RankTail::Empty,
            key: None,
        }
    }

    /// The state of a stored thread, from its open turns and items.
    pub(crate) fn load(rows: &dyn Rows, thread_id: &str) -> Result<Option<Self>, StoreError> {
        let Some(thread) = rows.thread(thread_id)? else {
            return Ok(None);
        };
        let items = rows.items(thread_id, true)?;
        let turns = rows.turns(thread_id, true)?;
        Ok(Some(ThreadState {
            reducer: ThreadReducer::from_parts(thread_id, thread.last_seq, items, turns),
            dev_mode: thread.dev_mode,
            has_preview: !thread.thread.preview.is_empty(),
            pending: Pending::default(),
            updated_at_ms: i64::MIN,
            stored_updated_at_ms: i64::MIN,
            flush_updated_at: false,
            seqs: Reservation::load(rows.reserved_upto(thread_id)?, thread.last_seq),
            fresh: FreshIds::default(),
            rank_tail: RankTail::Unknown,
            key: None,
        }))
    }

    /// Whether the thread has nothing in progress, so dropping its state
    /// loses nothing that reloading would not restore cheaply.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.reducer.active_turn().is_none()
            && !self.updated_at_stale()
            && !self.seqs.held()
    }

    /// Whether the thread can stream deltas: a turn or an item is in
    /// progress.
    pub(crate) fn streaming(&self) -> bool {
        self.reducer.active_turn().is_some()
            || self
                .reducer
                .items()
                .iter()
                .any(|record| !record.envelope.status.is_terminal())
    }

    /// Whether `threads.updated_at_ms` is behind the newest event.
    pub(crate) fn updated_at_stale(&self) -> bool {
        self.updated_at_ms > self.stored_updated_at_ms
    }

    /// Rebuilds the reducer from the committed projection plus the pending
    /// events, undoing the events of a refused append that were applied
    /// before the refusal. Only refusals take this path.
    pub(crate) fn rebuild(&mut self, rows: &dyn Rows, thread_id: &str) -> Result<(), StoreError> {
        // The rows whose body is a record in the reducer replaced here.
        self.refill_pending(thread_id)?;
        let mut reducer = if self.pending.created.is_some() {
            ThreadReducer::from_parts(thread_id, 1, Vec::new(), Vec::new())
        } else {
            let thread = rows
                .thread(thread_id)?
                .ok_or_else(|| StoreError::UnknownThread(thread_id.to_owned()))?;
            let items = rows.items(thread_id, true)?;
            let turns = rows.turns(thread_id, true)?;
            ThreadReducer::from_parts(thread_id, thread.last_seq, items, turns)
        };
        let mut dirty = Dirty::default();
        let events = &self.pending.events;
        for pending in events {
            if pending.seq <= reducer.last_seq() {
                continue; // thread/started of a thread created in this batch
            }
            let lost = |reason: String| StoreError::StateLost {
                thread_id: thread_id.to_owned(),
                reason,
            };
            let payload = pending.payload().map_err(lost)?;
            let event = ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq: pending.seq,
                at_ms: pending.at_ms,
                payload,
            };
            let applied = if pending.born {
                dirty::apply_born(&mut reducer, &mut dirty, &event)
            } else {
                dirty::apply(&mut reducer, &mut dirty, Some(rows), &event)
            };
            if let Err(failed) = applied {
                return Err(match failed.error {
                    ApplyError::Refused(e) => lost(format!("pending seq {}: {e}", pending.seq)),
                    ApplyError::Store(error) => error,
                });
            }
        }
        self.reducer = reducer;
        self.pending.dirty = dirty;
        Ok(())
    }

    /// Gives every pending row whose body is its item's record its
    /// completion back (`PendingEvent::refill`), before the record may go.
    pub(crate) fn refill_pending(&mut self, thread_id: &str) -> Result<(), StoreError> {
        for row in &mut self.pending.events {
            row.refill(&self.reducer, thread_id)?;
        }
        Ok(())
    }

    /// After a commit: forget what was written and, if the reducer holds
    /// many closed items or turns, drop them (see the module docs).
    pub(crate) fn committed(&mut self) {
        drop(self.written());
        drop(self.settled());
    }

    /// The pending changes are written into a transaction: the next
    /// changes are the next commit's. Returns the written ones, for the
    /// caller to drop when that delays no one.
    pub(crate) fn written(&mut self) -> Pending {
        std::mem::take(&mut self.pending)
    }

    /// The transaction that wrote the changes [`Self::written`] took is
    /// committed. Changes accepted since (while that commit ran on the
    /// commit thread) note rows by reducer index, so the reducer is
    /// compacted only when there are none. Returns the closed items and
    /// turns it forgot, for the caller to drop when that delays no one.
    pub(crate) fn settled(&mut self) -> Closed {
        self.seqs.committed();
        if !self.pending.is_empty() {
            return Closed::default();
        }
        let closed_items = self
            .reducer
            .items()
            .iter()
            .filter(|record| record.envelope.status.is_terminal())
            .count();
        let closed_turns = self
            .reducer
            .turns()
            .iter()
            .filter(|turn| turn.status.is_terminal())
            .count();
        if closed_items + closed_turns <= KEEP_CLOSED {
            return Closed::default();
        }
        self.reducer.retain_open()
    }

    /// The persistence policy (`docs/internals/log.md`): `status` items never, and
    /// `stateChange`/`resourceChange` only in dev mode. Events that are not
    /// about an item's content are always stored.
    pub(crate) fn persists(&self, notification: &ServerNotification) -> bool {
        notification
            .carried_item_kind()
            .is_none_or(|kind| kind.is_persisted(self.dev_mode))
    }
}
