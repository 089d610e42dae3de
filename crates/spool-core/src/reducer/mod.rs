//! The one reducer: log events in, items and turns out
//! (`docs/internals/item-lifecycle.md`).
//!
//! Every consumer that turns events into items (the store's projection, the
//! runtime's results, the CLI, tests) goes through [`ThreadReducer::apply`].
//! It refuses protocol violations with a typed [`ReduceError`] and leaves
//! its state untouched when it does:
//! - seqs must be gap-free and increasing, but for the range a
//!   `thread/eventsLost` voids (it comes right after that range);
//! - an item starts once, in an in-progress turn, with status inProgress;
//! - deltas apply only to a known, in-progress item of the matching kind;
//! - `item/completed` is terminal and authoritative: it replaces whatever
//!   the deltas built; a second completion, or any change after it, is refused;
//! - a turn completes once, and only after all its items are terminal;
//! - `item/removed` takes a terminal item out of the items (the log keeps
//!   its history); `thread/cleared` takes them all, never mid-turn.
//!
//! An item born complete may be applied as its completion alone
//! ([`ThreadReducer::apply_born`], `born.rs`), with the same outcome as
//! its start and completion applied one after the other.

pub mod born;
mod delta;
mod error;
mod recovery;

use std::collections::HashMap;

use spool_protocol::{ItemEnvelope, ItemStatus, ServerNotification, ThreadEvent, TurnStatus};

use crate::record::{ItemRecord, TurnRecord};
pub use delta::apply_delta;
pub use error::ReduceError;
pub use recovery::stopped;

/// What an applied event changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The item at this index of [`ThreadReducer::items`].
    Item(usize),
    /// The turn at this index of [`ThreadReducer::turns`].
    Turn(usize),
    /// The item with this id left the projection (`item/removed`).
    Removed(String),
    /// Every item left the projection (`thread/cleared`).
    Cleared,
    /// Thread-level events (status, name, usage, errors, resolved requests).
    Thread,
}

/// The state of one thread, built from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadReducer {
    thread_id: String,
    last_seq: u64,
    items: Vec<ItemRecord>,
    item_index: Index,
    turns: Vec<TurnRecord>,
    turn_index: Index,
}

/// Positions in `items` or `turns` by id. Hashed with foldhash, randomly
/// seeded per map: with std's SipHash, the lookups of an item added through
/// the Session API (nine or so, each over an id of ~36 bytes) took ~1.3k
/// instructions, ~3% of the store's writer thread. An id may come from a
/// model server or a client, so the seed stays random (foldhash's
/// `fast::RandomState`), not a fixed one an attacker could collide against.
type Index = HashMap<String, usize, foldhash::fast::RandomState>;

/// The closed items and turns [`ThreadReducer::retain_open`] forgot, to be
/// dropped by their holder.
#[derive(Debug, Default)]
#[must_use = "what is forgotten is dropped here unless kept to drop later"]
pub struct Closed {
    pub items: Vec<ItemRecord>,
    pub turns: Vec<TurnRecord>,
}

/// The most items [`ThreadReducer::retain_open`] keeps room for.
const RETAINED_CAPACITY: usize = 256;

impl ThreadReducer {
    pub fn new(thread_id: impl Into<String>) -> Self {
        ThreadReducer {
            thread_id: thread_id.into(),
            ..ThreadReducer::default()
        }
    }

    /// Resumes from a projection: the items and turns as stored, and the
    /// last seq applied to them. Reducing the rest of the log from here gives
    /// the same state as reducing the whole log.
    pub fn from_parts(
        thread_id: impl Into<String>,
        last_seq: u64,
        mut items: Vec<ItemRecord>,
        mut turns: Vec<TurnRecord>,
    ) -> Self {
        items.sort_by_key(|r| r.ordinal);
        turns.sort_by_key(|t| t.ordinal);
        let mut reducer = ThreadReducer {
            thread_id: thread_id.into(),
            last_seq,
            items,
            item_index: Index::default(),
            turns,
            turn_index: Index::default(),
        };
        reducer.reindex();
        reducer
    }

