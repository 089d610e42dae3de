//! View ranks the writer computes itself, for turns newer than every
//! committed one.
//!
//! `turns.view_rank` is, for each turn, how many turns up to and including
//! it have an item in the model's view (`batch.rs`, `UPDATE_VIEW_RANKS`).
//! Re-ranking in SQL costs a statement per thread per commit, about a
//! fifth of PostgreSQL's time when many threads append single items. Yet
//! the common commit only adds turns after the newest committed one: those
//! turns and every item in them are in the writer's memory, having been
//! appended since, and their ranks follow from the newest committed turn's
//! rank alone. The writer then writes the ranks with the turn rows, and no
//! re-ranking statement runs.
//!
//! It does so only when that is certain: nothing was removed or cleared,
//! every turn the commit touches was started by this commit and is newer
//! than the newest committed turn (whose ordinal and rank it knows,
//! [`RankTail`], read once after a load or a commit it did not rank, and
//! only for a commit that starts every turn it touches), and every such
//! turn is in its memory and written by this commit. Otherwise the statement re-ranks, as before,
//! and what the writer knows of the newest turn is forgotten until read
//! again.

use spool_core::llm::in_view;

use super::query::{CachedClient, Query};
use crate::error::StoreError;
use crate::thread_state::{RankTail, ThreadState};

/// The newest committed turn of a thread.
const NEWEST_TURN: &str =
    "SELECT ordinal, view_rank FROM turns WHERE thread_id = $1 ORDER BY ordinal DESC LIMIT 1";

/// The ranks of a commit's new turns, by their index in the reducer, and
/// what the newest committed turn is once the commit is.
#[derive(Debug, Default)]
pub(super) struct NewRanks {
    pub(super) ranks: Vec<(usize, i64)>,
    pub(super) tail: Option<RankTail>,
}

impl NewRanks {
    /// The rank of the reducer's turn `index`, if this computed it.
    pub(super) fn of(&self, index: usize) -> Option<i64> {
        self.ranks
            .iter()
            .find(|(turn, _)| *turn == index)
            .map(|&(_, rank)| rank)
    }
}

/// The ranks of `state`'s pending turns, when they are all newer than the
/// newest committed turn (`touched_from`, the smallest ordinal the commit
/// touches); `None` when the statement must re-rank. Reads the newest
/// committed turn when the state does not know it.
pub(super) async fn new_ranks(
    q: &CachedClient,
    thread_id: &str,
    state: &mut ThreadState,
    touched_from: i64,
) -> Result<Option<NewRanks>, StoreError> {
    let dirty = &state.pending.dirty;
    if dirty.cleared || !dirty.removed.is_empty() {
        return Ok(None);
    }
    // A turn's ordinal is the seq of its `turn/started`: a touched turn
    // older than this commit's first event is a committed one (a turn
    // streaming across commits), and the statement must rank. Known before
    // reading anything, so such a commit costs no read.
    let first_seq = state.pending.events.first().map(|event| event.seq);
    if first_seq.is_none_or(|first| touched_from < crate::codec::sql_int(first)) {
        return Ok(None);
    }
    if state.rank_tail == RankTail::Unknown {
        state.rank_tail = match q.opt_row(NEWEST_TURN, &[&thread_id]).await? {
            Some(row) => RankTail::Turn {
                ordinal: row.try_get(0)?,
                rank: row.try_get(1)?,
            },
            None => RankTail::Empty,
        };
    }
    let (after, mut rank) = match state.rank_tail {
        RankTail::Turn { ordinal, rank } => (ordinal, rank),
        RankTail::Empty => (i64::MIN, 0),
        RankTail::Unknown => return Ok(None),
    };
    if touched_from <= after {
        return Ok(None);
    }
    let turns = state.reducer.turns();
    let mut new: Vec<usize> = (0..turns.len())
        .filter(|&index| crate::codec::sql_int(turns[index].ordinal) > after)
        .collect();
    new.sort_unstable_by_key(|&index| turns[index].ordinal);
    // Every newer turn is this commit's own: its row is inserted now.
    if new.iter().any(|index| !dirty.turns.contains(index)) {
        return Ok(None);
    }
    let mut ranks = Vec::with_capacity(new.len());
    for (position, &index) in new.iter().enumerate() {
        let start = turns[index].ordinal;
        let end = new
            .get(position + 1)
            .map_or(u64::MAX, |&next| turns[next].ordinal);
        // Items of a turn lie between its start and the next turn's, as
        // the statement reads them.
        let in_view_item = state
            .reducer
            .items()
            .iter()
            .any(|item| item.ordinal > start && item.ordinal < end && in_view(item));
        rank += i64::from(in_view_item);
        ranks.push((index, rank));
    }
    let tail = new.last().map(|&index| RankTail::Turn {
        ordinal: crate::codec::sql_int(turns[index].ordinal),
        rank,
    });
    Ok(Some(NewRanks { ranks, tail }))
}
