//! Keeping the turns' `view_rank` true (a column of a turn's row in
//! `items`): for each turn, how many turns up to and
//! including it have an item in the model's view (`items.llm = 1`).
//!
//! A model view that stops reading at its budget must still say how many
//! turns it left out; with the ranks that is a difference of two ranks
//! (see `llm_read.rs`) instead of a scan of the whole thread.
//!
//! A batch changes the ranks only from the oldest turn it touched: a turn
//! it started or completed, or a turn of an item it wrote or deleted. Items
//! start in the turn in progress, which is the newest, so a batch of
//! appends re-ranks one or two turns; removing an old item re-ranks every
//! turn after it, and `thread/cleared` zeroes them all (every item is
//! gone). A batch that only adds turns after the newest committed one is
//! ranked by the writer itself instead (`thread_state/ranks.rs`); this is
//! for the rest.

use rusqlite::{Connection, OptionalExtension};

use crate::error::StoreError;
use crate::sqlite::codec::sql_int;
use crate::sqlite::keys;

/// The turns of one thread whose view ranks a batch may have changed
/// (`thread_state::ranks::touched`).
#[derive(Debug, Default)]
pub(super) struct TouchedTurns {
    /// The smallest ordinal of a touched turn whose ordinal is known.
    pub(super) min_ordinal: Option<u64>,
    /// Touched turns known by id only (the reducer no longer holds them).
    pub(super) turn_ids: Vec<String>,
    /// Every item of the thread was deleted first.
    pub(super) cleared: bool,
}

impl TouchedTurns {
    /// Whether the batch touched no turn at all.
    pub(super) fn is_empty(&self) -> bool {
        self.min_ordinal.is_none() && self.turn_ids.is_empty() && !self.cleared
    }
}

// A thread's turns are rows of `items`, each under its ordinal among the
// thread's items (`keys.rs`).
const ZERO_RANKS: &str = concat!(
    "UPDATE items SET view_rank = 0 WHERE ",
    keys::of_thread!(),
    " AND is_turn = 1 AND view_rank != 0"
);
const TURN_ORDINAL: &str =
    "SELECT ordinal FROM items WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 1";
const RANK_BEFORE: &str = concat!(
    "SELECT view_rank FROM items WHERE pos >= ",
    keys::thread_lo!(),
    " AND pos < ",
    keys::thread_lo!(),
    " + min(?2, ",
    keys::seq_span!(),
    ") AND is_turn = 1 ORDER BY pos DESC LIMIT 1"
);
const TURNS_FROM: &str = concat!(
    "SELECT ordinal, turn_id, view_rank FROM items WHERE pos >= ",
    keys::thread_lo!(),
    " + ?2 AND pos < ",
    keys::thread_hi!(),
    " AND is_turn = 1 ORDER BY pos"
);
/// Items of a turn lie between its start and the next turn's: one turn
/// runs at a time.
const TURN_IN_VIEW: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM items WHERE pos > ",
    keys::thread_lo!(),
    " + ?2 AND pos < ",
    keys::thread_lo!(),
    " + min(?3, ",
    keys::seq_span!(),
    ") AND is_turn = 0 AND llm = 1)"
);
const SET_RANK: &str =
    "UPDATE items SET view_rank = ?3 WHERE item_id = ?2 AND thread_id = ?1 AND is_turn = 1";

/// Re-ranks the turns from the oldest one touched, inside the batch's
/// transaction and after its item rows are written.
pub(super) fn update_view_ranks(
    conn: &Connection,
    thread_id: &str,
    touched: TouchedTurns,
) -> Result<(), StoreError> {
    if touched.cleared {
        conn.prepare_cached(ZERO_RANKS)?.execute((thread_id,))?;
    }
    let mut from = touched.min_ordinal.map(sql_int);
    let mut turn_ordinal = conn.prepare_cached(TURN_ORDINAL)?;
    for turn_id in &touched.turn_ids {
        let ordinal: Option<i64> = turn_ordinal
            .query_row((thread_id, turn_id), |row| row.get(0))
            .optional()?;
        if let Some(ordinal) = ordinal {
            from = Some(from.map_or(ordinal, |from| from.min(ordinal)));
        }
    }
    let Some(from) = from else {
        return Ok(());
    };
    let mut rank: i64 = conn
        .prepare_cached(RANK_BEFORE)?
        .query_row((thread_id, from), |row| row.get(0))
        .optional()?
        .unwrap_or(0);
    let turns = conn
        .prepare_cached(TURNS_FROM)?
        .query_map((thread_id, from), |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut in_view = conn.prepare_cached(TURN_IN_VIEW)?;
    let mut set_rank = conn.prepare_cached(SET_RANK)?;
    for (index, (ordinal, turn_id, stored)) in turns.iter().enumerate() {
        let next = turns.get(index + 1).map_or(i64::MAX, |(next, _, _)| *next);
        let has_item: bool = in_view.query_row((thread_id, ordinal, next), |row| row.get(0))?;
        rank += i64::from(has_item);
        if rank != *stored {
            set_rank.execute((thread_id, turn_id, rank))?;
        }
    }
    Ok(())
}
