//! The reducer's refusals and its lifecycle rules, one case each.

use spool_core::ThreadReducer;
use spool_core::reducer::{Change, ReduceError};
use spool_protocol::*;

const T: &str = "thread-1";

struct Log {
    seq: u64,
    events: Vec<ThreadEvent>,
}

impl Log {
    fn new() -> Self {
        Log {
            seq: 0,
            events: Vec::new(),
        }
    }
    fn push(&mut self, payload: ServerNotification) -> ThreadEvent {
        self.seq += 1;
        let e = ThreadEvent {
            thread_id: T.into(),
            seq: self.seq,
            at_ms: 1_700_000_000_000 + self.seq as i64,
            payload,
        };
        self.events.push(e.clone());
        e
    }
}

fn turn(id: &str, status: TurnStatus) -> Turn {
    Turn {
        items_view: Default::default(),
        id: id.into(),
        items: vec![],
        status,
        error: None,
        started_at: None,
        completed_at: None,
        duration_ms: None,
        token_usage: None,
    }
}

fn turn_started(id: &str) -> ServerNotification {
    ServerNotification::TurnStarted(TurnStartedNotification {
        thread_id: T.into(),
        turn: turn(id, TurnStatus::InProgress),
    })
}

fn turn_completed(id: &str, status: TurnStatus) -> ServerNotification {
    ServerNotification::TurnCompleted(TurnCompletedNotification {
        thread_id: T.into(),
        turn: turn(id, status),
    })
}

fn message(id: &str, text: &str) -> ThreadItem {
    ThreadItem::AgentMessage {
        delivery: Default::default(),
        memory_citation: Default::default(),
        questions: Default::default(),
        id: id.into(),
        text: text.into(),
        phase: None,
    }
}

fn started(turn: &str, item: ThreadItem) -> ServerNotification {
    ServerNotification::ItemStarted(ItemStartedNotification {
        started_at_ms: Default::default(),
        item,
        thread_id: T.into(),
        turn_id: turn.into(),
        envelope: None,
    })
}

fn completed(turn: &str, item: ThreadItem) -> ServerNotification {
    ServerNotification::ItemCompleted(ItemCompletedNotification {
        completed_at_ms: Default::default(),
        item,
        thread_id: T.into(),
        turn_id: turn.into(),
        envelope: None,
    })
}

fn delta(turn: &str, item: &str, text: &str) -> ServerNotification {
    ServerNotification::AgentMessageDelta(TextDeltaNotification {
        thread_id: T.into(),
        turn_id: turn.into(),
        item_id: item.into(),
        delta: text.into(),
    })
}

/// A reducer that has seen turn "u1" start and message "m1" stream "Hel".
fn streaming() -> (ThreadReducer, Log) {
    let mut r = ThreadReducer::new(T);
    let mut log = Log::new();
    r.apply(&log.push(turn_started("u1"))).unwrap();
    r.apply(&log.push(started("u1", message("m1", ""))))
        .unwrap();
    r.apply(&log.push(delta("u1", "m1", "Hel"))).unwrap();
    (r, log)
}

#[test]
fn deltas_accumulate_and_completion_wins() {
    let (mut r, mut log) = streaming();
    r.apply(&log.push(delta("u1", "m1", "lo"))).unwrap();
    assert_eq!(r.item("m1").unwrap().item, message("m1", "Hello"));
    assert_eq!(
        r.item("m1").unwrap().envelope.status,
        ItemStatus::InProgress
    );
    let change = r
        .apply(&log.push(completed("u1", message("m1", "Hello, world"))))
        .unwrap();
    assert_eq!(change, Change::Item(0));
    let rec = r.item("m1").unwrap();
    assert_eq!(rec.item, message("m1", "Hello, world"));
    assert_eq!(rec.envelope.status, ItemStatus::Completed);
    assert_eq!(rec.seq, 5);
    assert_eq!(rec.ordinal, 2);
}

#[test]
fn delta_for_unknown_item_is_refused() {
    let (mut r, mut log) = streaming();
    let before = r.clone();
    let err = r.apply(&log.push(delta("u1", "nope", "x"))).unwrap_err();
    assert!(matches!(err, ReduceError::UnknownItem { ref item_id, .. } if item_id == "nope"));
    assert_eq!(r, before, "a refused event changes nothing");
}

#[test]
fn delta_after_completion_is_refused() {
    let (mut r, mut log) = streaming();
    r.apply(&log.push(completed("u1", message("m1", "Hel"))))
        .unwrap();
    let before = r.clone();
    let err = r.apply(&log.push(delta("u1", "m1", "x"))).unwrap_err();
    assert!(matches!(
        err,
        ReduceError::ItemTerminal {
            status: ItemStatus::Completed,
            ..
        }
    ));
    assert_eq!(r, before);
}

