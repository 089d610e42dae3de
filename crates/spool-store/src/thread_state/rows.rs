//! What a thread's state reads back from the committed tables, whatever
//! the backend.
//!
//! The writer's state of a thread keeps only what a later event can
//! legally touch (`mod.rs`); the rest it asks of the tables through this
//! trait, rarely: when a thread is loaded or rebuilt, when a start names an
//! id that may already be stored, when a refusal is refined, when an
//! `item/removed` names an item the state dropped. Each backend implements
//! it on its writer's connection, outside any transaction, so it sees what
//! is committed; what is pending is the state's own business.

use spool_core::{ItemRecord, TurnRecord};

use crate::error::StoreError;
use crate::types::ThreadRecord;

/// Which kind of id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Item,
    Turn,
}

/// Committed rows of one backend, for a thread's writer state.
pub(crate) trait Rows {
    /// The thread's record, `None` if it is not stored.
    fn thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError>;

    /// The thread's items (`open_only`: those not in a terminal state), in
    /// ordinal order.
    fn items(&self, thread_id: &str, open_only: bool) -> Result<Vec<ItemRecord>, StoreError>;

    /// The thread's turns (`open_only`: in progress), in ordinal order.
    fn turns(&self, thread_id: &str, open_only: bool) -> Result<Vec<TurnRecord>, StoreError>;

    /// One stored item.
    fn item(&self, thread_id: &str, item_id: &str) -> Result<Option<ItemRecord>, StoreError>;

    /// The stored status column of an item or turn, if it is stored.
    fn status(&self, thread_id: &str, kind: Kind, id: &str) -> Result<Option<String>, StoreError>;

    /// The greatest id of `kind` the thread's rows hold, compared byte by
    /// byte (as Rust compares strings); `None` when there are none.
    fn max_id(&self, thread_id: &str, kind: Kind) -> Result<Option<String>, StoreError>;

    /// An id at least as great as every id of `kind` the thread's rows
    /// hold (`None`: they hold none), cheaper to read than
    /// [`Rows::max_id`] where the backend has one: SQLite's id index leads
    /// with the id, so the greatest id of every item and turn of every
    /// thread is one seek to the index's end, where the thread's own is a
    /// scan of its rows. By default, the thread's own.
    fn id_bound(&self, thread_id: &str, kind: Kind) -> Result<Option<String>, StoreError> {
        self.max_id(thread_id, kind)
    }

    /// The committed top of the thread's seq reservation (`reserve.rs`);
    /// 0 when there is none.
    fn reserved_upto(&self, thread_id: &str) -> Result<u64, StoreError>;
}

/// The rows, for a check that reads them; `None` (a commit holds the
/// connection) is an error, which the writer's admission rule keeps from
/// happening.
pub(crate) fn needs(rows: Option<&dyn Rows>) -> Result<&dyn Rows, StoreError> {
    rows.ok_or(StoreError::WriterBusy)
}
