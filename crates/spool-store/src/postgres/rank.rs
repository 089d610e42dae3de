//! Reading what the writer must know to rank a commit's new turns itself
//! (`thread_state/ranks.rs`, shared with SQLite's writer).

use super::query::{CachedClient, Query};
use crate::error::StoreError;
use crate::thread_state::ranks::{self, NEWEST_TURN, NewRanks};
use crate::thread_state::{RankTail, ThreadState};

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
    if !ranks::may_rank(state, touched_from) {
        return Ok(None);
    }
    if state.rank_tail == RankTail::Unknown {
        state.rank_tail = match q.opt_row(NEWEST_TURN[0], &[&thread_id]).await? {
            Some(row) => RankTail::Turn {
                ordinal: row.try_get(0)?,
                rank: row.try_get(1)?,
            },
            None => RankTail::Empty,
        };
    }
    Ok(ranks::new_ranks(state, touched_from))
}
