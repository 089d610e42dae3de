//! Items born complete: one row in the log for an `item/started` that is
//! followed at once by the item's `item/completed`.
//!
//! A Session API item, a user message or a tool output that arrives whole
//! is started and completed in one append, and its start says nothing the
//! completion does not: the same item, the same envelope but for the
//! status (`inProgress`), the completion time (none) and the provider's
//! data (none). Such a pair is stored as one `events` row under the
//! completion's seq with the method [`RECORDED`] and the completion as its
//! payload; readers give it back as the two events it stands for, the
//! start under the seq before (`read_events_after`). A cursor between the
//! two (a client that saw the start) gets the completion alone.
//!
//! The fold is exact by construction: a pair is folded only when the start
//! is exactly what `spool_core::reducer::born::start_of` gives for the
//! completion, so what a reader rebuilds is what was appended. Any other
//! pair is stored as two rows.
//!
//! The pair travels as the completion alone from the moment the append is
//! checked ([`folds_into`], on the caller's thread, in
//! `thread_state/prepare.rs`; a caller with the completion in hand gives
//! it alone, [`ToAppend::BornComplete`]): the writer applies it in one
//! step (`ThreadReducer::apply_born`), notes one pending row that owns it,
//! and builds the start again only for a caller that asks for the
//! appended events back. For a caller that asks for nothing back, a
//! completion that is exactly the record it makes ([`taken_whole`]) is
//! moved into that record (`ThreadReducer::apply_born_owned`), and its
//! pending row keeps nothing but a mark that its body is the record
//! (`pending::Source::InRecord`).
//!
//! [`ToAppend::BornComplete`]: crate::types::ToAppend::BornComplete
//!
//! The body once: when the completion is also exactly what the item's
//! projection row says ([`completion_of`] the reducer's record), the
//! `events` row keeps no payload and the method [`PROJECTED`]; the item's
//! row in `items` (written in the same transaction, and never changed
//! afterwards: the item is terminal) is the body. Before a removal deletes
//! such an item row, the writer copies the completion back into the log
//! row as an [`RECORDED`] payload (`sqlite/projected.rs`), so the log
//! never loses what it stood for.
//!
//! A turn's start and completion, once: a Session API call's turn is born
//! complete too, its `turn/started` and `turn/completed` in the same append
//! as its items. Its row in `items` (`is_turn = 1`, keyed by the turn's
//! ordinal, the seq of its start) holds all they say, so when a start is
//! exactly [`turn_start_of`] the turn's record, its `events` row keeps no
//! payload and the method [`TURN_START_PROJECTED`], and when a completion
//! is exactly [`turn_completion_of`] the record, its row keeps the turn's
//! ordinal as its payload and the method [`TURN_END_PROJECTED`]. This holds
//! for any turn, not only a session's: a start says only the turn's id and
//! start time, which its row never changes, and a turn's row changes no
//! more once it is completed (a turn is started and completed once, and no
//! other event changes it). Turn rows are deleted only with the thread's
//! whole log (`thread/delete`), so no log row outlives the row it reads.

use spool_core::reducer::born::folds;
use spool_core::{ItemRecord, ThreadReducer, TurnRecord};
use spool_protocol::{
    ItemCompletedNotification, ServerNotification, TokenUsageBreakdown, Turn,
    TurnCompletedNotification, TurnError, TurnItemsView, TurnStartedNotification, TurnStatus,
};

/// The `events.method` of a folded pair: not a protocol method, never sent
/// as such (readers expand it), and so never confused with one.
pub(crate) const RECORDED: &str = "item/recorded";

/// The `events.method` of a folded pair whose completion is the item's row
/// in `items`; its payload is empty. Never sent as such either.
pub(crate) const PROJECTED: &str = "item/projected";

/// The `events.method` of a `turn/started` whose body is the turn's row;
/// its payload is empty.
pub(crate) const TURN_START_PROJECTED: &str = "turn/projected-start";

/// The `events.method` of a `turn/completed` whose body is the turn's row;
/// its payload is the turn's ordinal, in decimal, which finds the row.
pub(crate) const TURN_END_PROJECTED: &str = "turn/projected-end";

