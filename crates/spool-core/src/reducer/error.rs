//! Why the reducer refused an event.

use spool_protocol::{ItemKind, ItemStatus, TurnStatus};

/// A protocol violation: the runtime never emits one and the store refuses it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReduceError {
    #[error("event for thread {got} given to the reducer of thread {expected}")]
    WrongThread { expected: String, got: String },
    #[error("seq {got} does not follow {last} in thread {thread_id} (seqs are gap-free)")]
    SeqGap {
        thread_id: String,
        last: u64,
        got: u64,
    },
    #[error("item {item_id} was started twice")]
    DuplicateItem { item_id: String },
    #[error("item {item_id} was started in unknown turn {turn_id}")]
    UnknownTurn { item_id: String, turn_id: String },
    #[error("turn {turn_id} is {status:?}; no item can start or change in it")]
    TurnNotActive { turn_id: String, status: TurnStatus },
    #[error("an item started with terminal status {status:?}: {item_id}")]
    StartedTerminal { item_id: String, status: ItemStatus },
    #[error("{method} for unknown item {item_id}")]
    UnknownItem {
        method: &'static str,
        item_id: String,
    },
    #[error(
        "{method} for item {item_id}, which is already {status:?} (terminal states are immutable)"
    )]
    ItemTerminal {
        method: &'static str,
        item_id: String,
        status: ItemStatus,
    },
    #[error("{method} does not apply to item {item_id} of kind {kind:?}")]
    DeltaKindMismatch {
        method: &'static str,
        item_id: String,
        kind: ItemKind,
    },
    #[error("item {item_id} started as {started:?} but completed as {completed:?}")]
    KindChanged {
        item_id: String,
        started: ItemKind,
        completed: ItemKind,
    },
    #[error("item/completed for {item_id} carries non-terminal status inProgress")]
    CompletedInProgress { item_id: String },
    #[error("turn {turn_id} was started twice")]
    DuplicateTurn { turn_id: String },
    #[error("{method} for unknown turn {turn_id}")]
    UnknownTurnEvent {
        method: &'static str,
        turn_id: String,
    },
    #[error("turn {turn_id} completed twice (it is already {status:?})")]
    TurnAlreadyCompleted { turn_id: String, status: TurnStatus },
    #[error("turn/completed for {turn_id} carries non-terminal status inProgress")]
    TurnCompletedInProgress { turn_id: String },
    #[error("turn {turn_id} completed while its item {item_id} is still in progress")]
    TurnHasOpenItems { turn_id: String, item_id: String },
    #[error("turn {turn_id} started while turn {active} is still in progress")]
    TurnAlreadyActive { turn_id: String, active: String },
    #[error("item {item_id} is still in progress and cannot be removed")]
    RemoveOpenItem { item_id: String },
    #[error("item/removed names turn {given} but item {item_id} belongs to turn {actual}")]
    ItemTurnMismatch {
        item_id: String,
        given: String,
        actual: String,
    },
    #[error("thread/cleared while turn {turn_id} is in progress")]
    ClearWhileTurnActive { turn_id: String },
    #[error(
        "{method} for item {item_id} applied as born complete, but it is not a completion with an envelope"
    )]
    NotBornComplete {
        method: &'static str,
        item_id: String,
    },
    #[error("negative index {index} in {method} for item {item_id}")]
    NegativeIndex {
        method: &'static str,
        item_id: String,
        index: i64,
    },
}
