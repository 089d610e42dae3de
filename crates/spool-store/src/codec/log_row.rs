//! The events a row of `events` stands for (`born.rs`): its own, the start
//! of an item born complete before a completion that folds it in, and the
//! bodies a row leaves to a projection row, read back from that row.

use spool_core::TurnRecord;
use spool_core::reducer::born::start_of;
use spool_protocol::{ItemCompletedNotification, ServerNotification, ThreadEvent};

use super::{Cells, RowContext, decode_event, event_head as head};
use crate::born::{
    PROJECTED, RECORDED, TURN_END_PROJECTED, TURN_START_PROJECTED, turn_completion_of,
    turn_start_of,
};
use crate::error::{CorruptRow, StoreError};

/// Where a backend reads the bodies log rows leave to projection rows.
pub(crate) trait Bodies {
    /// The completion an `item/projected` row at `seq` about `item_id`
    /// stands for, read from the item's row.
    fn item_completion(
        &self,
        seq: u64,
        item_id: Option<&str>,
    ) -> Result<ItemCompletedNotification, StoreError>;

    /// The turn whose row is keyed by `ordinal`, if the thread has one.
    fn turn(&self, ordinal: u64) -> Result<Option<TurnRecord>, StoreError>;
}

/// The events a row of `events` stands for, those with a seq above
/// `after_seq`, appended to `out`: the row's own, and before it the start
/// of an item born complete when the row folds one in. A row that leaves
/// its body to a projection row is completed from that row by `bodies`.
pub(crate) fn decode_log_row<R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
    after_seq: u64,
    out: &mut Vec<ThreadEvent>,
    bodies: &impl Bodies,
) -> Result<(), StoreError> {
    let method = row.text(3).ok();
    let event = match method {
        Some(PROJECTED) => {
            let (seq, at_ms, cx) = head(row, thread_id)?;
            let item_id = cx.opt_text(row, 4, "item_id")?;
            let completed = bodies.item_completion(seq, item_id)?;
            ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq,
                at_ms,
                payload: ServerNotification::ItemCompleted(completed),
            }
        }
        Some(TURN_START_PROJECTED) => {
            let (seq, at_ms, cx) = head(row, thread_id)?;
            let turn = projected_turn(bodies, &cx, seq, seq, TURN_START_PROJECTED)?;
            if turn.ordinal != seq {
                let cause = format!("the turn's row is at ordinal {}", turn.ordinal);
                return Err(cx.corrupt("method", cause));
            }
            out.push(ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq,
                at_ms,
                payload: ServerNotification::TurnStarted(turn_start_of(&turn)),
            });
            return Ok(());
        }
        Some(TURN_END_PROJECTED) => {
            let (seq, at_ms, cx) = head(row, thread_id)?;
            let ordinal = cx.text(row, 2, "payload")?;
            let ordinal = ordinal
                .parse::<u64>()
                .map_err(|e| cx.corrupt("payload", format!("{TURN_END_PROJECTED}: {e}")))?;
            let turn = projected_turn(bodies, &cx, seq, ordinal, TURN_END_PROJECTED)?;
            let completed = match turn_completion_of(&turn) {
                Some(completed) if turn.seq == seq => completed,
                _ => {
                    let cause = format!(
                        "the turn's row is {} at seq {}",
                        turn.status.as_str(),
                        turn.seq
                    );
                    return Err(cx.corrupt("method", cause));
                }
            };
            out.push(ThreadEvent {
                thread_id: thread_id.to_owned(),
                seq,
                at_ms,
                payload: ServerNotification::TurnCompleted(completed),
            });
            return Ok(());
        }
        _ => decode_event(row, thread_id)?,
    };
    if method != Some(RECORDED) && method != Some(PROJECTED) {
        out.push(event);
        return Ok(());
    }
    let ServerNotification::ItemCompleted(completed) = &event.payload else {
        let cause = format!("a {RECORDED} row holds {}", event.payload.method());
        return Err(corrupt_event(thread_id, &event, cause));
    };
    // The row was read for having a seq above `after_seq`: at least 1.
    let start_seq = event.seq.saturating_sub(1);
    if start_seq > after_seq {
        let Some(started) = start_of(completed) else {
            let cause = format!("a {RECORDED} row holds a completion without an envelope");
            return Err(corrupt_event(thread_id, &event, cause));
        };
        out.push(ThreadEvent {
            thread_id: thread_id.to_owned(),
            seq: start_seq,
            at_ms: event.at_ms,
            payload: ServerNotification::ItemStarted(started),
        });
    }
    out.push(event);
    Ok(())
}

/// The turn row a `method` row at `seq` reads, keyed by `ordinal`.
fn projected_turn(
    bodies: &impl Bodies,
    cx: &RowContext<'_>,
    seq: u64,
    ordinal: u64,
    method: &str,
) -> Result<TurnRecord, StoreError> {
    match bodies.turn(ordinal)? {
        Some(turn) => Ok(turn),
        None => Err(cx.corrupt(
            "method",
            format!("a {method} row at seq {seq}: the thread has no turn at ordinal {ordinal}"),
        )),
    }
}

fn corrupt_event(thread_id: &str, event: &ThreadEvent, cause: String) -> StoreError {
    StoreError::CorruptRow(Box::new(CorruptRow {
        table: "events",
        thread_id: thread_id.to_owned(),
        seq: Some(event.seq),
        item_id: event.payload.item_id().map(str::to_owned),
        column: "payload",
        cause: cause.into(),
    }))
}