/// The `turn/started` a turn's record stands for: the turn's id and start
/// time, in progress, with nothing else.
pub(crate) fn turn_start_of(record: &TurnRecord) -> TurnStartedNotification {
    let mut turn = Turn::new(record.id.clone(), TurnStatus::InProgress);
    turn.started_at = record.started_at;
    TurnStartedNotification {
        thread_id: record.thread_id.clone(),
        turn,
    }
}

/// The `turn/completed` a finished turn's record stands for; `None` for a
/// turn in progress.
pub(crate) fn turn_completion_of(record: &TurnRecord) -> Option<TurnCompletedNotification> {
    if !record.status.is_terminal() {
        return None;
    }
    let mut turn = Turn::new(record.id.clone(), record.status);
    turn.error.clone_from(&record.error);
    turn.started_at = record.started_at;
    turn.completed_at = record.completed_at;
    turn.duration_ms = record.duration_ms;
    turn.token_usage = record.token_usage;
    Some(TurnCompletedNotification {
        thread_id: record.thread_id.clone(),
        turn,
    })
}

/// How a log row of an accepted event holds its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// In its payload.
    Own,
    /// The completion of an item born complete, exactly what the item's
    /// row holds ([`projects`]): the row may leave its body to the item's
    /// row, if that row is written with it.
    Item,
    /// A turn's start, exactly [`turn_start_of`] its record.
    TurnStart,
    /// A turn's completion, exactly [`turn_completion_of`] its record, the
    /// turn started at `ordinal`.
    TurnEnd { ordinal: u64 },
}

/// Whether `event` is one whose row [`turn_body`] may leave without a body
/// (a turn's start or completion), so that its caller need not encode it.
pub(crate) fn may_leave_body(event: &ServerNotification) -> bool {
    matches!(
        event,
        ServerNotification::TurnStarted(_) | ServerNotification::TurnCompleted(_)
    )
}

/// How the log row of a turn's `event` (at `seq`) may hold its body, given
/// the reducer that applied it. Exact by construction: the body is left to
/// the turn's row only when what readers build from it is the event.
pub(crate) fn turn_body(reducer: &ThreadReducer, event: &ServerNotification, seq: u64) -> Body {
    match event {
        ServerNotification::TurnStarted(started) => match reducer.turn(&started.turn.id) {
            Some(record) if record.ordinal == seq && is_turn_start_of(record, started) => {
                Body::TurnStart
            }
            _ => Body::Own,
        },
        ServerNotification::TurnCompleted(completed) => match reducer.turn(&completed.turn.id) {
            Some(record) if record.seq == seq && is_turn_completion_of(record, completed) => {
                Body::TurnEnd {
                    ordinal: record.ordinal,
                }
            }
            _ => Body::Own,
        },
        _ => Body::Own,
    }
}

/// Whether `started` is exactly [`turn_start_of`] `record`, compared field
/// by field: building the start to compare would copy the turn's id and
/// thread.
fn is_turn_start_of(record: &TurnRecord, started: &TurnStartedNotification) -> bool {
    let shape = TurnShape {
        id: &record.id,
        status: TurnStatus::InProgress,
        error: None,
        started_at: record.started_at,
        completed_at: None,
        duration_ms: None,
        token_usage: None,
    };
    started.thread_id == record.thread_id && shape.is(&started.turn)
}

/// Whether `completed` is exactly [`turn_completion_of`] `record` (so
/// `record` is finished), compared field by field.
fn is_turn_completion_of(record: &TurnRecord, completed: &TurnCompletedNotification) -> bool {
    let shape = TurnShape {
        id: &record.id,
        status: record.status,
        error: record.error.as_ref(),
        started_at: record.started_at,
        completed_at: record.completed_at,
        duration_ms: record.duration_ms,
        token_usage: record.token_usage.as_ref(),
    };
    record.status.is_terminal()
        && completed.thread_id == record.thread_id
        && shape.is(&completed.turn)
}

