//! What the writer says of an event the reducer refuses or cannot judge
//! alone: after a commit the reducer keeps only what is open, so a start
//! whose id is stored is a duplicate, and an event for a stored, closed
//! item or turn gets the precise "terminal" refusal rather than "unknown".

use spool_core::ReduceError;
use spool_protocol::{ItemStatus, ServerNotification, TurnStatus};

use super::ThreadState;
use super::rows::{Kind, Rows, needs};
use crate::codec::{parse_item_status, parse_turn_status};
use crate::error::StoreError;

impl ThreadState {
    /// A start of an item or turn that the reducer no longer holds but the
    /// projection does (and keeps: a row due for deletion in this batch
    /// does not count). `born`: `notification` is the completion of an
    /// item born complete, and stands for its start.
    pub(super) fn stored_duplicate(
        &mut self,
        rows: Option<&dyn Rows>,
        notification: &ServerNotification,
        born: bool,
    ) -> Result<Option<ReduceError>, StoreError> {
        let thread_id = self.reducer.thread_id();
        let started_item = match notification {
            ServerNotification::ItemStarted(n) => Some(&n.item),
            ServerNotification::ItemCompleted(n) if born => Some(&n.item),
            _ => None,
        };
        if let Some(item) = started_item {
            let item_id = item.id();
            if self.reducer.item(item_id).is_some() || self.pending.dirty.row_deleted(item_id) {
                return Ok(None); // the reducer itself decides
            }
            if self.fresh.start(rows, thread_id, Kind::Item, item_id)? {
                return Ok(None); // no row can hold it
            }
            let stored = needs(rows)?.status(thread_id, Kind::Item, item_id)?;
            return Ok(stored.map(|_| ReduceError::DuplicateItem {
                item_id: item_id.to_owned(),
            }));
        }
        match notification {
            ServerNotification::TurnStarted(n) => {
                if self.reducer.turn(&n.turn.id).is_some() {
                    return Ok(None);
                }
                if self.fresh.start(rows, thread_id, Kind::Turn, &n.turn.id)? {
                    return Ok(None);
                }
                let stored = needs(rows)?.status(thread_id, Kind::Turn, &n.turn.id)?;
                Ok(stored.map(|_| ReduceError::DuplicateTurn {
                    turn_id: n.turn.id.clone(),
                }))
            }
            // Only starts can be duplicates.
            _ => Ok(None),
        }
    }

    /// Turns "unknown item/turn" into the terminal-state refusal when the
    /// item or turn is stored but was dropped from the reducer as closed.
    pub(super) fn refine(
        &self,
        rows: Option<&dyn Rows>,
        thread_id: &str,
        error: ReduceError,
    ) -> ReduceError {
        let Some(rows) = rows else {
            return error;
        };
        let refined = match &error {
            ReduceError::UnknownItem { method, item_id }
                if !self.pending.dirty.row_deleted(item_id) =>
            {
                rows.status(thread_id, Kind::Item, item_id)
                    .ok()
                    .flatten()
                    .and_then(|status| parse_item_status(&status))
                    .filter(|status| status.is_terminal())
                    .map(|status: ItemStatus| ReduceError::ItemTerminal {
                        method,
                        item_id: item_id.clone(),
                        status,
                    })
            }
            ReduceError::UnknownTurn { turn_id, .. } => {
                stored_turn_status(rows, thread_id, turn_id).map(|status| {
                    ReduceError::TurnNotActive {
                        turn_id: turn_id.clone(),
                        status,
                    }
                })
            }
            ReduceError::UnknownTurnEvent { turn_id, .. } => {
                stored_turn_status(rows, thread_id, turn_id).map(|status| {
                    ReduceError::TurnAlreadyCompleted {
                        turn_id: turn_id.clone(),
                        status,
                    }
                })
            }
            _ => None,
        };
        refined.unwrap_or(error)
    }
}

/// The status of a stored turn that is over.
fn stored_turn_status(rows: &dyn Rows, thread_id: &str, turn_id: &str) -> Option<TurnStatus> {
    rows.status(thread_id, Kind::Turn, turn_id)
        .ok()
        .flatten()
        .and_then(|status| parse_turn_status(&status))
        .filter(|status| status.is_terminal())
}
