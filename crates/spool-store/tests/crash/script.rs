//! The child's workload, generated from a seed so the parent can rebuild
//! exactly what was appended and compare it with the log it finds.

use std::collections::VecDeque;

use spool_protocol::{ReasoningSummaryTextDeltaNotification, ServerNotification, ThreadItem};

use crate::common::{
    agent_delta, agent_message, completed, started, turn_completed, turn_started, user_message,
};

/// splitmix64: tiny, seedable, and good enough to pick kill points and
/// shapes of turns. No `rand` dev-dependency needed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// True once in `n` draws on average.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next_u64().is_multiple_of(n)
    }
}

/// The id of the child's `index`th thread.
pub fn thread_id(index: usize) -> String {
    format!("t{index}")
}

/// The seed of one thread's script, derived from the run's.
pub fn thread_seed(seed: u64, index: usize) -> u64 {
    Rng::new(seed ^ index as u64).next_u64()
}

/// One `append` call of the child.
#[derive(Debug, Clone)]
pub struct Step {
    pub events: Vec<ServerNotification>,
    /// Call `flush` after this append (drawn for appends of deltas only,
    /// which are otherwise acknowledged before they are durable).
    pub flush: bool,
}

impl Step {
    /// Whether the append returns only once committed.
    pub fn has_lifecycle(&self) -> bool {
        self.events.iter().any(|event| !event.is_delta())
    }
}

/// An endless sequence of turns on one thread: a user message, sometimes
/// reasoning streamed as summary deltas, an agent message streamed as many
/// deltas, each item completed, the turn completed; then the next turn.
pub struct Script {
    thread: String,
    rng: Rng,
    turns: u64,
    steps: VecDeque<Step>,
}

impl Script {
    pub fn new(thread: &str, seed: u64) -> Self {
        Script {
            thread: thread.to_owned(),
            rng: Rng::new(seed),
            turns: 0,
            steps: VecDeque::new(),
        }
    }

    pub fn next_step(&mut self) -> Step {
        loop {
            if let Some(step) = self.steps.pop_front() {
                return step;
            }
            self.plan_turn();
        }
    }

    /// Every event the script appends, in order (the log after
    /// `thread/started`).
    pub fn events(mut self) -> impl Iterator<Item = ServerNotification> {
        std::iter::from_fn(move || Some(self.next_step().events)).flatten()
    }

    fn plan_turn(&mut self) {
        self.turns += 1;
        let events = self.turn_events();
        self.split_into_steps(events);
    }

    fn turn_events(&mut self) -> Vec<ServerNotification> {
        let t = self.thread.clone();
        let n = self.turns;
        let turn = format!("turn-{n}");
        let question = format!("question {n} on {t}");
        let mut events = vec![
            turn_started(&t, &turn),
            started(&t, &turn, user_message(&format!("u{n}"), &question)),
            completed(&t, &turn, user_message(&format!("u{n}"), &question)),
        ];
        if self.rng.one_in(2) {
            let id = format!("r{n}");
            events.push(started(&t, &turn, reasoning(&id, None)));
            let mut summary = String::new();
            for _ in 0..self.rng.between(1, 8) {
                let word = self.word();
                summary.push_str(&word);
                events.push(reasoning_delta(&t, &turn, &id, word));
            }
            events.push(completed(&t, &turn, reasoning(&id, Some(summary))));
        }
        let id = format!("a{n}");
        events.push(started(&t, &turn, agent_message(&id, "")));
        let mut text = String::new();
        for _ in 0..self.rng.between(2, 30) {
            let word = self.word();
            text.push_str(&word);
            events.push(agent_delta(&t, &turn, &id, &word));
        }
        events.push(completed(&t, &turn, agent_message(&id, &text)));
        events.push(turn_completed(&t, &turn));
        events
    }

    /// Cuts a turn into appends: mostly one or two events each, so deltas
    /// are mostly streamed alone and lifecycle events sometimes share an
    /// append with the deltas around them.
    fn split_into_steps(&mut self, events: Vec<ServerNotification>) {
        let mut current = Vec::new();
        let last = events.len() - 1;
        for (index, event) in events.into_iter().enumerate() {
            current.push(event);
            if index == last || self.rng.one_in(2) {
                let mut step = Step {
                    events: std::mem::take(&mut current),
                    flush: false,
                };
                step.flush = !step.has_lifecycle() && self.rng.one_in(6);
                self.steps.push_back(step);
            }
        }
    }

    fn word(&mut self) -> String {
        format!("w{} ", self.rng.between(0, 9_999))
    }
}

fn reasoning(id: &str, summary: Option<String>) -> ThreadItem {
    ThreadItem::Reasoning {
        id: id.to_owned(),
        summary: summary.into_iter().collect(),
        content: Vec::new(),
    }
}

fn reasoning_delta(thread: &str, turn: &str, item: &str, delta: String) -> ServerNotification {
    ServerNotification::ReasoningSummaryTextDelta(ReasoningSummaryTextDeltaNotification {
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        item_id: item.to_owned(),
        delta,
        summary_index: 0,
    })
}