    /// Builds the id indexes again from the lists, into the maps as they
    /// are (their capacity kept).
    fn reindex(&mut self) {
        self.item_index.clear();
        self.item_index.extend(
            self.items
                .iter()
                .enumerate()
                .map(|(i, record)| (record.item.id().to_owned(), i)),
        );
        self.turn_index.clear();
        self.turn_index.extend(
            self.turns
                .iter()
                .enumerate()
                .map(|(i, turn)| (turn.id.clone(), i)),
        );
    }

    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Forgets every closed item and turn, keeping the open ones: the state
    /// [`ThreadReducer::from_parts`] gives from the open ones alone, for a
    /// holder that reads closed ones back from storage when it needs them.
    /// Done in place, so the lists and indexes keep their capacity (room
    /// for up to 256 items): a busy thread fills them again at once, and
    /// growing them from empty rehashes every id again.
    ///
    /// Returns what it forgot, for the holder to drop when dropping costs
    /// nothing (a store's writer: after it has answered the commit's
    /// waiters).
    pub fn retain_open(&mut self) -> Closed {
        let items = self
            .items
            .extract_if(.., |record| record.envelope.status.is_terminal())
            .collect();
        let turns = self
            .turns
            .extract_if(.., |turn| turn.status.is_terminal())
            .collect();
        // A burst of items once must not hold its memory for good.
        self.items.shrink_to(RETAINED_CAPACITY);
        self.item_index.shrink_to(RETAINED_CAPACITY);
        self.reindex();
        Closed { items, turns }
    }

    /// Items in the order they started.
    pub fn items(&self) -> &[ItemRecord] {
        &self.items
    }

    pub fn item(&self, item_id: &str) -> Option<&ItemRecord> {
        self.item_index.get(item_id).map(|&i| &self.items[i])
    }

    /// Turns in the order they started.
    pub fn turns(&self) -> &[TurnRecord] {
        &self.turns
    }

    pub fn turn(&self, turn_id: &str) -> Option<&TurnRecord> {
        self.turn_index.get(turn_id).map(|&i| &self.turns[i])
    }

    /// The turn in progress, if any.
    pub fn active_turn(&self) -> Option<&TurnRecord> {
        self.turns.iter().rev().find(|t| !t.status.is_terminal())
    }