/// What a turn event built from a record holds, borrowed from the record.
struct TurnShape<'r> {
    id: &'r str,
    status: TurnStatus,
    error: Option<&'r TurnError>,
    started_at: Option<i64>,
    completed_at: Option<i64>,
    duration_ms: Option<i64>,
    token_usage: Option<&'r TokenUsageBreakdown>,
}

impl TurnShape<'_> {
    /// Whether `turn` is this, with no items (`Turn::new`'s view of them).
    fn is(&self, turn: &Turn) -> bool {
        // Destructured so that a new field of a turn must be placed here.
        let Turn {
            id,
            items,
            items_view,
            status,
            error,
            started_at,
            completed_at,
            duration_ms,
            token_usage,
        } = turn;
        id == self.id
            && items.is_empty()
            && *items_view == TurnItemsView::NotLoaded
            && *status == self.status
            && error.as_ref() == self.error
            && *started_at == self.started_at
            && *completed_at == self.completed_at
            && *duration_ms == self.duration_ms
            && token_usage.as_ref() == self.token_usage
    }
}

/// The completion an item's projection row stands for: the record's item,
/// turn and envelope, completed when the envelope says. `None` for an item
/// that is not terminal or has no completion time.
pub(crate) fn completion_of(record: ItemRecord) -> Option<ItemCompletedNotification> {
    let completed_at_ms = record.envelope.completed_at_ms?;
    record
        .envelope
        .status
        .is_terminal()
        .then(|| ItemCompletedNotification {
            item: record.item,
            thread_id: record.thread_id,
            turn_id: record.turn_id,
            completed_at_ms,
            envelope: Some(record.envelope),
        })
}

/// Whether `completed` is exactly [`completion_of`] `record`, so its log
/// row may leave the body to the item's row. Compares without cloning.
pub(crate) fn projects(completed: &ItemCompletedNotification, record: &ItemRecord) -> bool {
    let Some(envelope) = &completed.envelope else {
        return false;
    };
    envelope.status.is_terminal()
        && envelope.completed_at_ms == Some(completed.completed_at_ms)
        && record.thread_id == completed.thread_id
        && record.turn_id == completed.turn_id
        && record.envelope == *envelope
        && record.item == completed.item
}

/// Whether the record `ThreadReducer::apply_born` makes of `notification`,
/// the completion of an item born complete in thread `thread_id`, is
/// exactly it ([`projects`]): a terminal completion of this thread whose
/// envelope says when it completed, as the completion does. Such a
/// completion can be left to its record whole and built again from it
/// ([`completion_of`]). Decided before it is applied, without a record.
pub(crate) fn taken_whole(notification: &ServerNotification, thread_id: &str) -> bool {
    let ServerNotification::ItemCompleted(completed) = notification else {
        return false;
    };
    completed.thread_id == thread_id
        && completed.envelope.as_ref().is_some_and(|envelope| {
            envelope.status.is_terminal()
                && envelope.completed_at_ms == Some(completed.completed_at_ms)
        })
}

