//! Property tests of the reducer over generated valid event sequences:
//! - reducing a log in one go equals reducing a prefix, storing the state
//!   as the projection would (JSON round trip), and reducing the rest;
//! - the completed item always wins over the deltas that preceded it;
//! - after completion, no delta or second completion is accepted;
//! - a completion applied as born complete is its start and it applied
//!   one after the other.

use proptest::prelude::*;
use spool_core::reducer::born::start_of;
use spool_core::{ItemRecord, ThreadReducer, TurnRecord};
use spool_protocol::*;

const T: &str = "thread-p";

/// Builds a valid log from a stream of random choices.
struct Gen<'a> {
    choices: &'a [u8],
    at: usize,
    words: &'a [String],
    seq: u64,
    events: Vec<ThreadEvent>,
    /// Final items as their completion events carried them.
    finals: Vec<ThreadItem>,
}

impl Gen<'_> {
    fn pick(&mut self, n: u8) -> u8 {
        let c = self.choices.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        c % n
    }
    fn word(&mut self) -> String {
        let i = self.pick(255) as usize;
        self.words[i % self.words.len()].clone()
    }
    fn push(&mut self, payload: ServerNotification) {
        self.seq += 1;
        self.events.push(ThreadEvent {
            thread_id: T.into(),
            seq: self.seq,
            at_ms: 1_000 * self.seq as i64,
            payload,
        });
    }

    fn turn(&mut self, turn_id: &str) {
        self.push(ServerNotification::TurnStarted(TurnStartedNotification {
            thread_id: T.into(),
            turn: turn(turn_id, TurnStatus::InProgress),
        }));
        let mut open: Vec<ThreadItem> = Vec::new();
        let mut next = 0;
        let budget = 4 + self.pick(30) as usize;
        for _ in 0..budget {
            match self.pick(4) {
                // start a new item
                0 if open.len() < 3 => {
                    next += 1;
                    let id = format!("{turn_id}-i{next}");
                    let item = match self.pick(4) {
                        0 => ThreadItem::AgentMessage {
                            delivery: Default::default(),
                            memory_citation: Default::default(),
                            questions: Default::default(),
                            id,
                            text: String::new(),
                            phase: None,
                        },
                        1 => ThreadItem::Plan {
                            id,
                            text: String::new(),
                        },
                        2 => ThreadItem::Reasoning {
                            id,
                            summary: vec![],
                            content: vec![],
                        },
                        _ => ThreadItem::CommandExecution {
                            plugin_id: Default::default(),
                            script_path: Default::default(),
                            source: Default::default(),
                            id,
                            command: "echo hi".into(),
                            cwd: "/tmp".into(),
                            process_id: None,
                            status: CommandExecutionStatus::InProgress,
                            command_actions: vec![],
                            aggregated_output: None,
                            exit_code: None,
                            duration_ms: None,
                        },
                    };
                    self.push(ServerNotification::ItemStarted(ItemStartedNotification {
                        started_at_ms: Default::default(),
                        item: item.clone(),
                        thread_id: T.into(),
                        turn_id: turn_id.into(),
                        envelope: None,
                    }));
                    open.push(item);
                }
                // complete an open item, sometimes with text that differs
                // from what its deltas built
                1 if !open.is_empty() => {
                    let i = self.pick(open.len() as u8) as usize;
                    let item = open.remove(i);
                    let final_item = self.finish(item);
                    self.finals.push(final_item.clone());
                    self.push(ServerNotification::ItemCompleted(
                        ItemCompletedNotification {
                            completed_at_ms: Default::default(),
                            item: final_item,
                            thread_id: T.into(),
                            turn_id: turn_id.into(),
                            envelope: None,
                        },
                    ));
                }
                // a delta on an open item
                _ if !open.is_empty() => {
                    let i = self.pick(open.len() as u8) as usize;
                    let delta = self.word();
                    let payload = self.delta_for(turn_id, &mut open[i], delta);
                    self.push(payload);
                }
                _ => {}
            }
        }
        for item in std::mem::take(&mut open) {
            let final_item = self.finish(item);
            self.finals.push(final_item.clone());
            self.push(ServerNotification::ItemCompleted(
                ItemCompletedNotification {
                    completed_at_ms: Default::default(),
                    item: final_item,
                    thread_id: T.into(),
                    turn_id: turn_id.into(),
                    envelope: None,
                },
            ));
        }
        self.push(ServerNotification::TurnCompleted(
            TurnCompletedNotification {
                thread_id: T.into(),
                turn: turn(turn_id, TurnStatus::Completed),
            },
        ));
    }

    /// A delta for `item`, also applied to the generator's copy of it.
    fn delta_for(
        &mut self,
        turn_id: &str,
        item: &mut ThreadItem,
        delta: String,
    ) -> ServerNotification {
        let text = |d: &str| TextDeltaNotification {
            thread_id: T.into(),
            turn_id: turn_id.into(),
            item_id: item.id().into(),
            delta: d.into(),
        };
        match item {
            ThreadItem::AgentMessage { .. } => ServerNotification::AgentMessageDelta(text(&delta)),
            ThreadItem::Plan { .. } => ServerNotification::PlanDelta(text(&delta)),
            ThreadItem::CommandExecution { .. } => {
                ServerNotification::CommandExecutionOutputDelta(text(&delta))
            }
            ThreadItem::Reasoning { id, .. } => {
                let index = self.pick(2) as i64;
                if self.pick(2) == 0 {
                    ServerNotification::ReasoningSummaryTextDelta(
                        ReasoningSummaryTextDeltaNotification {
                            thread_id: T.into(),
                            turn_id: turn_id.into(),
                            item_id: id.clone(),
                            delta,
                            summary_index: index,
                        },
                    )
                } else {
                    ServerNotification::ReasoningTextDelta(ReasoningTextDeltaNotification {
                        thread_id: T.into(),
                        turn_id: turn_id.into(),
                        item_id: id.clone(),
                        delta,
                        content_index: index,
                    })
                }
            }
            other => unreachable!("generator never starts {:?}", other.kind()),
        }
    }

    /// The completed form of an item: its text is a fresh word, so it
    /// differs from what the deltas accumulated.
    fn finish(&mut self, item: ThreadItem) -> ThreadItem {
        let word = format!("final:{}", self.word());
        match item {
            ThreadItem::AgentMessage { id, phase, .. } => ThreadItem::AgentMessage {
                delivery: Default::default(),
                memory_citation: Default::default(),
                questions: Default::default(),
                id,
                text: word,
                phase,
            },
            ThreadItem::Plan { id, .. } => ThreadItem::Plan { id, text: word },
            ThreadItem::Reasoning { id, .. } => ThreadItem::Reasoning {
                id,
                summary: vec![word],
                content: vec![],
            },
            ThreadItem::CommandExecution {
                id, command, cwd, ..
            } => ThreadItem::CommandExecution {
                plugin_id: Default::default(),
                script_path: Default::default(),
                source: Default::default(),
                id,
                command,
                cwd,
                process_id: None,
                status: CommandExecutionStatus::Completed,
                command_actions: vec![],
                aggregated_output: Some(word),
                exit_code: Some(0),
                duration_ms: Some(1),
            },
            other => unreachable!("generator never starts {:?}", other.kind()),
        }
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

struct Generated {
    events: Vec<ThreadEvent>,
    finals: Vec<ThreadItem>,
}

fn generate(choices: &[u8], words: &[String], turns: usize) -> Generated {
    let mut g = Gen {
        choices,
        at: 0,
        words,
        seq: 0,
        events: Vec::new(),
        finals: Vec::new(),
    };
    for t in 0..turns {
        g.turn(&format!("turn{t}"));
    }
    Generated {
        events: g.events,
        finals: g.finals,
    }
}

fn reduce(events: &[ThreadEvent]) -> ThreadReducer {
    let mut r = ThreadReducer::new(T);
    r.apply_all(events).expect("generated logs are valid");
    r
}

/// The state as the store's projection would hold it, read back.
fn through_projection(r: &ThreadReducer) -> ThreadReducer {
    let items: Vec<ItemRecord> =
        serde_json::from_str(&serde_json::to_string(r.items()).unwrap()).unwrap();
    let turns: Vec<TurnRecord> =
        serde_json::from_str(&serde_json::to_string(r.turns()).unwrap()).unwrap();
    ThreadReducer::from_parts(T, r.last_seq(), items, turns)
}

fn inputs() -> impl Strategy<Value = (Vec<u8>, Vec<String>, usize)> {
    (
        prop::collection::vec(any::<u8>(), 0..400),
        prop::collection::vec("[a-z é😀]{0,6}", 1..8),
        1usize..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reducing_in_one_go_equals_prefix_then_rest((choices, words, turns) in inputs(), split in any::<prop::sample::Index>()) {
        let g = generate(&choices, &words, turns);
        let whole = reduce(&g.events);
        let k = split.index(g.events.len() + 1);
        let prefix = reduce(&g.events[..k]);
        let mut resumed = through_projection(&prefix);
        resumed.apply_all(&g.events[k..]).expect("the rest applies after a prefix");
        prop_assert_eq!(resumed.items(), whole.items());
        prop_assert_eq!(resumed.turns(), whole.turns());
        prop_assert_eq!(resumed.last_seq(), whole.last_seq());
    }

    /// Forgetting the closed items and turns in place is building the
    /// reducer again from the open ones, indexes included, and both go on
    /// alike; what it forgets is handed back, in order.
    #[test]
    fn retain_open_equals_from_parts_of_the_open((choices, words, turns) in inputs(), split in any::<prop::sample::Index>()) {
        let g = generate(&choices, &words, turns);
        let k = split.index(g.events.len() + 1);
        let mut retained = reduce(&g.events[..k]);
        let open_items: Vec<ItemRecord> = retained.items().iter()
            .filter(|record| !record.envelope.status.is_terminal()).cloned().collect();
        let open_turns: Vec<TurnRecord> = retained.turns().iter()
            .filter(|turn| !turn.status.is_terminal()).cloned().collect();
        let closed_items: Vec<ItemRecord> = retained.items().iter()
            .filter(|record| record.envelope.status.is_terminal()).cloned().collect();
        let closed_turns: Vec<TurnRecord> = retained.turns().iter()
            .filter(|turn| turn.status.is_terminal()).cloned().collect();
        let mut rebuilt = ThreadReducer::from_parts(T, retained.last_seq(), open_items, open_turns);
        let closed = retained.retain_open();
        prop_assert_eq!(&retained, &rebuilt);
        prop_assert_eq!(closed.items, closed_items);
        prop_assert_eq!(closed.turns, closed_turns);
        let rest = &g.events[k..];
        prop_assert_eq!(retained.apply_all(rest).is_ok(), rebuilt.apply_all(rest).is_ok());
        prop_assert_eq!(retained, rebuilt);
    }

    #[test]
    fn completed_item_wins_over_deltas((choices, words, turns) in inputs()) {
        let g = generate(&choices, &words, turns);
        let r = reduce(&g.events);
        prop_assert_eq!(r.items().len(), g.finals.len());
        for final_item in &g.finals {
            let record = r.item(final_item.id()).expect("every generated item is kept");
            prop_assert_eq!(&record.item, final_item);
            prop_assert_eq!(record.envelope.status, ItemStatus::Completed);
        }
    }

    #[test]
    fn nothing_changes_a_completed_item((choices, words, turns) in inputs(), pick in any::<prop::sample::Index>()) {
        let g = generate(&choices, &words, turns);
        let mut r = reduce(&g.events);
        // Re-send a delta or a completion that targeted some item, now terminal.
        let targeted: Vec<&ThreadEvent> = g.events.iter()
            .filter(|e| matches!(e.payload, ServerNotification::ItemCompleted(_)) || e.payload.is_delta())
            .collect();
        prop_assume!(!targeted.is_empty());
        let mut again = targeted[pick.index(targeted.len())].clone();
        again.seq = r.last_seq() + 1;
        let before = r.clone();
        prop_assert!(r.apply(&again).is_err());
        prop_assert_eq!(r, before);
    }

    /// `apply_born` accepts what the start and the completion applied one
    /// after the other accept, refuses with the first refusal of the two,
    /// leaves the reducer as they do, and changes nothing when it refuses;
    /// `apply_born_owned` does exactly what `apply_born` does.
    #[test]
    fn apply_born_equals_start_then_completion(
        (choices, words, turns) in inputs(),
        split in any::<prop::sample::Index>(),
        born in born_choices(),
    ) {
        let g = generate(&choices, &words, turns);
        let k = split.index(g.events.len() + 1);
        let before = reduce(&g.events[..k]);
        let event = born.completion(&before);
        let mut one_step = before.clone();
        let outcome = one_step.apply_born(&event);
        // Taking the event instead of copying it changes nothing else, and
        // a refused event comes back as it was.
        let mut owned = before.clone();
        match (owned.apply_born_owned(Box::new(event.clone())), &outcome) {
            (Ok(change), Ok(expected)) => prop_assert_eq!(&change, expected),
            (Err((error, returned)), Err(expected)) => {
                prop_assert_eq!(&error, expected);
                prop_assert_eq!(&*returned, &event);
            }
            (got, expected) => {
                prop_assert!(false, "apply_born_owned gave {:?}, apply_born {:?}", got, expected);
            }
        }
        prop_assert_eq!(&owned, &one_step);

        let ServerNotification::ItemCompleted(completed) = &event.payload else {
            unreachable!("born_choices builds completions")
        };
        let Some(start) = start_of(completed) else {
            // No envelope: nothing implies a start.
            prop_assert!(outcome.is_err());
            prop_assert_eq!(one_step, before);
            return Ok(());
        };
        let mut two_steps = before.clone();
        let start = ThreadEvent {
            thread_id: event.thread_id.clone(),
            seq: event.seq.wrapping_sub(1),
            at_ms: event.at_ms,
            payload: ServerNotification::ItemStarted(start),
        };
        let expected = two_steps.apply(&start).and_then(|_| two_steps.apply(&event));
        match (outcome, expected) {
            (Ok(change), Ok(expected)) => {
                prop_assert_eq!(change, expected);
                prop_assert_eq!(&one_step, &two_steps);
                // And both go on alike.
                let rest = &g.events[k..];
                prop_assert_eq!(one_step.clone().apply_all(rest).is_ok(), two_steps.clone().apply_all(rest).is_ok());
            }
            (Err(error), Err(expected)) => {
                prop_assert_eq!(error, expected);
                prop_assert_eq!(one_step, before);
            }
            (outcome, expected) => {
                prop_assert!(false, "apply_born gave {:?}, the two steps {:?}", outcome, expected);
            }
        }
    }
}

/// How a born-complete completion is built against a reducer: which turn
/// and item it names, its status, times and seq.
#[derive(Debug, Clone)]
struct BornChoices {
    turn: u8,
    item: u8,
    status: u8,
    envelope_completed_at: bool,
    completed_at_ms: bool,
    provider_data: bool,
    no_envelope: bool,
    seq_offset: u8,
    other_thread: bool,
}

prop_compose! {
    fn born_choices()(
        turn in any::<u8>(),
        item in any::<u8>(),
        status in any::<u8>(),
        envelope_completed_at in any::<bool>(),
        completed_at_ms in any::<bool>(),
        provider_data in any::<bool>(),
        no_envelope in prop::bool::weighted(0.05),
        seq_offset in prop::sample::select(vec![2u8, 2, 2, 2, 2, 2, 0, 1, 3]),
        other_thread in prop::bool::weighted(0.05),
    ) -> BornChoices {
        BornChoices {
            turn,
            item,
            status,
            envelope_completed_at,
            completed_at_ms,
            provider_data,
            no_envelope,
            seq_offset,
            other_thread,
        }
    }
}

impl BornChoices {
    fn completion(&self, r: &ThreadReducer) -> ThreadEvent {
        // Mostly the active turn, else any turn it holds, else an unknown one.
        let turn_id = match (self.turn % 4, r.active_turn(), r.turns()) {
            (0..=1, Some(active), _) => active.id.clone(),
            (2, _, turns) if !turns.is_empty() => {
                turns[self.turn as usize % turns.len()].id.clone()
            }
            _ => "turn-unknown".to_owned(),
        };
        // Mostly a fresh item, sometimes one the reducer holds.
        let item_id = match (self.item % 4, r.items()) {
            (0, items) if !items.is_empty() => {
                items[self.item as usize % items.len()].item.id().to_owned()
            }
            _ => format!("born-{}", self.item),
        };
        let status = [
            ItemStatus::Completed,
            ItemStatus::Completed,
            ItemStatus::Failed,
            ItemStatus::Incomplete,
            ItemStatus::Declined,
            ItemStatus::InProgress,
        ][self.status as usize % 6];
        let seq = r.last_seq() + u64::from(self.seq_offset);
        let mut envelope =
            ItemEnvelope::started("user", Audience::BOTH, 5_000 + i64::from(self.item));
        envelope.status = status;
        envelope.completed_at_ms = self.envelope_completed_at.then_some(7_000);
        if self.provider_data {
            envelope.provider_data =
                Some(serde_json::json!({"inputItem": {"role": "user", "content": "hi"}}).into());
        }
        ThreadEvent {
            thread_id: if self.other_thread {
                "thread-other".into()
            } else {
                T.into()
            },
            seq,
            at_ms: 9_000,
            payload: ServerNotification::ItemCompleted(ItemCompletedNotification {
                item: ThreadItem::Plan {
                    id: item_id,
                    text: "born".into(),
                },
                thread_id: T.into(),
                turn_id,
                completed_at_ms: if self.completed_at_ms { 8_000 } else { 0 },
                envelope: (!self.no_envelope).then_some(envelope),
            }),
        }
    }
}