#[test]
fn second_completion_is_refused() {
    let (mut r, mut log) = streaming();
    r.apply(&log.push(completed("u1", message("m1", "a"))))
        .unwrap();
    let err = r
        .apply(&log.push(completed("u1", message("m1", "b"))))
        .unwrap_err();
    assert!(matches!(err, ReduceError::ItemTerminal { .. }));
    assert_eq!(r.item("m1").unwrap().item, message("m1", "a"));
}

#[test]
fn restarting_a_terminal_item_is_refused() {
    let (mut r, mut log) = streaming();
    r.apply(&log.push(completed("u1", message("m1", "a"))))
        .unwrap();
    let err = r
        .apply(&log.push(started("u1", message("m1", ""))))
        .unwrap_err();
    assert!(matches!(err, ReduceError::DuplicateItem { .. }));
}

#[test]
fn delta_of_the_wrong_kind_is_refused() {
    let (mut r, mut log) = streaming();
    let plan_delta = ServerNotification::PlanDelta(TextDeltaNotification {
        thread_id: T.into(),
        turn_id: "u1".into(),
        item_id: "m1".into(),
        delta: "x".into(),
    });
    let err = r.apply(&log.push(plan_delta)).unwrap_err();
    assert!(matches!(
        err,
        ReduceError::DeltaKindMismatch {
            kind: ItemKind::AgentMessage,
            ..
        }
    ));
}

#[test]
fn completion_cannot_change_the_kind() {
    let (mut r, mut log) = streaming();
    let plan = ThreadItem::Plan {
        id: "m1".into(),
        text: "x".into(),
    };
    let err = r.apply(&log.push(completed("u1", plan))).unwrap_err();
    assert!(matches!(err, ReduceError::KindChanged { .. }));
}

#[test]
fn seq_gaps_and_other_threads_are_refused() {
    let (mut r, log) = streaming();
    let mut gap = log.events.last().unwrap().clone();
    gap.seq += 2;
    assert!(matches!(
        r.apply(&gap),
        Err(ReduceError::SeqGap {
            last: 3,
            got: 5,
            ..
        })
    ));
    let mut replay = log.events.last().unwrap().clone();
    replay.seq = 3;
    assert!(matches!(r.apply(&replay), Err(ReduceError::SeqGap { .. })));
    let mut other = log.events.last().unwrap().clone();
    other.seq = 4;
    other.thread_id = "other".into();
    assert!(matches!(
        r.apply(&other),
        Err(ReduceError::WrongThread { .. })
    ));
}

#[test]
fn turn_cannot_complete_with_open_items_or_twice() {
    let (mut r, mut log) = streaming();
    let err = r
        .apply(&log.push(turn_completed("u1", TurnStatus::Completed)))
        .unwrap_err();
    assert!(matches!(err, ReduceError::TurnHasOpenItems { .. }));
    log.seq -= 1;
    r.apply(&log.push(completed("u1", message("m1", "x"))))
        .unwrap();
    r.apply(&log.push(turn_completed("u1", TurnStatus::Completed)))
        .unwrap();
    let err = r
        .apply(&log.push(turn_completed("u1", TurnStatus::Failed)))
        .unwrap_err();
    assert!(matches!(err, ReduceError::TurnAlreadyCompleted { .. }));
    log.seq -= 1;
    let err = r
        .apply(&log.push(started("u1", message("m2", ""))))
        .unwrap_err();
    assert!(matches!(err, ReduceError::TurnNotActive { .. }));
}

#[test]
fn item_needs_a_known_turn_and_one_turn_at_a_time() {
    let mut r = ThreadReducer::new(T);
    let mut log = Log::new();
    let err = r
        .apply(&log.push(started("nope", message("m", ""))))
        .unwrap_err();
    assert!(matches!(err, ReduceError::UnknownTurn { .. }));
    log.seq -= 1;
    r.apply(&log.push(turn_started("u1"))).unwrap();
    let err = r.apply(&log.push(turn_started("u2"))).unwrap_err();
    assert!(matches!(err, ReduceError::TurnAlreadyActive { .. }));
}

#[test]
fn closing_events_mark_open_items_incomplete_and_are_accepted() {
    let (mut r, mut log) = streaming();
    let cmd = ThreadItem::CommandExecution {
        plugin_id: Default::default(),
        script_path: Default::default(),
        source: Default::default(),
        id: "c1".into(),
        command: "ls".into(),
        cwd: "/".into(),
        process_id: None,
        status: CommandExecutionStatus::InProgress,
        command_actions: vec![],
        aggregated_output: None,
        exit_code: None,
        duration_ms: None,
    };
    r.apply(&log.push(started("u1", cmd))).unwrap();
    let closing = r.interrupt_all(9);
    assert_eq!(closing.len(), 3, "two items and the turn: {closing:#?}");
    for payload in closing {
        r.apply(&log.push(payload)).unwrap();
    }
    let m1 = r.item("m1").unwrap();
    assert_eq!(m1.envelope.status, ItemStatus::Incomplete);
    assert_eq!(m1.item, message("m1", "Hel"), "keeps what was committed");
    let c1 = r.item("c1").unwrap();
    assert!(matches!(
        c1.item,
        ThreadItem::CommandExecution {
            status: CommandExecutionStatus::Failed,
            ..
        }
    ));
    assert_eq!(r.turn("u1").unwrap().status, TurnStatus::Interrupted);
    assert!(r.interrupt_all(9).is_empty());
}

