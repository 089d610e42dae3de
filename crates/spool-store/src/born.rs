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
//! appended events back.
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

use spool_core::ItemRecord;
use spool_core::reducer::born::folds;
use spool_protocol::{ItemCompletedNotification, ServerNotification};

/// The `events.method` of a folded pair: not a protocol method, never sent
/// as such (readers expand it), and so never confused with one.
pub(crate) const RECORDED: &str = "item/recorded";

/// The `events.method` of a folded pair whose completion is the item's row
/// in `items`; its payload is empty. Never sent as such either.
pub(crate) const PROJECTED: &str = "item/projected";

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
