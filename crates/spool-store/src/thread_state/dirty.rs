//! Applying an event to a thread's reducer and noting which projection
//! rows the next commit must write or delete.
//!
//! Rows are noted by their index in the reducer (cheap for a stream of
//! deltas), so every change to the reducer's item list must keep the noted
//! indices pointing at the same items: `item/removed` shifts the later ones
//! down, `thread/cleared` empties the list, and restoring a compacted item
//! (below) shifts the later ones up.
//!
//! The reducer of the writer holds only open items and a few recently
//! closed ones (see `state.rs`). `item/removed` usually names a closed item
//! it dropped, so that item is first read back from the `items` table and
//! put back in the reducer, which then checks and applies the removal as
//! it would on a full reducer. An item whose row is already due for
//! deletion in this batch is not read back: for the reducer it is gone.

use spool_core::reducer::Change;
use spool_core::{ItemRecord, ReduceError, ThreadReducer};
use spool_protocol::{ServerNotification, ThreadEvent};

use super::rows::{Rows, needs};
use crate::error::StoreError;

/// The projection rows one thread's next commit writes or deletes.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    /// Indices into the reducer's items whose rows changed (may repeat).
    pub(crate) items: Vec<usize>,
    /// Indices into the reducer's turns whose rows changed (may repeat).
    pub(crate) turns: Vec<usize>,
    /// Items whose rows go (`item/removed`), in the order removed.
    pub(crate) removed: Vec<RemovedItem>,
    /// `thread/cleared`: every item row of the thread goes, before the rows
    /// of items started after the clear are written.
    pub(crate) cleared: bool,
}

#[derive(Debug)]
pub(crate) struct RemovedItem {
    pub(crate) item_id: String,
    pub(crate) turn_id: String,
}

impl Dirty {
    /// Whether the stored row of this item is due for deletion, so the
    /// table no longer speaks for it.
    pub(crate) fn row_deleted(&self, item_id: &str) -> bool {
        self.cleared
            || self
                .removed
                .iter()
                .any(|removed| removed.item_id == item_id)
    }

    fn note_item(&mut self, index: usize) {
        // Consecutive changes to the same row (a stream of deltas) are
        // noted once.
        if self.items.last() != Some(&index) {
            self.items.push(index);
        }
    }

    fn note_turn(&mut self, index: usize) {
        if self.turns.last() != Some(&index) {
            self.turns.push(index);
        }
    }

    /// An item was inserted into the reducer at `index`.
    fn note_inserted(&mut self, index: usize) {
        for noted in &mut self.items {
            if *noted >= index {
                *noted += 1;
            }
        }
    }

    /// The item at `index` left the reducer; its row goes.
    fn note_removed(&mut self, index: usize, removed: RemovedItem) {
        self.items.retain(|&noted| noted != index);
        for noted in &mut self.items {
            if *noted > index {
                *noted -= 1;
            }
        }
        self.removed.push(removed);
    }

    /// Every item left the reducer; every row goes.
    fn note_cleared(&mut self) {
        self.items.clear();
        self.removed.clear();
        self.cleared = true;
    }
}

/// Why an event could not be applied.
pub(crate) enum ApplyError {
    Refused(ReduceError),
    /// Reading a compacted item back failed.
    Store(StoreError),
}

/// A failed apply, and whether the reducer changed anyway (an item was
/// read back before the reducer refused the event), so the caller must
/// rebuild it.
pub(crate) struct Failed {
    pub(crate) error: ApplyError,
    pub(crate) reducer_changed: bool,
}