/// Whether `start` is an item's start and `next` its completion, the start
/// saying nothing the completion does not (`spool_core::reducer::born::folds`).
pub(crate) fn folds_into(start: &ServerNotification, next: &ServerNotification) -> bool {
    match (start, next) {
        (
            ServerNotification::ItemStarted(started),
            ServerNotification::ItemCompleted(completed),
        ) => folds(started, completed),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: TurnStatus) -> TurnRecord {
        TurnRecord {
            thread_id: "t".into(),
            id: "u".into(),
            status,
            error: None,
            started_at: Some(1),
            completed_at: status.is_terminal().then_some(2),
            duration_ms: status.is_terminal().then_some(1_000),
            token_usage: None,
            ordinal: 2,
            seq: 9,
        }
    }

    /// `base` with one change.
    fn with<T: Clone>(base: &T, change: fn(&mut T)) -> T {
        let mut changed = base.clone();
        change(&mut changed);
        changed
    }

    /// Each field of a turn changed one at a time.
    fn variants(turn: &Turn) -> Vec<Turn> {
        let with = |change: fn(&mut Turn)| with(turn, change);
        vec![
            turn.clone(),
            with(|t| t.id = "v".into()),
            with(|t| t.items = vec![an_item()]),
            with(|t| t.items_view = TurnItemsView::Full),
            with(|t| t.status = TurnStatus::Failed),
            with(|t| t.status = TurnStatus::InProgress),
            with(|t| {
                t.error = Some(TurnError {
                    message: "x".into(),
                    codex_error_info: None,
                    additional_details: None,
                    misalignment: None,
                })
            }),
            with(|t| t.started_at = None),
            with(|t| t.completed_at = Some(7)),
            with(|t| t.duration_ms = Some(7)),
            with(|t| t.token_usage = Some(TokenUsageBreakdown::default())),
        ]
    }

    fn an_item() -> spool_protocol::ThreadItem {
        serde_json::from_value(serde_json::json!({
            "type": "agentMessage", "id": "i", "text": "hi"
        }))
        .unwrap()
    }

    /// The field-by-field checks say what comparing with the built start or
    /// completion says, for every field changed (and the thread's id).
    #[test]
    fn a_turn_event_is_compared_with_its_record_as_the_built_one_would_be() {
        let open = record(TurnStatus::InProgress);
        let start = turn_start_of(&open);
        for thread_id in ["t", "other"] {
            for turn in variants(&start.turn) {
                let started = TurnStartedNotification {
                    thread_id: thread_id.into(),
                    turn,
                };
                assert_eq!(
                    is_turn_start_of(&open, &started),
                    start == started,
                    "{started:?}"
                );
            }
        }
        for status in [TurnStatus::Completed, TurnStatus::Interrupted] {
            let done = record(status);
            let completion = turn_completion_of(&done).unwrap();
            for thread_id in ["t", "other"] {
                for turn in variants(&completion.turn) {
                    let completed = TurnCompletedNotification {
                        thread_id: thread_id.into(),
                        turn,
                    };
                    assert_eq!(
                        is_turn_completion_of(&done, &completed),
                        completion == completed,
                        "{completed:?}"
                    );
                }
            }
        }
        // An open turn has no completion.
        let early = TurnCompletedNotification {
            thread_id: "t".into(),
            turn: open.to_turn(Vec::new()),
        };
        assert!(!is_turn_completion_of(&open, &early));
    }

    /// `taken_whole` says, before the completion is applied, what
    /// `projects` says of it and the record `apply_born` makes of it.
    #[test]
    fn a_completion_is_taken_whole_exactly_when_its_record_projects_it() {
        use spool_protocol::{Audience, ItemEnvelope, ItemStatus, ThreadEvent};
        let mut envelope = ItemEnvelope::started("user", Audience::BOTH, 5);
        envelope.status = ItemStatus::Completed;
        envelope.completed_at_ms = Some(7);
        let base = ItemCompletedNotification {
            item: an_item(),
            thread_id: "t".into(),
            turn_id: "u".into(),
            completed_at_ms: 7,
            envelope: Some(envelope),
        };
        let with = |change: fn(&mut ItemCompletedNotification)| with(&base, change);
        let cases = [
            base.clone(),
            with(|c| c.completed_at_ms = 0),
            with(|c| c.completed_at_ms = 8),
            with(|c| c.envelope.as_mut().unwrap().completed_at_ms = None),
            with(|c| c.envelope.as_mut().unwrap().status = ItemStatus::Failed),
            with(|c| c.thread_id = "other".into()),
        ];
        let mut taken = 0;
        for completed in cases {
            let mut reducer =
                ThreadReducer::from_parts("t", 9, Vec::new(), vec![record(TurnStatus::InProgress)]);
            let payload = ServerNotification::ItemCompleted(completed.clone());
            let whole = taken_whole(&payload, "t");
            let event = ThreadEvent {
                thread_id: "t".into(),
                seq: 11,
                at_ms: 9,
                payload,
            };
            reducer.apply_born(&event).unwrap();
            let projected = projects(&completed, reducer.item("i").unwrap());
            assert_eq!(whole, projected, "{completed:?}");
            taken += usize::from(whole);
        }
        assert_eq!(taken, 2, "the base and the one failed are taken whole");
    }
}
