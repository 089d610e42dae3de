//! What a whole-thread operation logs, whatever the backend: archiving,
//! reverting the latest turns, forking into a new thread.
//!
//! Each backend runs these in a transaction of its own, after committing
//! what is pending, so the check (no turn in progress, which items a turn
//! holds) and the events that depend on it are one atomic step; it then
//! writes the state's pending rows as it writes a batch. Nothing is
//! rewritten:
//!
//! - archiving logs `thread/archived` (and the status `notLoaded`);
//!   unarchiving logs `thread/unarchived`;
//! - a revert logs `item/removed` for every item of the reverted turns,
//!   all or nothing, then `thread/reverted`; the log keeps their history,
//!   the projections drop them;
//! - a fork creates the new thread and logs, in its own log, a copy of
//!   each finished turn of the source: `turn/started`, each item as
//!   `item/started` + `item/completed`, `turn/completed`. The source is
//!   only read.

use spool_core::{ItemRecord, ReduceError, TurnRecord};
use spool_protocol::{
    ItemCompletedNotification, ItemRemovedNotification, ItemStartedNotification, ItemStatus,
    ServerNotification, ThreadArchivedNotification, ThreadEvent, ThreadRevertedNotification,
    ThreadStatus, ThreadStatusChangedNotification, ThreadUnarchivedNotification, Turn,
    TurnCompletedNotification, TurnStartedNotification, TurnStatus,
};

use super::ThreadState;
use super::prepare::{now_ms, prepare_append};
use super::rows::Rows;
use crate::error::StoreError;
use crate::types::Appended;

/// Appends `notifications` to a thread's state (fresh: loaded in the
/// operation's transaction) and returns the events to log; the caller
/// writes the state's pending rows in that transaction.
pub(crate) fn stage(
    rows: &dyn Rows,
    state: &mut ThreadState,
    thread_id: &str,
    notifications: Vec<ServerNotification>,
) -> Result<Vec<ThreadEvent>, StoreError> {
    let incoming = prepare_append(thread_id, notifications)?;
    let accepted = state
        .append(Some(rows), thread_id, incoming, now_ms(), true)
        .map_err(|refusal| refusal.error)?;
    Ok(accepted
        .appended
        .into_iter()
        .filter_map(|appended| match appended {
            Appended::Logged(event) => Some(event),
            Appended::Transient(_) => None,
        })
        .collect())
}

/// What closes the turns a process that is gone left in progress: each
/// open item `incomplete`, each turn `interrupted`, except turns with a
/// saved run state (`resumable`: paused on a person, not abandoned; the
/// runtime resumes them). `reducer` needs to hold the open turns and items
/// only.
pub(crate) fn interrupt_abandoned(
    reducer: &spool_core::ThreadReducer,
    resumable: &std::collections::HashSet<String>,
    at_ms: i64,
) -> Vec<ServerNotification> {
    reducer
        .turns()
        .iter()
        .filter(|turn| !turn.status.is_terminal() && !resumable.contains(&turn.id))
        .flat_map(|turn| reducer.closing_events(&turn.id, TurnStatus::Interrupted, None, at_ms))
        .collect()
}

/// What archiving (or unarchiving) the thread logs; `None` when it already
/// is in that state.
pub(crate) fn archive(
    rows: &dyn Rows,
    thread_id: &str,
    archived: bool,
) -> Result<Option<Vec<ServerNotification>>, StoreError> {
    let Some(thread) = rows.thread(thread_id)? else {
        return Err(StoreError::UnknownThread(thread_id.to_owned()));
    };
    if thread.archived == archived {
        return Ok(None);
    }
    let thread_id = thread_id.to_owned();
    Ok(Some(if archived {
        // An archived thread is put away: not loaded, as Codex says it.
        vec![
            ServerNotification::ThreadArchived(ThreadArchivedNotification {
                thread_id: thread_id.clone(),
            }),
            ServerNotification::ThreadStatusChanged(ThreadStatusChangedNotification {
                thread_id,
                status: ThreadStatus::NotLoaded,
            }),
        ]
    } else {
        vec![ServerNotification::ThreadUnarchived(
            ThreadUnarchivedNotification { thread_id },
        )]
    }))
}

/// A refusal of a whole-thread operation, in the reducer's words.
pub(crate) fn refused(method: &'static str, source: ReduceError) -> StoreError {
    StoreError::Refused {
        index: 0,
        method,
        source,
    }
}