/// Checks and applies one event, noting the rows it changed in `dirty`.
pub(crate) fn apply(
    reducer: &mut ThreadReducer,
    dirty: &mut Dirty,
    rows: Option<&dyn Rows>,
    event: &ThreadEvent,
) -> Result<(), Failed> {
    let mut reducer_changed = false;
    // Where the removed item sits in the reducer, and its turn.
    let mut removed_at = None;
    let mut removed_turn = String::new();
    if let ServerNotification::ItemRemoved(n) = &event.payload {
        removed_turn.clone_from(&n.turn_id);
        if reducer.item(&n.item_id).is_none() && !dirty.row_deleted(&n.item_id) {
            let restored = needs(rows)
                .and_then(|rows| restore(reducer, rows, &n.item_id))
                .map_err(|error| Failed {
                    error: ApplyError::Store(error),
                    reducer_changed: false,
                })?;
            if let Some(index) = restored {
                dirty.note_inserted(index);
                reducer_changed = true;
            }
        }
        removed_at = reducer
            .item(&n.item_id)
            .map(|record| position(reducer, record));
    }
    let change = reducer.apply(event).map_err(|error| Failed {
        error: ApplyError::Refused(error),
        reducer_changed,
    })?;
    match change {
        Change::Item(index) => dirty.note_item(index),
        Change::Turn(index) => dirty.note_turn(index),
        Change::Removed(item_id) => {
            // Only item/removed removes an item, so `removed_turn` is its
            // turn (which the reducer checked).
            let turn_id = removed_turn;
            match removed_at {
                Some(index) => dirty.note_removed(index, RemovedItem { item_id, turn_id }),
                // The reducer accepted the removal of an item it did not
                // hold: impossible, since it refuses unknown items. Noting
                // the deletion is still right; only indices are unknown.
                None => dirty.removed.push(RemovedItem { item_id, turn_id }),
            }
        }
        Change::Cleared => dirty.note_cleared(),
        Change::Thread => {}
    }
    Ok(())
}

/// The index of a record the reducer holds (its items are in ordinal
/// order, ordinals unique).
fn position(reducer: &ThreadReducer, record: &ItemRecord) -> usize {
    reducer
        .items()
        .partition_point(|other| other.ordinal < record.ordinal)
}

/// Reads a stored item back into the reducer, in its ordinal place;
/// returns that index, or `None` if it is not stored.
fn restore(
    reducer: &mut ThreadReducer,
    rows: &dyn Rows,
    item_id: &str,
) -> Result<Option<usize>, StoreError> {
    let thread_id = reducer.thread_id().to_owned();
    let Some(record) = rows.item(&thread_id, item_id)? else {
        return Ok(None);
    };
    let mut items = reducer.items().to_vec();
    let index = items.partition_point(|other| other.ordinal < record.ordinal);
    items.insert(index, record);
    *reducer = ThreadReducer::from_parts(
        thread_id,
        reducer.last_seq(),
        items,
        reducer.turns().to_vec(),
    );
    Ok(Some(index))
}

/// Applies the completion of an item born complete as the pair it stands
/// for (`ThreadReducer::apply_born`), noting the item's row.
pub(crate) fn apply_born(
    reducer: &mut ThreadReducer,
    dirty: &mut Dirty,
    event: &ThreadEvent,
) -> Result<(), Failed> {
    let change = reducer.apply_born(event).map_err(|error| Failed {
        error: ApplyError::Refused(error),
        reducer_changed: false,
    })?;
    if let Change::Item(index) = change {
        dirty.note_item(index);
    }
    Ok(())
}

/// [`apply_born`], the record taking the event whole
/// (`ThreadReducer::apply_born_owned`); a refused event comes back.
pub(crate) fn apply_born_owned(
    reducer: &mut ThreadReducer,
    dirty: &mut Dirty,
    event: Box<ThreadEvent>,
) -> Result<(), (Failed, Box<ThreadEvent>)> {
    let change = reducer.apply_born_owned(event).map_err(|(error, event)| {
        let failed = Failed {
            error: ApplyError::Refused(error),
            reducer_changed: false,
        };
        (failed, event)
    })?;
    if let Change::Item(index) = change {
        dirty.note_item(index);
    }
    Ok(())
}
