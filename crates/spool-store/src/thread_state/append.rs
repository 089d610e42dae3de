//! Checking one append against a thread's state and noting what it stores
//! for the next commit.

use spool_core::ReduceError;
use spool_core::reducer::born::start_of;
use spool_protocol::{ServerNotification, ThreadEvent, ThreadItem, UserInput};

use super::dirty::{self, ApplyError, Failed};
use super::pending::{PendingEvent, Source, completion_event, record_at};
use super::rows::Rows;
use super::{Incoming, ThreadState};
use crate::born::{Body, RECORDED, projects, taken_whole, turn_body};
use crate::error::StoreError;
use crate::types::Appended;

/// The result of an accepted append.
pub(crate) struct Accepted {
    /// What was appended, in order: only when the appender asked for it
    /// (`echo`), else empty.
    pub(crate) appended: Vec<Appended>,
    /// Whether a lifecycle event was stored, so the caller waits for the
    /// commit (deltas alone are answered at once).
    pub(crate) lifecycle: bool,
    /// Events stored by this append (a completion born complete counts
    /// with its start).
    pub(crate) logged: usize,
    /// The seq of the last event stored, if any.
    pub(crate) last_seq: Option<u64>,
}

/// Why an append was refused, and whether the reducer must be rebuilt
/// (events before the refused one had been applied to it).
pub(crate) struct Refusal {
    pub(crate) error: StoreError,
    pub(crate) reducer_dirty: bool,
}

/// A checked event waiting for the rest of its append to be checked. Its
/// rows are already noted in `Pending::dirty` (a refusal rebuilds that).
///
/// The event is boxed as soon as it is made: it is ~480 bytes, and it
/// moves from here into `staged`, out again and into its pending row.
/// A transient notification (~440 bytes) is boxed too, to keep `Staged`
/// small.
enum Staged {
    Logged {
        event: Box<ThreadEvent>,
        json: String,
        /// The completion of an item born complete: it stands for the
        /// item's start too, at the seq before (`born.rs`).
        born: bool,
    },
    Transient(Box<ServerNotification>),
    /// The completion of an item born complete that the reducer's record
    /// took whole (`ThreadReducer::apply_born_owned`): its row's body is the
    /// record (`pending::Source::InRecord`).
    InRecord {
        seq: u64,
        at_ms: i64,
    },
}