/// What reverting `first_turn_id` and every later turn logs (nothing when
/// those turns hold no items); refused while a turn is in progress.
pub(crate) fn revert(
    rows: &dyn Rows,
    state: &ThreadState,
    thread_id: &str,
    first_turn_id: &str,
) -> Result<Vec<ServerNotification>, StoreError> {
    if let Some(active) = state.reducer.active_turn() {
        return Err(refused(
            "item/removed",
            ReduceError::ClearWhileTurnActive {
                turn_id: active.id.clone(),
            },
        ));
    }
    let turns = rows.turns(thread_id, false)?;
    let first = find_turn(&turns, first_turn_id, "item/removed")?.ordinal;
    let reverted: Vec<&str> = turns
        .iter()
        .filter(|turn| turn.ordinal >= first)
        .map(|turn| turn.id.as_str())
        .collect();
    let mut removals: Vec<ServerNotification> = rows
        .items(thread_id, false)?
        .into_iter()
        .filter(|record| reverted.contains(&record.turn_id.as_str()))
        .map(|record| {
            ServerNotification::ItemRemoved(ItemRemovedNotification {
                thread_id: thread_id.to_owned(),
                turn_id: record.turn_id.clone(),
                item_id: record.item.id().to_owned(),
            })
        })
        .collect();
    if removals.is_empty() {
        return Ok(Vec::new());
    }
    removals.push(ServerNotification::ThreadReverted(
        ThreadRevertedNotification {
            thread_id: thread_id.to_owned(),
        },
    ));
    Ok(removals)
}

/// What the new thread `thread_id` logs to hold a copy of `source_id`'s
/// finished turns before `before_turn` (see the module docs). Checks that
/// the source exists and the new thread does not.
pub(crate) fn fork_copies(
    rows: &dyn Rows,
    thread_id: &str,
    source_id: &str,
    before_turn: Option<&str>,
) -> Result<Vec<ServerNotification>, StoreError> {
    if rows.thread(source_id)?.is_none() {
        return Err(StoreError::UnknownThread(source_id.to_owned()));
    }
    if rows.thread(thread_id)?.is_some() {
        return Err(StoreError::ThreadExists(thread_id.to_owned()));
    }
    let turns = rows.turns(source_id, false)?;
    let end = match before_turn {
        Some(turn_id) => find_turn(&turns, turn_id, "turn/started")?.ordinal,
        None => u64::MAX,
    };
    let items = rows.items(source_id, false)?;
    let mut copies = Vec::new();
    for turn in turns.iter().filter(|turn| turn.ordinal < end) {
        // A turn in progress is not history yet, and neither is what follows.
        if !turn.status.is_terminal() {
            break;
        }
        let of_turn: Vec<&ItemRecord> = items.iter().filter(|r| r.turn_id == turn.id).collect();
        // A turn whose items were all removed (reverted) is no history.
        if of_turn.is_empty() {
            continue;
        }
        copy_turn(thread_id, turn, &of_turn, &mut copies);
    }
    Ok(copies)
}

fn find_turn<'a>(
    turns: &'a [TurnRecord],
    turn_id: &str,
    method: &'static str,
) -> Result<&'a TurnRecord, StoreError> {
    turns.iter().find(|turn| turn.id == turn_id).ok_or_else(|| {
        refused(
            method,
            ReduceError::UnknownTurnEvent {
                method,
                turn_id: turn_id.to_owned(),
            },
        )
    })
}

/// The events of `turn` with its finished items, as a new thread logs them.
fn copy_turn(
    thread_id: &str,
    turn: &TurnRecord,
    items: &[&ItemRecord],
    out: &mut Vec<ServerNotification>,
) {
    let mut started = Turn::new(turn.id.clone(), TurnStatus::InProgress);
    started.started_at = turn.started_at;
    out.push(ServerNotification::TurnStarted(TurnStartedNotification {
        thread_id: thread_id.to_owned(),
        turn: started,
    }));
    for record in items {
        let mut open = record.envelope.clone();
        open.status = ItemStatus::InProgress;
        open.completed_at_ms = None;
        out.push(ServerNotification::ItemStarted(ItemStartedNotification {
            item: record.item.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn.id.clone(),
            started_at_ms: record.envelope.started_at_ms,
            envelope: Some(open),
        }));
        let mut done = record.envelope.clone();
        if !done.status.is_terminal() {
            done.status = ItemStatus::Incomplete;
        }
        out.push(ServerNotification::ItemCompleted(
            ItemCompletedNotification {
                item: record.item.clone(),
                thread_id: thread_id.to_owned(),
                turn_id: turn.id.clone(),
                completed_at_ms: done.completed_at_ms.unwrap_or_default(),
                envelope: Some(done),
            },
        ));
    }
    out.push(ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: thread_id.to_owned(),
            turn: turn.to_turn(Vec::new()),
        },
    ));
}
