//! View ranks a writer computes itself, for turns newer than every
//! committed one; both backends' writers use it.
//!
//! A turn's stored `view_rank` is, for each turn, how many turns up to and including
//! it have an item in the model's view. Re-ranking from the tables costs
//! statements per thread per commit: on PostgreSQL about a fifth of its
//! time when many threads append single items, on SQLite a seventh of the
//! writer's own time in one-item `add_items` calls. Yet the common commit
//! only adds turns after the newest committed one: those turns and every
//! item in them are in the writer's memory, having been appended since, and
//! their ranks follow from the newest committed turn's rank alone. The
//! writer then writes the ranks with the turn rows, and no re-ranking runs.
//!
//! It does so only when that is certain: nothing was removed or cleared,
//! every turn the commit touches was started by this commit and is newer
//! than the newest committed turn (whose ordinal and rank it knows,
//! [`RankTail`], read once after a load or a commit it did not rank, and
//! only for a commit that starts every turn it touches), and every such
//! turn is in its memory and written by this commit. Otherwise the tables
//! re-rank, as before, and what the writer knows of the newest turn is
//! forgotten until read again.

use spool_core::llm::in_view;

use super::pending::keeps_row;
use super::{RankTail, ThreadState};
use crate::codec::sql_int;

/// The newest committed turn of a thread (`$1`, or `?1` on SQLite, is its
/// id): what [`RankTail::Turn`] holds. On SQLite, turns are rows of
/// `items` among the thread's items (`sqlite/keys.rs`).
pub(crate) const NEWEST_TURN: [&str; 2] = [
    "SELECT ordinal, view_rank FROM turns WHERE thread_id = $1 ORDER BY ordinal DESC LIMIT 1",
    concat!(
        "SELECT ordinal, view_rank FROM items WHERE ",
        crate::sqlite::keys::of_thread!(),
        " AND is_turn = 1 ORDER BY pos DESC LIMIT 1"
    ),
];

/// The ranks of a commit's new turns, by their index in the reducer, and
/// what the newest committed turn is once the commit is.
#[derive(Debug, Default)]
pub(crate) struct NewRanks {
    pub(crate) ranks: Vec<(usize, i64)>,
    pub(crate) tail: Option<RankTail>,
}

impl NewRanks {
    /// The rank of the reducer's turn `index`, if this computed it.
    pub(crate) fn of(&self, index: usize) -> Option<i64> {
        self.ranks
            .iter()
            .find(|(turn, _)| *turn == index)
            .map(|&(_, rank)| rank)
    }
}

/// The turns whose ranks a batch's pending changes may change: a turn it
/// writes, and the turn of every item it writes or removes; by ordinal
/// when the reducer holds the turn, by id otherwise (an older turn, which
/// only the tables know).
#[derive(Debug, Default)]
pub(crate) struct Touched<'a> {
    /// The smallest ordinal of a touched turn the reducer holds.
    pub(crate) min_ordinal: Option<u64>,
    /// Touched turns the reducer no longer holds.
    pub(crate) unknown_turns: Vec<&'a str>,
}

/// What `state`'s pending changes touch ([`Touched`]).
pub(crate) fn touched(state: &ThreadState) -> Touched<'_> {
    let mut touched = Touched::default();
    let mut touch = |ordinal: u64| {
        touched.min_ordinal = Some(touched.min_ordinal.map_or(ordinal, |min| min.min(ordinal)));
    };
    let dirty = &state.pending.dirty;
    let turns = state.reducer.turns();
    for &index in &dirty.turns {
        touch(turns[index].ordinal);
    }
    let first_seq = state.pending.first_seq();
    let items = state.reducer.items();
    let written = dirty
        .items
        .iter()
        .map(|&index| &items[index])
        .filter(|record| !keeps_row(record, first_seq))
        .map(|record| record.turn_id.as_str());
    let mut unknown = Vec::new();
    for turn_id in dirty
        .removed
        .iter()
        .map(|r| r.turn_id.as_str())
        .chain(written)
    {
        match state.reducer.turn(turn_id) {
            Some(turn) => touch(turn.ordinal),
            None => unknown.push(turn_id),
        }
    }
    unknown.sort_unstable();
    unknown.dedup();
    touched.unknown_turns = unknown;
    touched
}

/// Whether a commit whose oldest touched turn has ordinal `touched_from`
/// may be ranked in memory, as far as can be told without knowing the
/// newest committed turn: nothing removed or cleared, and every touched
/// turn started in this commit (a turn's ordinal is the seq of its
/// `turn/started`; one older than the commit's first event is a committed
/// turn, streaming across commits). Known before reading anything, so a
/// commit that fails it costs no read.
pub(crate) fn may_rank(state: &ThreadState, touched_from: i64) -> bool {
    let dirty = &state.pending.dirty;
    if dirty.cleared || !dirty.removed.is_empty() {
        return false;
    }
    let pending = &state.pending;
    !pending.events.is_empty() && touched_from >= sql_int(pending.first_seq())
}

/// The ranks of `state`'s pending turns, when [`may_rank`] holds, the
/// newest committed turn is known (`state.rank_tail`) and every touched
/// turn is newer than it; `None` when the tables must re-rank.
pub(crate) fn new_ranks(state: &ThreadState, touched_from: i64) -> Option<NewRanks> {
    let (after, mut rank) = match state.rank_tail {
        RankTail::Turn { ordinal, rank } => (ordinal, rank),
        RankTail::Empty => (i64::MIN, 0),
        RankTail::Unknown => return None,
    };
    if touched_from <= after {
        return None;
    }
    let turns = state.reducer.turns();
    let mut new: Vec<usize> = (0..turns.len())
        .filter(|&index| sql_int(turns[index].ordinal) > after)
        .collect();
    new.sort_unstable_by_key(|&index| turns[index].ordinal);
    // Every newer turn is this commit's own: its row is inserted now.
    let dirty = &state.pending.dirty;
    if new.iter().any(|index| !dirty.turns.contains(index)) {
        return None;
    }
    let mut ranks = Vec::with_capacity(new.len());
    for (position, &index) in new.iter().enumerate() {
        let start = turns[index].ordinal;
        let end = new
            .get(position + 1)
            .map_or(u64::MAX, |&next| turns[next].ordinal);
        // Items of a turn lie between its start and the next turn's, as
        // the tables' re-ranking reads them.
        let in_view_item = state
            .reducer
            .items()
            .iter()
            .any(|item| item.ordinal > start && item.ordinal < end && in_view(item));
        rank += i64::from(in_view_item);
        ranks.push((index, rank));
    }
    let tail = new.last().map(|&index| RankTail::Turn {
        ordinal: sql_int(turns[index].ordinal),
        rank,
    });
    Some(NewRanks { ranks, tail })
}
