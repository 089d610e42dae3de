//! Items born complete: an item whose `item/started` is followed at once
//! by its `item/completed`, the start saying nothing the completion does
//! not (a Session API item, a user message, a tool output that arrives
//! whole). The start is implied by the completion ([`start_of`]), so the
//! pair can travel, be applied and be stored as the completion alone.
//!
//! [`ThreadReducer::apply_born`] applies such a completion as the pair it
//! stands for, in one step.

use spool_protocol::{
    ItemCompletedNotification, ItemEnvelope, ItemStartedNotification, ItemStatus,
    ServerNotification, ThreadEvent,
};

use super::{Change, ReduceError, ThreadReducer};
use crate::record::ItemRecord;

/// The start a completion implies for an item born complete: the same
/// item, turn and envelope, but in progress, with neither a completion
/// time nor provider data (a provider's ids and raw payload come with the
/// completion). `None` when the completion has no envelope (the rule needs
/// one to say when the item started).
pub fn start_of(completed: &ItemCompletedNotification) -> Option<ItemStartedNotification> {
    let envelope = start_envelope(completed.envelope.as_ref()?);
    Some(ItemStartedNotification {
        item: completed.item.clone(),
        thread_id: completed.thread_id.clone(),
        turn_id: completed.turn_id.clone(),
        started_at_ms: envelope.started_at_ms,
        envelope: Some(envelope),
    })
}

/// Whether `started` is exactly [`start_of`] `completed` and `completed`
/// is terminal, so the pair can stand as the completion alone. Compares
/// without cloning the item.
pub fn folds(started: &ItemStartedNotification, completed: &ItemCompletedNotification) -> bool {
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
/// a completion time nor provider data.
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

impl ThreadReducer {
    /// Applies `event`, the completion of an item born complete, as the
    /// pair it stands for: [`start_of`] the completion at the seq before
    /// `event.seq`, then the completion. One step, and no start is built.
    /// It accepts and refuses what applying the two would (the refusal is
    /// the first of the two that fails), and leaves the reducer as they
    /// would; on error nothing changes. An `event` that is not a
    /// completion with an envelope is refused as
    /// [`ReduceError::NotBornComplete`].
    pub fn apply_born(&mut self, event: &ThreadEvent) -> Result<Change, ReduceError> {
        let (n, envelope) = self.check_born(event)?;
        let record = ItemRecord {
            thread_id: self.thread_id.clone(),
            turn_id: n.turn_id.clone(),
            ordinal: event.seq - 1,
            seq: event.seq,
            item: n.item.clone(),
            envelope: envelope.clone(),
            token_count: None,
        };
        Ok(self.push_born(record, n.completed_at_ms, event.at_ms))
    }

    /// [`Self::apply_born`], the record taking the event's item, turn and
    /// envelope instead of copies of them: for a caller that keeps nothing
    /// of the event, the record then being all there is of it. On error
    /// the event is handed back unchanged.
    pub fn apply_born_owned(
        &mut self,
        event: Box<ThreadEvent>,
    ) -> Result<Change, (ReduceError, Box<ThreadEvent>)> {
        if let Err(error) = self.check_born(&event) {
            return Err((error, event));
        }
        let ThreadEvent {
            thread_id,
            seq,
            at_ms,
            payload,
        } = *event;
        let (item, turn_id, completed_at_ms, envelope) = match payload {
            ServerNotification::ItemCompleted(ItemCompletedNotification {
                item,
                turn_id,
                completed_at_ms,
                envelope: Some(envelope),
                ..
            }) => (item, turn_id, completed_at_ms, envelope),
            // `check_born` refuses every other event.
            payload => {
                let error = ReduceError::NotBornComplete {
                    method: payload.method(),
                    item_id: payload.item_id().unwrap_or_default().to_owned(),
                };
                let event = Box::new(ThreadEvent {
                    thread_id,
                    seq,
                    at_ms,
                    payload,
                });
                return Err((error, event));
            }
        };
        let record = ItemRecord {
            // The event's thread is the reducer's (`check_born`).
            thread_id,
            turn_id,
            ordinal: seq - 1,
            seq,
            item,
            envelope,
            token_count: None,
        };
        Ok(self.push_born(record, completed_at_ms, at_ms))
    }

    /// What applying `event` as an item born complete checks; its
    /// completion and the completion's envelope when it passes.
    fn check_born<'e>(
        &self,
        event: &'e ThreadEvent,
    ) -> Result<(&'e ItemCompletedNotification, &'e ItemEnvelope), ReduceError> {
        let ServerNotification::ItemCompleted(n) = &event.payload else {
            return Err(ReduceError::NotBornComplete {
                method: event.payload.method(),
                item_id: event.payload.item_id().unwrap_or_default().to_owned(),
            });
        };
        let item_id = n.item.id();
        let Some(envelope) = &n.envelope else {
            return Err(ReduceError::NotBornComplete {
                method: event.payload.method(),
                item_id: item_id.to_owned(),
            });
        };
        if event.thread_id != self.thread_id {
            return Err(ReduceError::WrongThread {
                expected: self.thread_id.clone(),
                got: event.thread_id.clone(),
            });
        }
        // The start's seq comes first, and must be the next one.
        let start_seq = event.seq.wrapping_sub(1);
        if event.seq == 0 || start_seq != self.last_seq + 1 {
            return Err(ReduceError::SeqGap {
                thread_id: self.thread_id.clone(),
                last: self.last_seq,
                got: start_seq,
            });
        }
        // What the start is checked for (it is in progress by construction).
        self.check_start(item_id, &n.turn_id)?;
        // What the completion is checked for (its item is the start's, so
        // its kind is too).
        if !envelope.status.is_terminal() {
            return Err(ReduceError::CompletedInProgress {
                item_id: item_id.to_owned(),
            });
        }
        Ok((n, envelope))
    }

    /// Adds the checked `record` of an item born complete whose completion
    /// said `completed_at_ms` and came at `at_ms`: completed then (at
    /// `at_ms` when the completion says 0) unless its envelope says when.
    fn push_born(&mut self, mut record: ItemRecord, completed_at_ms: i64, at_ms: i64) -> Change {
        let completed_at = if completed_at_ms > 0 {
            completed_at_ms
        } else {
            at_ms
        };
        record.envelope.completed_at_ms.get_or_insert(completed_at);
        self.last_seq = record.seq;
        self.item_index
            .insert(record.item.id().to_owned(), self.items.len());
        self.items.push(record);
        Change::Item(self.items.len() - 1)
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
