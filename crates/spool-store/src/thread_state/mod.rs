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

pub(crate) mod dirty;
mod fresh_ids;
pub(crate) mod ops;
pub(crate) mod pending;
pub(crate) mod prepare;
pub(crate) mod ranks;
mod refusals;
pub(crate) mod reserve;
pub(crate) mod rows;

use spool_core::ThreadReducer;
use spool_protocol::{ServerNotification, ThreadEvent, ThreadItem, UserInput};

use self::dirty::{ApplyError, Dirty, Failed};
use self::fresh_ids::FreshIds;
use self::pending::{Pending, PendingEvent};
use self::reserve::Reservation;
use self::rows::Rows;
use crate::born::{RECORDED, folds_into, projects, start_of};
use crate::codec::encode;
use crate::error::StoreError;
use crate::types::{Appended, ThreadRecord};

/// A notification to append, with its JSON encoded by the caller (off the
/// writer thread). `json` is `None` for what is never stored whatever the
/// thread (status items), and empty for an item born complete: its start,
/// whose row is the completion's (`born.rs`), and its completion, whose row
/// usually leaves the body to the item's row. The writer encodes either
/// only should it need the text after all (the pair does not fold, the
/// completion is not what the item's row says).
pub(crate) struct Incoming {
    pub(crate) notification: ServerNotification,
    pub(crate) json: Option<String>,
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
}

/// What a writer knows of a thread's newest committed turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RankTail {
    /// Nothing: read it from the turns table.
    Unknown,
    /// The thread has no committed turn.
    Empty,
    /// Its newest committed turn's ordinal and `view_rank`.
    Turn { ordinal: i64, rank: i64 },
}

/// The result of an accepted append.
pub(crate) struct Accepted {
    pub(crate) appended: Vec<Appended>,
    /// Whether a lifecycle event was stored, so the caller waits for the
    /// commit (deltas alone are answered at once).
    pub(crate) lifecycle: bool,
    /// Events stored by this append.
    pub(crate) logged: usize,
}

/// Why an append was refused, and whether the reducer must be rebuilt
/// (events before the refused one had been applied to it).
pub(crate) struct Refusal {
    pub(crate) error: StoreError,
    pub(crate) reducer_dirty: bool,
}

/// A checked event waiting for the rest of its append to be checked. Its
/// rows are already noted in `Pending::dirty` (a refusal rebuilds that).
enum Staged {
    Logged {
        event: ThreadEvent,
        json: String,
        /// It completes the item the event staged before it started, and
        /// the two are one row (`born.rs`).
        born_complete: bool,
    },
    Transient(ServerNotification),
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
                json: started_json,
                deferred: None,
                folded: false,
                projected: false,
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

