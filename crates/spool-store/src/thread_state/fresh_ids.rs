//! Knowing without a probe that a started id is new to the thread.
//!
//! A start of an item or turn the writer's reducer does not hold must not
//! name one the thread's rows hold (`ThreadState::stored_duplicate`), which
//! costs an index probe per start: a tenth of the writer's time when a
//! Session API call adds 100 items. But the ids spool makes are UUIDv7,
//! which grow with time, so a start usually names an id greater than every
//! id the thread has ever started; no row can hold such an id, and the
//! probe is skipped. The bound is the greatest id the rows held when it was
//! read (one probe of the primary key's end) raised by every start the
//! writer accepts since; ids that are not above it (a client's own ids,
//! say) are probed as before.
//!
//! It is sound because every row of `items` and `turns` comes from a start
//! the thread's state accepted, or was already there when the bound was
//! read: item and turn rows are written only from this state's reducer
//! (the backend's batch writer), and a state that something else changed the rows under is
//! dropped and loaded again (with a bound not yet read). A bound that is
//! too high (a start accepted and then refused with its append, a row
//! deleted since) only costs probes.

use super::rows::{Kind, Rows, needs};
use crate::error::StoreError;

/// The greatest item and turn ids the thread's rows can hold: `None` while
/// not read yet, `Some(None)` when there are no rows.
#[derive(Debug, Default)]
pub(crate) struct FreshIds {
    items: Option<Option<String>>,
    turns: Option<Option<String>>,
}

impl FreshIds {
    /// The bounds of a thread created in this batch: it has no rows.
    pub(crate) fn empty() -> Self {
        FreshIds {
            items: Some(None),
            turns: Some(None),
        }
    }

    /// Notes a start of `id` (whatever becomes of it) and says whether the
    /// id is above every id of its kind the thread's rows can hold, so no
    /// row can hold it. Reads the bound on first use (`rows` are needed only
    /// then).
    pub(crate) fn start(
        &mut self,
        rows: Option<&dyn Rows>,
        thread_id: &str,
        kind: Kind,
        id: &str,
    ) -> Result<bool, StoreError> {
        let bound = match kind {
            Kind::Item => &mut self.items,
            Kind::Turn => &mut self.turns,
        };
        let max = match bound {
            Some(max) => max,
            None => bound.insert(needs(rows)?.max_id(thread_id, kind)?),
        };
        let fresh = max.as_deref().is_none_or(|max| id > max);
        if fresh {
            *max = Some(id.to_owned());
        }
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_above_every_started_one_are_fresh() {
        let mut ids = FreshIds::empty();
        let mut start = |kind, id| ids.start(None, "t", kind, id).unwrap();
        assert!(start(Kind::Item, "b"));
        assert!(!start(Kind::Item, "b"));
        assert!(!start(Kind::Item, "a")); // lower: the bound stays
        assert!(!start(Kind::Item, "b"));
        assert!(start(Kind::Item, "c"));
        assert!(!start(Kind::Item, "c"));
        // Kinds are apart.
        assert!(start(Kind::Turn, "a"));
    }

    #[test]
    fn an_unread_bound_needs_the_connection() {
        let mut ids = FreshIds::default();
        assert!(matches!(
            ids.start(None, "t", Kind::Item, "z"),
            Err(StoreError::WriterBusy)
        ));
    }
}