impl ThreadState {
    /// Checks every notification of one append and, if all pass, records
    /// them for the next commit. All or nothing: on refusal nothing of the
    /// append is pending (the reducer may need [`Self::rebuild`]).
    ///
    /// `rows` is `None` while a commit holds the connection: then only
    /// appends that need no stored row may come here (deltas of items the
    /// reducer holds open, see `Writer::takes_while_lent`); a refusal is
    /// not refined from the tables.
    ///
    /// `echo`: hand back what was appended ([`Accepted::appended`]). A
    /// caller that does not use it is spared building the starts of items
    /// born complete, and their completions are kept without a copy.
    pub(crate) fn append(
        &mut self,
        rows: Option<&dyn Rows>,
        thread_id: &str,
        incoming: Vec<Incoming>,
        at_ms: i64,
        echo: bool,
    ) -> Result<Accepted, Refusal> {
        let mut staged = Vec::with_capacity(incoming.len() + 1);
        let mut applied = false;
        // Seqs a crash voided come first (see `reserve.rs`).
        if let Some(event) = self.lost_range(rows, thread_id, at_ms)? {
            applied = true;
            staged.push(event);
        }
        // Each entry's index in the append as the caller made it: a
        // completion born complete stands for its start, the entry before.
        let mut next_index = 0;
        for Incoming {
            notification,
            json,
            born,
        } in incoming
        {
            let index = next_index;
            next_index += 1 + usize::from(born);
            let json = match json {
                Some(json) if self.persists(&notification) => json,
                Some(_) | None => {
                    if born && echo {
                        staged.extend(
                            implied_start(&notification)
                                .map(|start| Staged::Transient(Box::new(start))),
                        );
                    }
                    staged.push(Staged::Transient(Box::new(notification)));
                    continue;
                }
            };
            let refusal = |error| Refusal {
                error,
                reducer_dirty: applied,
            };
            // What a refusal names: a born completion is refused as its
            // start, but for being in progress (which folding never lets
            // through).
            let refused = |source: ReduceError, notification: &ServerNotification| {
                let (index, method) = match (born, &source) {
                    (true, ReduceError::CompletedInProgress { .. }) => {
                        (index + 1, notification.method())
                    }
                    (true, _) => (index, "item/started"),
                    (false, _) => (index, notification.method()),
                };
                StoreError::Refused {
                    index,
                    method,
                    source,
                }
            };
            match self.stored_duplicate(rows, &notification, born) {
                Ok(None) => {}
                Ok(Some(duplicate)) => return Err(refusal(refused(duplicate, &notification))),
                Err(error) => return Err(refusal(error)),
            }
            // A caller that wants nothing back, and a completion that is
            // exactly the record applying it makes: the record takes it.
            let taken_whole =
                born && !echo && json.is_empty() && taken_whole(&notification, thread_id);
            if !born && drops_records(&notification) {
                // The records of items whose rows leave their body to
                // them may go: their completions are needed back first.
                if let Err(error) = self.refill(thread_id, &mut staged) {
                    return Err(refusal(error));
                }
            }
            let event = Box::new(ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq: self.reducer.last_seq() + 1 + u64::from(born),
                at_ms,
                payload: notification,
            });
            let (seq, event_at_ms) = (event.seq, event.at_ms);
            let outcome = if taken_whole {
                dirty::apply_born_owned(&mut self.reducer, &mut self.pending.dirty, event).map(
                    |()| Staged::InRecord {
                        seq,
                        at_ms: event_at_ms,
                    },
                )
            } else {
                let outcome = if born {
                    dirty::apply_born(&mut self.reducer, &mut self.pending.dirty, &event)
                } else {
                    dirty::apply(&mut self.reducer, &mut self.pending.dirty, rows, &event)
                };
                match outcome {
                    Ok(()) => Ok(Staged::Logged { event, json, born }),
                    Err(failed) => Err((failed, event)),
                }
            };
            match outcome {
                Ok(entry) => {
                    applied = true;
                    staged.push(entry);
                }
                Err((
                    Failed {
                        error,
                        reducer_changed,
                    },
                    event,
                )) => {
                    let error = match error {
                        ApplyError::Refused(error) => {
                            let error = self.refine(rows, thread_id, error);
                            refused(error, &event.payload)
                        }
                        ApplyError::Store(error) => error,
                    };
                    return Err(Refusal {
                        error,
                        reducer_dirty: applied || reducer_changed,
                    });
                }
            }
        }
        let mut accepted = Accepted {
            appended: Vec::with_capacity(if echo { staged.len() } else { 0 }),
            lifecycle: false,
            logged: 0,
            last_seq: None,
        };
        for staged in staged {
            match staged {
                Staged::Transient(notification) => {
                    if echo {
                        accepted.appended.push(Appended::Transient(*notification));
                    }
                }
                Staged::Logged { event, json, born } => {
                    accepted.lifecycle |= !event.payload.is_delta();
                    accepted.logged += 1 + usize::from(born);
                    accepted.last_seq = Some(event.seq);
                    let echoed = echo.then_some(&mut accepted.appended);
                    self.record(event, json, born, echoed);
                }
                Staged::InRecord { seq, at_ms } => {
                    accepted.lifecycle = true;
                    accepted.logged += 2;
                    accepted.last_seq = Some(seq);
                    self.record_in_record(seq, at_ms);
                }
            }
        }
        self.seqs.lost = None;
        Ok(accepted)
    }

    /// The `thread/eventsLost` of the seqs a crash voided, applied, if
    /// there are any (see `reserve.rs`).
    fn lost_range(
        &mut self,
        rows: Option<&dyn Rows>,
        thread_id: &str,
        at_ms: i64,
    ) -> Result<Option<Staged>, Refusal> {
        let Some(lost) = self.seqs.lost_event(thread_id) else {
            return Ok(None);
        };
        let state_lost = |reason: String| Refusal {
            error: StoreError::StateLost {
                thread_id: thread_id.to_owned(),
                reason,
            },
            reducer_dirty: false,
        };
        let json = serde_json::to_string(&lost)
            .map_err(|_| state_lost("cannot encode thread/eventsLost".to_owned()))?;
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
            return Err(match error {
                ApplyError::Refused(source) => {
                    state_lost(format!("thread/eventsLost refused: {source}"))
                }
                ApplyError::Store(error) => Refusal {
                    error,
                    reducer_dirty: false,
                },
            });
        }
        Ok(Some(Staged::Logged {
            event: Box::new(event),
            json,
            born: false,
        }))
    }

    /// Notes an accepted event for the next commit, and hands it back in
    /// `echo` (preceded by the start it stands for, if `born`) when given.
    fn record(
        &mut self,
        event: Box<ThreadEvent>,
        json: String,
        born: bool,
        echo: Option<&mut Vec<Appended>>,
    ) {
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
        let mut body = Body::Own;
        if born {
            method = RECORDED;
            if let ServerNotification::ItemCompleted(completed) = &event.payload
                && self
                    .reducer
                    .item(completed.item.id())
                    .is_some_and(|record| record.seq == event.seq && projects(completed, record))
            {
                body = Body::Item;
            }
        } else {
            body = turn_body(&self.reducer, &event.payload, event.seq);
        }
        // An event the caller left unencoded (a born completion, a turn's
        // start or completion) is kept typed: its row nearly always leaves
        // the body to a projection row. No encoded event is empty.
        let keep_typed = json.is_empty();
        let (seq, at_ms) = (event.seq, event.at_ms);
        let item_id = event.payload.item_id().map(str::to_owned);
        let source = match echo {
            None if keep_typed => Source::Typed(event),
            None => Source::Json(json),
            Some(echo) => {
                let source = match keep_typed {
                    true => Source::Typed(event.clone()),
                    false => Source::Json(json),
                };
                if born && let Some(start) = implied_start(&event.payload) {
                    echo.push(Appended::Logged(ThreadEvent {
                        thread_id: event.thread_id.clone(),
                        seq: event.seq - 1,
                        at_ms: event.at_ms,
                        payload: start,
                    }));
                }
                echo.push(Appended::Logged(*event));
                source
            }
        };
        pending.events.push(PendingEvent {
            seq,
            at_ms,
            method,
            item_id,
            source,
            born,
            body,
        });
    }
}

