//! What a thread's next commit writes: the events accepted since the last
//! one, as rows, and what else changed in the thread's row.

use std::borrow::Cow;

use spool_core::{ItemRecord, ThreadReducer};
use spool_protocol::{ItemCompletedNotification, ItemStatus, ServerNotification, ThreadEvent};

use super::dirty::Dirty;
use crate::born::{Body, completion_of};
use crate::codec::encode;
use crate::error::StoreError;
use crate::types::ThreadRecord;

/// What the next commit writes for a thread.
#[derive(Default)]
pub(crate) struct Pending {
    /// The thread row to insert: the thread was created in this batch.
    pub(crate) created: Option<ThreadRecord>,
    pub(crate) created_at_ms: i64,
    /// Accepted events, in seq order.
    pub(crate) events: Vec<PendingEvent>,
    /// The projection rows to write or delete.
    pub(crate) dirty: Dirty,
    pub(crate) name: Option<Option<String>>,
    pub(crate) preview: Option<String>,
    /// The thread's archived flag as the last event set it.
    pub(crate) archived: Option<bool>,
}

impl Pending {
    pub(crate) fn is_empty(&self) -> bool {
        self.created.is_none() && self.events.is_empty()
    }

    /// The seq of the commit's first event (`u64::MAX` with none): a row
    /// whose item started before it was written by an earlier commit. The
    /// start an item born complete stands for counts.
    pub(crate) fn first_seq(&self) -> u64 {
        self.events
            .first()
            .map_or(u64::MAX, |e| e.seq - u64::from(e.born))
    }
}

/// Whether a commit whose first event is `first_seq` leaves this dirty
/// item's row as it is: the item is still in progress and its row was
/// written by an earlier commit (its start's seq, the ordinal, is before
/// `first_seq`), so it changed only by deltas. Readers catch such a row up
/// from the log (`sqlite/catch_up.rs`, `postgres/catch_up.rs`): rewriting
/// it would write a long streamed message whole at every group commit,
/// which is quadratic in its length. Nor does it move the view ranks.
pub(crate) fn keeps_row(record: &ItemRecord, first_seq: u64) -> bool {
    record.envelope.status == ItemStatus::InProgress && record.ordinal < first_seq
}

/// An accepted event as the `events` table stores it.
pub(crate) struct PendingEvent {
    pub(crate) seq: u64,
    pub(crate) at_ms: i64,
    pub(crate) method: &'static str,
    pub(crate) item_id: Option<String>,
    /// Where the row's payload comes from.
    pub(crate) source: Source,
    /// The completion of an item born complete (`born.rs`): the row
    /// stands for the item's start too, at the seq before.
    pub(crate) born: bool,
    /// Whether the row may leave its body to a projection row: the
    /// completion of an item born complete that is exactly what the item's
    /// row holds (if that row is written with it), or a turn's start or
    /// completion that is exactly what the turn's row holds (`born.rs`).
    pub(crate) body: Body,
}

/// How a pending row holds the event it stands for: one of three, never
/// two at once.
pub(crate) enum Source {
    /// The caller's JSON of the event.
    Json(String),
    /// The completion of an item born complete, or a turn's start or
    /// completion, that the caller left unencoded: kept typed (moved here,
    /// not copied, unless the appender asked for the events back), encoded
    /// only if its row must hold it (see [`PendingEvent::payload_json`]),
    /// and what a rebuild replays. The whole event is kept, as it was boxed
    /// when checked (`append.rs`), rather than moved out of its box into
    /// another.
    Typed(Box<ThreadEvent>),
    /// The completion of an item born complete that the item's record in
    /// the reducer took whole (`ThreadReducer::apply_born_owned`, for an
    /// appender that asked for nothing back): its body is the record
    /// (`born::completion_of`), and the batch writes it as
    /// [`crate::born::PROJECTED`]. Anything that may drop the record first
    /// gives the row its completion back ([`PendingEvent::refill`]).
    InRecord,
}