    /// Applies every event in order, stopping at the first refusal.
    pub fn apply_all<'a>(
        &mut self,
        events: impl IntoIterator<Item = &'a ThreadEvent>,
    ) -> Result<(), ReduceError> {
        for event in events {
            self.apply(event)?;
        }
        Ok(())
    }

    /// Checks and applies one event. On error nothing changes.
    pub fn apply(&mut self, event: &ThreadEvent) -> Result<Change, ReduceError> {
        if event.thread_id != self.thread_id {
            return Err(ReduceError::WrongThread {
                expected: self.thread_id.clone(),
                got: event.thread_id.clone(),
            });
        }
        if event.seq != self.next_seq(&event.payload) {
            return Err(ReduceError::SeqGap {
                thread_id: self.thread_id.clone(),
                last: self.last_seq,
                got: event.seq,
            });
        }
        let change = self.apply_payload(event)?;
        self.last_seq = event.seq;
        Ok(change)
    }

    /// The seq `payload` must have: the next one, except for
    /// `thread/eventsLost`, which comes right after the range it voids (a
    /// range that starts at the next seq); the reducer refuses any other gap.
    fn next_seq(&self, payload: &ServerNotification) -> u64 {
        let next = self.last_seq + 1;
        match payload {
            ServerNotification::ThreadEventsLost(lost)
                if lost.from_seq == next && lost.to_seq >= lost.from_seq =>
            {
                lost.to_seq.saturating_add(1)
            }
            _ => next,
        }
    }

    fn apply_payload(&mut self, event: &ThreadEvent) -> Result<Change, ReduceError> {
        let seq = event.seq;
        let payload = &event.payload;
        match payload {
            ServerNotification::TurnStarted(n) => {
                let turn = &n.turn;
                if self.turn_index.contains_key(&turn.id) {
                    return Err(ReduceError::DuplicateTurn {
                        turn_id: turn.id.clone(),
                    });
                }
                if let Some(active) = self.active_turn() {
                    return Err(ReduceError::TurnAlreadyActive {
                        turn_id: turn.id.clone(),
                        active: active.id.clone(),
                    });
                }
                self.turns.push(TurnRecord {
                    thread_id: self.thread_id.clone(),
                    id: turn.id.clone(),
                    status: TurnStatus::InProgress,
                    error: None,
                    started_at: turn.started_at.or(Some(event.at_ms / 1000)),
                    completed_at: None,
                    duration_ms: None,
                    token_usage: None,
                    ordinal: seq,
                    seq,
                });
                let index = self.turns.len() - 1;
                self.turn_index.insert(turn.id.clone(), index);
                Ok(Change::Turn(index))
            }
            ServerNotification::TurnCompleted(n) => {
                let turn = &n.turn;
                let index = self.turn_slot(payload.method(), &turn.id)?;
                let record = &self.turns[index];
                if record.status.is_terminal() {
                    return Err(ReduceError::TurnAlreadyCompleted {
                        turn_id: turn.id.clone(),
                        status: record.status,
                    });
                }
                if !turn.status.is_terminal() {
                    return Err(ReduceError::TurnCompletedInProgress {
                        turn_id: turn.id.clone(),
                    });
                }
                if let Some(open) = self
                    .items
                    .iter()
                    .find(|r| r.turn_id == turn.id && !r.envelope.status.is_terminal())
                {
                    return Err(ReduceError::TurnHasOpenItems {
                        turn_id: turn.id.clone(),
                        item_id: open.item.id().to_owned(),
                    });
                }
                let record = &mut self.turns[index];
                record.status = turn.status;
                record.error = turn.error.clone();
                record.completed_at = turn.completed_at.or(Some(event.at_ms / 1000));
                record.duration_ms = turn
                    .duration_ms
                    .or_else(|| record.started_at.map(|s| (event.at_ms - s * 1000).max(0)));
                if turn.token_usage.is_some() {
                    record.token_usage = turn.token_usage;
                }
                record.seq = seq;
                Ok(Change::Turn(index))
            }
            ServerNotification::ItemStarted(n) => {
                let item_id = n.item.id();
                self.check_start(item_id, &n.turn_id)?;
                let envelope = n.envelope.clone().unwrap_or_else(|| {
                    let at = if n.started_at_ms > 0 {
                        n.started_at_ms
                    } else {
                        event.at_ms
                    };
                    ItemEnvelope::started("", n.item.kind().default_audience(), at)
                });
                if envelope.status.is_terminal() {
                    return Err(ReduceError::StartedTerminal {
                        item_id: item_id.to_owned(),
                        status: envelope.status,
                    });
                }
                self.items.push(ItemRecord {
                    thread_id: self.thread_id.clone(),
                    turn_id: n.turn_id.clone(),
                    ordinal: seq,
                    seq,
                    item: n.item.clone(),
                    envelope,
                    token_count: None,
                });
                let index = self.items.len() - 1;
                self.item_index.insert(item_id.to_owned(), index);
                Ok(Change::Item(index))
            }
            ServerNotification::ItemCompleted(n) => {
                let item_id = n.item.id();
                let index = self.open_item(payload.method(), item_id)?;
                let record = &self.items[index];
                if record.item.kind() != n.item.kind() {
                    return Err(ReduceError::KindChanged {
                        item_id: item_id.to_owned(),
                        started: record.item.kind(),
                        completed: n.item.kind(),
                    });
                }
                let status = n
                    .envelope
                    .as_ref()
                    .map_or(ItemStatus::Completed, |e| e.status);
                if !status.is_terminal() {
                    return Err(ReduceError::CompletedInProgress {
                        item_id: item_id.to_owned(),
                    });
                }
                let record = &mut self.items[index];
                let started_at_ms = record.envelope.started_at_ms;
                if let Some(envelope) = &n.envelope {
                    record.envelope = envelope.clone();
                    record.envelope.started_at_ms = started_at_ms;
                }
                record.envelope.status = status;
                let completed_at = if n.completed_at_ms > 0 {
                    n.completed_at_ms
                } else {
                    event.at_ms
                };
                record.envelope.completed_at_ms.get_or_insert(completed_at);
                // The completed item is authoritative over its deltas. It
                // usually equals what the start and the deltas built (an
                // item born complete always does): comparing is cheaper
                // than a copy and dropping the old one.
                if record.item != n.item {
                    record.item = n.item.clone();
                }
                record.token_count = None;
                record.seq = seq;
                Ok(Change::Item(index))
            }
            ServerNotification::AgentMessageDelta(_)
            | ServerNotification::PlanDelta(_)
            | ServerNotification::ReasoningSummaryTextDelta(_)
            | ServerNotification::ReasoningSummaryPartAdded(_)
            | ServerNotification::ReasoningTextDelta(_)
            | ServerNotification::CommandExecutionOutputDelta(_)
            | ServerNotification::McpToolCallProgress(_) => {
                // Invariant: every delta's params name their item (the
                // notification table gives them `NotificationParams::item_id`).
                #[allow(clippy::expect_used)]
                let item_id = payload.item_id().expect("deltas name their item");
                let index = self.open_item(payload.method(), item_id)?;
                let record = &mut self.items[index];
                delta::apply_delta(&mut record.item, payload)?;
                record.token_count = None;
                record.seq = seq;
                Ok(Change::Item(index))
            }
            ServerNotification::ItemRemoved(n) => {
                let Some(&index) = self.item_index.get(&n.item_id) else {
                    return Err(ReduceError::UnknownItem {
                        method: payload.method(),
                        item_id: n.item_id.clone(),
                    });
                };
                let record = &self.items[index];
                if !record.envelope.status.is_terminal() {
                    return Err(ReduceError::RemoveOpenItem {
                        item_id: n.item_id.clone(),
                    });
                }
                if record.turn_id != n.turn_id {
                    return Err(ReduceError::ItemTurnMismatch {
                        item_id: n.item_id.clone(),
                        given: n.turn_id.clone(),
                        actual: record.turn_id.clone(),
                    });
                }
                self.items.remove(index);
                self.item_index.remove(&n.item_id);
                for i in self.item_index.values_mut() {
                    if *i > index {
                        *i -= 1;
                    }
                }
                Ok(Change::Removed(n.item_id.clone()))
            }
            ServerNotification::ThreadCleared(_) => {
                if let Some(active) = self.active_turn() {
                    return Err(ReduceError::ClearWhileTurnActive {
                        turn_id: active.id.clone(),
                    });
                }
                self.items.clear();
                self.item_index.clear();
                Ok(Change::Cleared)
            }
            ServerNotification::ThreadStarted(_)
            | ServerNotification::ThreadStatusChanged(_)
            | ServerNotification::ThreadNameUpdated(_)
            | ServerNotification::ThreadArchived(_)
            | ServerNotification::ThreadUnarchived(_)
            | ServerNotification::ThreadReverted(_)
            | ServerNotification::ThreadDeleted(_)
            | ServerNotification::ThreadClosed(_)
            | ServerNotification::ThreadTokenUsageUpdated(_)
            | ServerNotification::Error(_)
            | ServerNotification::ServerRequestResolved(_)
            | ServerNotification::ThreadCompacted(_)
            | ServerNotification::ThreadEventsLost(_) => Ok(Change::Thread),
        }
    }

    /// Whether item `item_id` may start in turn `turn_id`: it is new, and
    /// the turn is known and in progress.
    fn check_start(&self, item_id: &str, turn_id: &str) -> Result<(), ReduceError> {
        if self.item_index.contains_key(item_id) {
            return Err(ReduceError::DuplicateItem {
                item_id: item_id.to_owned(),
            });
        }
        let Some(&turn) = self.turn_index.get(turn_id) else {
            return Err(ReduceError::UnknownTurn {
                item_id: item_id.to_owned(),
                turn_id: turn_id.to_owned(),
            });
        };
        self.ensure_turn_active(turn)
    }

    fn turn_slot(&self, method: &'static str, turn_id: &str) -> Result<usize, ReduceError> {
        self.turn_index
            .get(turn_id)
            .copied()
            .ok_or_else(|| ReduceError::UnknownTurnEvent {
                method,
                turn_id: turn_id.to_owned(),
            })
    }

    fn ensure_turn_active(&self, turn: usize) -> Result<(), ReduceError> {
        let record = &self.turns[turn];
        if record.status.is_terminal() {
            return Err(ReduceError::TurnNotActive {
                turn_id: record.id.clone(),
                status: record.status,
            });
        }
        Ok(())
    }

    /// The index of an existing, in-progress item.
    fn open_item(&self, method: &'static str, item_id: &str) -> Result<usize, ReduceError> {
        let Some(&index) = self.item_index.get(item_id) else {
            return Err(ReduceError::UnknownItem {
                method,
                item_id: item_id.to_owned(),
            });
        };
        let status = self.items[index].envelope.status;
        if status.is_terminal() {
            return Err(ReduceError::ItemTerminal {
                method,
                item_id: item_id.to_owned(),
                status,
            });
        }
        Ok(index)
    }
}