impl ThreadState {
    /// Notes the completion at `seq` of an item born complete that its
    /// record took whole ([`Staged::InRecord`]), as [`Self::record`] notes
    /// such a completion with nothing echoed: its row leaves the body to
    /// the item's row.
    fn record_in_record(&mut self, seq: u64, at_ms: i64) {
        self.updated_at_ms = self.updated_at_ms.max(at_ms);
        let record = record_at(&self.reducer, seq);
        if !self.has_preview
            && let Some(preview) = record.and_then(|record| user_text(&record.item))
        {
            self.pending.preview = Some(preview.to_owned());
            self.has_preview = true;
        }
        self.pending.events.push(PendingEvent {
            seq,
            at_ms,
            method: RECORDED,
            item_id: record.map(|record| record.item.id().to_owned()),
            source: Source::InRecord,
            born: true,
            body: Body::Item,
        });
    }

    /// Gives every row whose body is an item's record, pending or staged,
    /// its completion back (built from the record), before an event that
    /// may drop records is applied.
    fn refill(&mut self, thread_id: &str, staged: &mut [Staged]) -> Result<(), StoreError> {
        self.refill_pending(thread_id)?;
        for entry in staged {
            if let Staged::InRecord { seq, at_ms } = *entry {
                *entry = Staged::Logged {
                    event: completion_event(&self.reducer, thread_id, seq, at_ms)?,
                    json: String::new(),
                    born: true,
                };
            }
        }
        Ok(())
    }
}

/// Whether applying `notification` may drop item records from the reducer:
/// `item/removed` and `thread/cleared` are the only events that do (the
/// only arms of `ThreadReducer::apply` that remove records; the reducer's
/// `retain_open` drops closed ones too, but the store calls it only with
/// nothing pending, `ThreadState::settled`). A record missed here is an
/// error when its row is written, never a row written wrong.
fn drops_records(notification: &ServerNotification) -> bool {
    matches!(
        notification,
        ServerNotification::ItemRemoved(_) | ServerNotification::ThreadCleared(_)
    )
}

/// The `item/started` a born completion stands for.
fn implied_start(completion: &ServerNotification) -> Option<ServerNotification> {
    let ServerNotification::ItemCompleted(completed) = completion else {
        return None;
    };
    start_of(completed).map(ServerNotification::ItemStarted)
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
