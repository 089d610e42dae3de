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
//! The fold is exact by construction: the writer folds a pair only when
//! [`start_of`] of the completion equals the start it was given, so what a
//! reader rebuilds is what was appended. Any other pair is stored as two
//! rows, as before.
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
use spool_protocol::{
    ItemCompletedNotification, ItemEnvelope, ItemStartedNotification, ItemStatus,
    ServerNotification,
};

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

/// The start a completion implies for an item born complete. `None` when
/// the completion has no envelope (the rule needs one to say when the item
/// started).
pub(crate) fn start_of(completed: &ItemCompletedNotification) -> Option<ItemStartedNotification> {
    let envelope = start_envelope(completed.envelope.as_ref()?);
    Some(ItemStartedNotification {
        item: completed.item.clone(),
        thread_id: completed.thread_id.clone(),
        turn_id: completed.turn_id.clone(),
        started_at_ms: envelope.started_at_ms,
        envelope: Some(envelope),
    })
}

/// Whether `start` is an item's start and `next` its completion, the start
/// saying nothing the completion does not ([`folds`]).
pub(crate) fn folds_into(start: &ServerNotification, next: &ServerNotification) -> bool {
    match (start, next) {
        (
            ServerNotification::ItemStarted(started),
            ServerNotification::ItemCompleted(completed),
        ) => folds(started, completed),
        _ => false,
    }
}

/// Whether `started` is exactly [`start_of`] `completed`, so the pair can
/// be stored as one row. Compares without cloning the item.
pub(crate) fn folds(
    started: &ItemStartedNotification,
    completed: &ItemCompletedNotification,
) -> bool {
    let (Some(started_envelope), Some(completed_envelope)) =
        (&started.envelope, &completed.envelope)
    else {
        return false;
    };
    completed_envelope.status.is_terminal()
        && started.thread_id == completed.thread_id
        && started.turn_id == completed.turn_id
        && started.started_at_ms == completed_envelope.started_at_ms
        && is_start_envelope(started_envelope, completed_envelope)
        && started.item == completed.item
}

/// Whether `started` is [`start_envelope`] of `completed`, compared field
/// by field: building that envelope to compare would copy the provenance.
fn is_start_envelope(started: &ItemEnvelope, completed: &ItemEnvelope) -> bool {
    // Destructured so that a new field must be placed here, as in
    // `start_envelope`.
    let ItemEnvelope {
        status,
        started_at_ms,
        completed_at_ms,
        provenance,
        audience,
        provider_data,
    } = started;
    *status == ItemStatus::InProgress
        && *started_at_ms == completed.started_at_ms
        && completed_at_ms.is_none()
        && *provenance == completed.provenance
        && *audience == completed.audience
        && provider_data.is_none()
}

/// The envelope of the start: the completion's, in progress, with neither
/// a completion time nor provider data (a provider's ids and raw payload
/// come with the completion).
fn start_envelope(completed: &ItemEnvelope) -> ItemEnvelope {
    // Destructured so that a new envelope field must be placed here.
    let ItemEnvelope {
        status: _,
        started_at_ms,
        completed_at_ms: _,
        provenance,
        audience,
        provider_data: _,
    } = completed;
    ItemEnvelope {
        status: ItemStatus::InProgress,
        started_at_ms: *started_at_ms,
        completed_at_ms: None,
        provenance: provenance.clone(),
        audience: *audience,
        provider_data: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use spool_protocol::{Audience, ThreadItem};

    use super::*;

    fn completed() -> ItemCompletedNotification {
        let mut envelope = ItemEnvelope::started("user", Audience::BOTH, 1_000);
        envelope.status = ItemStatus::Completed;
        envelope.completed_at_ms = Some(1_000);
        envelope.provider_data =
            Some(json!({"inputItem": {"role": "user", "content": "hi"}}).into());
        ItemCompletedNotification {
            item: serde_json::from_value::<ThreadItem>(json!({
                "type": "agentMessage", "id": "i1", "text": "hello"
            }))
            .unwrap(),
            thread_id: "t".into(),
            turn_id: "u".into(),
            completed_at_ms: 1_000,
            envelope: Some(envelope),
        }
    }

    #[test]
    fn the_start_of_a_completion_folds_into_it() {
        let completed = completed();
        let started = start_of(&completed).unwrap();
        assert!(folds(&started, &completed));
        assert_eq!(
            started.envelope.as_ref().unwrap().status,
            ItemStatus::InProgress
        );
        assert_eq!(started.envelope.as_ref().unwrap().provider_data, None);
    }

    #[test]
    fn a_start_that_says_more_does_not_fold() {
        let completed = completed();
        let base = start_of(&completed).unwrap();

        let mut other_text = base.clone();
        other_text.item = serde_json::from_value(json!({
            "type": "agentMessage", "id": "i1", "text": ""
        }))
        .unwrap();
        let mut with_data = base.clone();
        with_data.envelope.as_mut().unwrap().provider_data = Some(json!({"id": "x"}).into());
        let mut other_time = base.clone();
        other_time.started_at_ms = 999;
        let mut other_turn = base.clone();
        other_turn.turn_id = "v".into();
        let mut no_envelope = base.clone();
        no_envelope.envelope = None;
        // Each field of the start's envelope.
        let envelope_with = |change: fn(&mut ItemEnvelope)| {
            let mut started = base.clone();
            change(started.envelope.as_mut().unwrap());
            started
        };
        let other_agent = envelope_with(|e| e.provenance.agent = "someone".into());
        let other_audience = envelope_with(|e| e.audience = Audience::CLIENT_ONLY);
        let with_completion_time = envelope_with(|e| e.completed_at_ms = Some(5));
        let not_in_progress = envelope_with(|e| e.status = ItemStatus::Completed);
        let other_envelope_time = envelope_with(|e| e.started_at_ms = 999);
        for started in [
            other_text,
            with_data,
            other_time,
            other_turn,
            no_envelope,
            other_agent,
            other_audience,
            with_completion_time,
            not_in_progress,
            other_envelope_time,
        ] {
            assert!(!folds(&started, &completed), "{started:?}");
        }

        let mut still_open = completed.clone();
        still_open.envelope.as_mut().unwrap().status = ItemStatus::InProgress;
        assert!(!folds(&base, &still_open));
    }
}