    /// Checks every notification of one append and, if all pass, records
    /// them for the next commit. All or nothing: on refusal nothing of the
    /// append is pending (the reducer may need [`Self::rebuild`]).
    ///
    /// `rows` is `None` while a commit holds the connection: then only
    /// appends that need no stored row may come here (deltas of items the
    /// reducer holds open, see `Writer::takes_while_lent`); a refusal is
    /// not refined from the tables.
    pub(crate) fn append(
        &mut self,
        rows: Option<&dyn Rows>,
        thread_id: &str,
        incoming: Vec<Incoming>,
        at_ms: i64,
    ) -> Result<Accepted, Refusal> {
        let mut staged = Vec::with_capacity(incoming.len() + 1);
        let mut applied = false;
        // Seqs a crash voided come first (see `reserve.rs`).
        if let Some(lost) = self.seqs.lost_event(thread_id) {
            let Some(json) = serde_json::to_string(&lost).ok() else {
                return Err(Refusal {
                    error: StoreError::StateLost {
                        thread_id: thread_id.to_owned(),
                        reason: "cannot encode thread/eventsLost".to_owned(),
                    },
                    reducer_dirty: false,
                });
            };
            let seq = self.seqs.lost.map_or(0, |(_, to)| to + 1);
            let event = ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq,
                at_ms,
                payload: lost,
            };
            if let Err(Failed { error, .. }) =
                dirty::apply(&mut self.reducer, &mut self.pending.dirty, rows, &event)
            {
                let error = match error {
                    ApplyError::Refused(source) => StoreError::StateLost {
                        thread_id: thread_id.to_owned(),
                        reason: format!("thread/eventsLost refused: {source}"),
                    },
                    ApplyError::Store(error) => error,
                };
                return Err(Refusal {
                    error,
                    reducer_dirty: false,
                });
            }
            applied = true;
            staged.push(Staged::Logged {
                event,
                json,
                born_complete: false,
            });
        }
        for (index, Incoming { notification, json }) in incoming.into_iter().enumerate() {
            let json = match json {
                Some(json) if self.persists(&notification) => json,
                Some(_) | None => {
                    encode_unfolded_start(staged.last_mut()).map_err(|error| Refusal {
                        error,
                        reducer_dirty: applied,
                    })?;
                    staged.push(Staged::Transient(notification));
                    continue;
                }
            };
            let method = notification.method();
            let refusal = |error| Refusal {
                error,
                reducer_dirty: applied,
            };
            let refused = |source| StoreError::Refused {
                index,
                method,
                source,
            };
            match self.stored_duplicate(rows, &notification) {
                Ok(None) => {}
                Ok(Some(duplicate)) => return Err(refusal(refused(duplicate))),
                Err(error) => return Err(refusal(error)),
            }
            let event = ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq: self.reducer.last_seq() + 1,
                at_ms,
                payload: notification,
            };
            match dirty::apply(&mut self.reducer, &mut self.pending.dirty, rows, &event) {
                Ok(()) => {
                    let born_complete = completes_start(staged.last(), &event);
                    applied = true;
                    let mut json = json;
                    if !born_complete {
                        // The event is applied: the reducer must be rebuilt.
                        let refusal = |error| Refusal {
                            error,
                            reducer_dirty: true,
                        };
                        encode_unfolded_start(staged.last_mut()).map_err(refusal)?;
                        // A completion the caller expected to fold its
                        // start (the same rule; a safeguard).
                        if json.is_empty()
                            && !matches!(event.payload, ServerNotification::ItemStarted(_))
                        {
                            json = encode("notification", &event.payload).map_err(refusal)?;
                        }
                    }
                    staged.push(Staged::Logged {
                        event,
                        json,
                        born_complete,
                    });
                }
                Err(Failed {
                    error,
                    reducer_changed,
                }) => {
                    let error = match error {
                        ApplyError::Refused(error) => refused(self.refine(rows, thread_id, error)),
                        ApplyError::Store(error) => error,
                    };
                    return Err(Refusal {
                        error,
                        reducer_dirty: applied || reducer_changed,
                    });
                }
            }
        }
        encode_unfolded_start(staged.last_mut()).map_err(|error| Refusal {
            error,
            reducer_dirty: applied,
        })?;
        let mut lifecycle = false;
        let mut logged = 0;
        let mut appended = Vec::with_capacity(staged.len());
        for staged in staged {
            match staged {
                Staged::Transient(notification) => {
                    appended.push(Appended::Transient(notification));
                }
                Staged::Logged {
                    event,
                    json,
                    born_complete,
                } => {
                    lifecycle |= !event.payload.is_delta();
                    logged += 1;
                    self.record(&event, json, born_complete);
                    appended.push(Appended::Logged(event));
                }
            }
        }
        self.seqs.lost = None;
        Ok(Accepted {
            appended,
            lifecycle,
            logged,
        })
    }

    /// Rebuilds the reducer from the committed projection plus the pending
    /// events, undoing the events of a refused append that were applied
    /// before the refusal. Only refusals take this path.
    pub(crate) fn rebuild(&mut self, rows: &dyn Rows, thread_id: &str) -> Result<(), StoreError> {
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
        for (index, pending) in events.iter().enumerate() {
            if pending.seq <= reducer.last_seq() {
                continue; // thread/started of a thread created in this batch
            }
            let lost = |reason: String| StoreError::StateLost {
                thread_id: thread_id.to_owned(),
                reason,
            };
            let payload = if pending.folded && pending.json.is_empty() {
                // A start the caller did not encode: it is the start its
                // completion implies.
                let completion = events.get(index + 1).map_or_else(
                    || Err(format!("pending seq {}: nothing follows", pending.seq)),
                    PendingEvent::payload,
                );
                match completion {
                    Ok(ServerNotification::ItemCompleted(completed)) => start_of(&completed)
                        .map(ServerNotification::ItemStarted)
                        .ok_or_else(|| lost(format!("pending seq {}: no envelope", pending.seq)))?,
                    Ok(other) => {
                        let method = other.method();
                        return Err(lost(format!(
                            "pending seq {}: followed by {method}",
                            pending.seq
                        )));
                    }
                    Err(e) => return Err(lost(e)),
                }
            } else {
                pending.payload().map_err(lost)?
            };
            let event = ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq: pending.seq,
                at_ms: pending.at_ms,
                payload,
            };
            if let Err(failed) = dirty::apply(&mut reducer, &mut dirty, Some(rows), &event) {
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

    /// After a commit: forget what was written and, if the reducer holds
    /// many closed items or turns, drop them (see the module docs).
    pub(crate) fn committed(&mut self) {
        self.written();
        self.settled();
    }

    /// The pending changes are written into a transaction: the next
    /// changes are the next commit's.
    pub(crate) fn written(&mut self) {
        self.pending = Pending::default();
    }

    /// The transaction that wrote the changes [`Self::written`] took is
    /// committed. Changes accepted since (while that commit ran on the
    /// commit thread) note rows by reducer index, so the reducer is
    /// compacted only when there are none.
    pub(crate) fn settled(&mut self) {
        self.seqs.committed();
        if !self.pending.is_empty() {
            return;
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
            return;
        }
        self.reducer.retain_open();
    }

    /// The persistence policy (`docs/internals/log.md`): `status` items never, and
    /// `stateChange`/`resourceChange` only in dev mode. Events that are not
    /// about an item's content are always stored.
    pub(crate) fn persists(&self, notification: &ServerNotification) -> bool {
        notification
            .carried_item_kind()
            .is_none_or(|kind| kind.is_persisted(self.dev_mode))
    }

    /// Notes an accepted event for the next commit. `born_complete`: the
    /// event completes the item the previous pending event started, and
    /// the pair is stored as one row (`born.rs`).
    fn record(&mut self, event: &ThreadEvent, json: String, born_complete: bool) {
        let pending = &mut self.pending;
        self.updated_at_ms = self.updated_at_ms.max(event.at_ms);
        match &event.payload {
            ServerNotification::ItemStarted(n) if !self.has_preview => {
                if let Some(preview) = user_text(&n.item) {
                    pending.preview = Some(preview.to_owned());
                    self.has_preview = true;
                }
            }
            ServerNotification::ItemCompleted(n) if !self.has_preview => {
                if let Some(preview) = user_text(&n.item) {
                    pending.preview = Some(preview.to_owned());
                    self.has_preview = true;
                }
            }
            ServerNotification::ThreadNameUpdated(n) => pending.name = Some(n.thread_name.clone()),
            ServerNotification::ThreadArchived(_) => pending.archived = Some(true),
            ServerNotification::ThreadUnarchived(_) => pending.archived = Some(false),
            // The rest changes no column of the thread's row.
            _ => {}
        }
        let mut method = event.payload.method();
        let mut projected = false;
        if born_complete && let Some(started) = pending.events.last_mut() {
            debug_assert_eq!(started.seq + 1, event.seq);
            started.folded = true;
            method = RECORDED;
            if let ServerNotification::ItemCompleted(completed) = &event.payload {
                projected = self
                    .reducer
                    .item(completed.item.id())
                    .is_some_and(|record| record.seq == event.seq && projects(completed, record));
            }
        }
        // Born complete and left unencoded by the caller: kept typed (a
        // copy costs a fraction of the encoding it saves when the row
        // leaves the body to the item's row, as it nearly always does).
        let deferred = (born_complete && json.is_empty()).then(|| Box::new(event.payload.clone()));
        pending.events.push(PendingEvent {
            seq: event.seq,
            at_ms: event.at_ms,
            method,
            item_id: event.payload.item_id().map(str::to_owned),
            json,
            deferred,
            folded: false,
            projected,
        });
    }
}

/// Whether `event` is the completion of an item born complete whose start
/// is `previous`, the event staged just before it in the same append.
fn completes_start(previous: Option<&Staged>, event: &ThreadEvent) -> bool {
    let Some(Staged::Logged {
        event: previous, ..
    }) = previous
    else {
        return false;
    };
    previous.seq + 1 == event.seq
        && previous.at_ms == event.at_ms
        && folds_into(&previous.payload, &event.payload)
}

/// Encodes a staged start the caller left unencoded, expecting it to be
/// folded into its completion (the store's `prepare_append`), when what
/// follows it does not fold it after all. The caller applies the same
/// rule to the same append, so this is a safeguard, not a path taken.
fn encode_unfolded_start(last: Option<&mut Staged>) -> Result<(), StoreError> {
    // A completion that folded its start is left as it is: its JSON is
    // made only if its row needs it (`PendingEvent::payload_json`).
    if let Some(Staged::Logged {
        event,
        json,
        born_complete: false,
    }) = last
        && json.is_empty()
    {
        *json = encode("notification", &event.payload)?;
    }
    Ok(())
}

/// The first text of a user message: the thread's preview.
fn user_text(item: &ThreadItem) -> Option<&str> {
    let ThreadItem::UserMessage { content, .. } = item else {
        return None;
    };
    content
        .iter()
        .filter_map(UserInput::as_text)
        .find(|text| !text.trim().is_empty())
}