#[test]
fn reasoning_parts_grow_by_index() {
    let mut r = ThreadReducer::new(T);
    let mut log = Log::new();
    r.apply(&log.push(turn_started("u1"))).unwrap();
    let reasoning = ThreadItem::Reasoning {
        id: "r1".into(),
        summary: vec![],
        content: vec![],
    };
    r.apply(&log.push(started("u1", reasoning))).unwrap();
    let summary = |i: i64, d: &str| {
        ServerNotification::ReasoningSummaryTextDelta(ReasoningSummaryTextDeltaNotification {
            thread_id: T.into(),
            turn_id: "u1".into(),
            item_id: "r1".into(),
            delta: d.into(),
            summary_index: i,
        })
    };
    r.apply(&log.push(summary(0, "a"))).unwrap();
    r.apply(&log.push(ServerNotification::ReasoningSummaryPartAdded(
        ReasoningSummaryPartAddedNotification {
            thread_id: T.into(),
            turn_id: "u1".into(),
            item_id: "r1".into(),
            summary_index: 1,
        },
    )))
    .unwrap();
    r.apply(&log.push(summary(1, "b"))).unwrap();
    r.apply(&log.push(ServerNotification::ReasoningTextDelta(
        ReasoningTextDeltaNotification {
            thread_id: T.into(),
            turn_id: "u1".into(),
            item_id: "r1".into(),
            delta: "raw".into(),
            content_index: 0,
        },
    )))
    .unwrap();
    assert_eq!(
        r.item("r1").unwrap().item,
        ThreadItem::Reasoning {
            id: "r1".into(),
            summary: vec!["a".into(), "b".into()],
            content: vec!["raw".into()],
        }
    );
    let err = r.apply(&log.push(summary(-1, "x"))).unwrap_err();
    assert!(matches!(err, ReduceError::NegativeIndex { index: -1, .. }));
}

fn removed(turn: &str, item: &str) -> ServerNotification {
    ServerNotification::ItemRemoved(ItemRemovedNotification {
        thread_id: T.into(),
        turn_id: turn.into(),
        item_id: item.into(),
    })
}

#[test]
fn removing_an_item_takes_it_out_and_keeps_the_rest_addressable() {
    let (mut r, mut log) = streaming();
    r.apply(&log.push(completed("u1", message("m1", "a"))))
        .unwrap();
    r.apply(&log.push(started("u1", message("m2", ""))))
        .unwrap();
    r.apply(&log.push(completed("u1", message("m2", "b"))))
        .unwrap();
    r.apply(&log.push(started("u1", message("m3", ""))))
        .unwrap();
    // An open item cannot be removed.
    let err = r.apply(&log.push(removed("u1", "m3"))).unwrap_err();
    assert!(matches!(err, ReduceError::RemoveOpenItem { .. }));
    log.seq -= 1;
    let change = r.apply(&log.push(removed("u1", "m1"))).unwrap();
    assert_eq!(change, Change::Removed("m1".into()));
    assert!(r.item("m1").is_none());
    assert_eq!(r.items().len(), 2);
    // Indexes of the others still resolve after the shift.
    assert_eq!(r.item("m2").unwrap().item, message("m2", "b"));
    r.apply(&log.push(delta("u1", "m3", "c"))).unwrap();
    assert_eq!(r.item("m3").unwrap().item, message("m3", "c"));
    // Removing it twice, or in the wrong turn, is refused.
    let err = r.apply(&log.push(removed("u1", "m1"))).unwrap_err();
    assert!(matches!(err, ReduceError::UnknownItem { .. }));
    log.seq -= 1;
    r.apply(&log.push(completed("u1", message("m3", "c"))))
        .unwrap();
    let err = r.apply(&log.push(removed("other", "m3"))).unwrap_err();
    assert!(matches!(err, ReduceError::ItemTurnMismatch { .. }));
}

#[test]
fn clearing_removes_every_item_but_not_mid_turn() {
    let (mut r, mut log) = streaming();
    let clear = || {
        ServerNotification::ThreadCleared(ThreadClearedNotification {
            thread_id: T.into(),
        })
    };
    let err = r.apply(&log.push(clear())).unwrap_err();
    assert!(matches!(err, ReduceError::ClearWhileTurnActive { .. }));
    log.seq -= 1;
    r.apply(&log.push(completed("u1", message("m1", "a"))))
        .unwrap();
    r.apply(&log.push(turn_completed("u1", TurnStatus::Completed)))
        .unwrap();
    assert_eq!(r.apply(&log.push(clear())).unwrap(), Change::Cleared);
    assert!(r.items().is_empty());
    assert_eq!(r.turns().len(), 1, "turns stay; only items leave");
}
