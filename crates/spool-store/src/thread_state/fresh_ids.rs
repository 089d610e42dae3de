//! Knowing without a probe that a started id is new to the thread.
//!
//! A start of an item or turn the writer's reducer does not hold must not
//! name one the thread's rows hold (`ThreadState::stored_duplicate`), which
//! costs an index probe per start: a tenth of the writer's time when a
//! Session API call adds 100 items. But the ids spool makes are UUIDv7,
//! which grow with time, so a start usually names an id greater than every
//! id the thread has ever started; no row can hold such an id, and the
//! probe is skipped. The bound is an id at least as great as every id the
//! rows held when it was read, raised by every start the writer accepts
//! since; ids that are not above it (a client's own ids, say) are probed
//! as before. It is read in two steps: first the backend's cheap bound
//! (`Rows::id_bound`; on SQLite the greatest id of every thread, one seek
//! to the id index's end), and only when a start is not above that, the
//! thread's own greatest id (`Rows::max_id`, a scan of its rows), once: a
//! thread of a store where some other thread holds an id above spool's
//! (a client's own, say) pays that scan, and then probes only what is not
//! above its own ids.
//!
//! It is sound because every item row and turn row comes from a start
//! the thread's state accepted, or was already there when the bound was
//! read: item and turn rows are written only from this state's reducer
//! (the backend's batch writer), and a state that something else changed the rows under is
//! dropped and loaded again (with a bound not yet read). A bound that is
//! too high (a start accepted and then refused with its append, a row
//! deleted since) only costs probes.

use super::rows::{Kind, Rows, needs};
use crate::error::StoreError;

/// Bounds of the item and turn ids the thread's rows can hold: `None`
/// while not read yet.
#[derive(Debug, Default)]
pub(crate) struct FreshIds {
    items: Option<Bound>,
    turns: Option<Bound>,
}

/// An id at least as great as every id of a kind the thread's rows hold
/// (`None`: they hold none).
#[derive(Debug)]
struct Bound {
    max: Option<String>,
    /// Read from the thread's own rows (not a cheaper, looser bound).
    own: bool,
}

impl Bound {
    fn above(&self, id: &str) -> bool {
        self.max.as_deref().is_none_or(|max| id > max)
    }
}

impl FreshIds {
    /// The bounds of a thread created in this batch: it has no rows.
    pub(crate) fn empty() -> Self {
        let none = || {
            Some(Bound {
                max: None,
                own: true,
            })
        };
        FreshIds {
            items: none(),
            turns: none(),
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
        let bound = match bound {
            Some(bound) => bound,
            None => bound.insert(Bound {
                max: needs(rows)?.id_bound(thread_id, kind)?,
                own: false,
            }),
        };
        if !bound.above(id) && !bound.own {
            // Maybe above the thread's own ids: read them, once. What the
            // state accepted since the loose bound and has not committed
            // its reducer still holds, which catches a duplicate of it.
            bound.max = needs(rows)?.max_id(thread_id, kind)?;
            bound.own = true;
        }
        let fresh = bound.above(id);
        if fresh {
            bound.max = Some(id.to_owned());
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

    /// Rows whose every thread's greatest id is `loose` and this thread's
    /// `own`, counting the reads of the thread's own.
    struct TwoBounds {
        loose: &'static str,
        own: &'static str,
        own_reads: std::cell::Cell<usize>,
    }

    impl Rows for TwoBounds {
        fn thread(&self, _: &str) -> Result<Option<crate::types::ThreadRecord>, StoreError> {
            unreachable!()
        }
        fn items(&self, _: &str, _: bool) -> Result<Vec<spool_core::ItemRecord>, StoreError> {
            unreachable!()
        }
        fn turns(&self, _: &str, _: bool) -> Result<Vec<spool_core::TurnRecord>, StoreError> {
            unreachable!()
        }
        fn item(&self, _: &str, _: &str) -> Result<Option<spool_core::ItemRecord>, StoreError> {
            unreachable!()
        }
        fn status(&self, _: &str, _: Kind, _: &str) -> Result<Option<String>, StoreError> {
            unreachable!()
        }
        fn max_id(&self, _: &str, _: Kind) -> Result<Option<String>, StoreError> {
            self.own_reads.set(self.own_reads.get() + 1);
            Ok(Some(self.own.to_owned()))
        }
        fn id_bound(&self, _: &str, _: Kind) -> Result<Option<String>, StoreError> {
            Ok(Some(self.loose.to_owned()))
        }
        fn reserved_upto(&self, _: &str) -> Result<u64, StoreError> {
            unreachable!()
        }
    }

    #[test]
    fn a_loose_bound_is_read_first_and_the_threads_own_only_when_it_is_not_enough() {
        let rows = TwoBounds {
            loose: "m",
            own: "f",
            own_reads: std::cell::Cell::new(0),
        };
        let mut ids = FreshIds::default();
        let mut start = |id| ids.start(Some(&rows), "t", Kind::Item, id).unwrap();
        // Above every thread's ids: fresh without reading the thread's own.
        assert!(start("n"));
        assert_eq!(rows.own_reads.get(), 0);

        let mut ids = FreshIds::default();
        let mut start = |id| ids.start(Some(&rows), "t", Kind::Item, id).unwrap();
        // Below another thread's id but above this thread's own: fresh,
        // once the thread's own are read.
        assert!(start("g"));
        assert!(!start("a"));
        assert!(!start("g"));
        assert!(start("h"));
        assert_eq!(
            rows.own_reads.get(),
            1,
            "the thread's own ids are read once"
        );
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