impl PendingEvent {
    /// The text of the event's row when it holds its payload: the caller's
    /// JSON, a typed event encoded now, or for a row whose body is its
    /// item's record ([`Source::InRecord`]) that record in `reducer`, encoded
    /// as the completion it stands for.
    pub(crate) fn payload_json(
        &self,
        reducer: &ThreadReducer,
        thread_id: &str,
    ) -> Result<Cow<'_, str>, StoreError> {
        match &self.source {
            Source::Json(json) => Ok(Cow::Borrowed(json)),
            Source::Typed(event) => encode("notification", &event.payload).map(Cow::Owned),
            Source::InRecord => {
                let completion = completion_in_record(reducer, self.seq)
                    .ok_or_else(|| body_lost(thread_id, self.seq))?;
                let payload = ServerNotification::ItemCompleted(completion);
                encode("notification", &payload).map(Cow::Owned)
            }
        }
    }

    /// The notification, for a rebuild; the error names the seq.
    pub(crate) fn payload(&self) -> Result<ServerNotification, String> {
        match &self.source {
            Source::Json(json) => {
                serde_json::from_str(json).map_err(|e| format!("pending seq {}: {e}", self.seq))
            }
            Source::Typed(event) => Ok(event.payload.clone()),
            Source::InRecord => Err(format!(
                "pending seq {}: its body was left to a record",
                self.seq
            )),
        }
    }

    /// Gives a row whose body is its item's record ([`Source::InRecord`]) its
    /// completion back, built from the record; other rows are left as they
    /// are.
    pub(crate) fn refill(
        &mut self,
        reducer: &ThreadReducer,
        thread_id: &str,
    ) -> Result<(), StoreError> {
        if matches!(self.source, Source::InRecord) {
            let event = completion_event(reducer, thread_id, self.seq, self.at_ms)?;
            self.source = Source::Typed(event);
        }
        Ok(())
    }
}

/// The event of the completion at `seq` (at `at_ms`) of an item born
/// complete whose record took it whole, built from that record. The
/// record gone is a bug (every path that drops records refills the rows
/// first), refused rather than written wrong.
pub(crate) fn completion_event(
    reducer: &ThreadReducer,
    thread_id: &str,
    seq: u64,
    at_ms: i64,
) -> Result<Box<ThreadEvent>, StoreError> {
    let completion = completion_in_record(reducer, seq).ok_or_else(|| body_lost(thread_id, seq))?;
    Ok(Box::new(ThreadEvent {
        thread_id: thread_id.to_owned(),
        seq,
        at_ms,
        payload: ServerNotification::ItemCompleted(completion),
    }))
}

/// The error of a row at `seq` whose body was left to a record that is
/// gone.
fn body_lost(thread_id: &str, seq: u64) -> StoreError {
    StoreError::StateLost {
        thread_id: thread_id.to_owned(),
        reason: format!("pending seq {seq}: its body was left to an item's record, which is gone"),
    }
}

/// The completion of the item born complete whose completion is at `seq`,
/// built from its record, if the reducer holds that record as that
/// completion left it: the item started at the seq before, and nothing
/// changed it since.
fn completion_in_record(reducer: &ThreadReducer, seq: u64) -> Option<ItemCompletedNotification> {
    let record = record_at(reducer, seq)?;
    completion_of(record.clone())
}

/// The record of the item born complete whose completion is at `seq` (its
/// ordinal the seq before), if nothing changed it since.
pub(crate) fn record_at(reducer: &ThreadReducer, seq: u64) -> Option<&ItemRecord> {
    let items = reducer.items();
    let ordinal = seq.checked_sub(1)?;
    let index = items.partition_point(|record| record.ordinal < ordinal);
    items
        .get(index)
        .filter(|record| record.ordinal == ordinal && record.seq == seq)
}
