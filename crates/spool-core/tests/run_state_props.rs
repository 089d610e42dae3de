//! Properties of RunState reading and writing over generated snapshots:
//! valid states round-trip, and no corruption of a snapshot makes an
//! error quote it.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use spool_core::llm::{HistoryCursor, PartKey, ReasoningIdPolicy};
use spool_core::run_state::{
    AgentKey, ApprovalRecord, CallRecord, Interruption, InterruptionKind, RunHistory, RunState,
    ToolKey,
};
use spool_protocol::HistoryMode;

const SECRET: &str = "SECRET_TOKEN_do_not_echo_7Qx9Lm";

/// What happens to one generated call.
#[derive(Debug, Clone)]
struct CallSeed {
    agent: (u8, u32),
    tool: u8,
    arguments: String,
    /// 0: not started, 1: started and unfinished, 2: completed.
    progress: u8,
    output: String,
    /// For calls not started: 0 nothing, 1 decided, 2 waiting for a person.
    approval: u8,
}

fn call_seed() -> impl Strategy<Value = CallSeed> {
    (
        (0u8..2, 0u32..2),
        0u8..3,
        ".{0,12}",
        0u8..3,
        ".{0,12}",
        0u8..3,
    )
        .prop_map(
            |(agent, tool, arguments, progress, output, approval)| CallSeed {
                agent,
                tool,
                arguments,
                progress,
                output,
                approval,
            },
        )
}

fn agent(seed: (u8, u32)) -> AgentKey {
    AgentKey::new(["coder", "triage"][seed.0 as usize], seed.1)
}

fn build(
    ids: String,
    current: (u8, u32),
    counters: (u32, u32),
    last_response_id: Option<String>,
    texts: Vec<String>,
    ack: Index,
    seeds: Vec<CallSeed>,
) -> RunState {
    let mut state = RunState {
        thread_id: format!("thr_{ids}"),
        turn_id: format!("turn_{ids}"),
        current_agent: agent(current),
        step: counters.0,
        max_turns: counters.1,
        last_response_id,
        acknowledged_input_count: 0,
        input: texts
            .iter()
            .map(|text| json!({ "type": "message", "role": "user", "content": text }))
            .collect(),
        calls: vec![],
        approvals: vec![],
        interruptions: vec![],
        reasoning_ids: ReasoningIdPolicy::Preserve,
        history: None,
    };
    state.acknowledged_input_count = ack.index(state.input.len() + 1);
    for (i, seed) in seeds.into_iter().enumerate() {
        let call_id = format!("{ids}{i}");
        let tool = ToolKey::new(
            agent(seed.agent),
            ["shell", "apply_patch", "lookup"][seed.tool as usize],
        );
        let (executed, completed) = (seed.progress >= 1, seed.progress == 2);
        if !executed && seed.approval == 1 {
            state.approvals.push(ApprovalRecord {
                request_id: format!("req{i}"),
                call_id: call_id.clone(),
                tool: tool.clone(),
                decision: json!({ "decision": seed.output }),
            });
        }
        if !executed && seed.approval == 2 {
            state.interruptions.push(Interruption {
                request_id: format!("req{i}"),
                call_id: call_id.clone(),
                tool: tool.clone(),
                item_id: format!("item{i}"),
                kind: InterruptionKind::FileChange,
                summary: seed.arguments.clone(),
            });
        }
        state.calls.push(CallRecord {
            call_id,
            tool,
            item_id: format!("item{i}"),
            arguments: seed.arguments,
            executed,
            completed,
            output: completed.then_some(seed.output),
        });
    }
    state
}

/// A provider-held history: mode, cursor and conversation.
type HistorySeed = (
    bool,
    Option<String>,
    u64,
    Vec<(String, u32)>,
    Vec<String>,
    Option<String>,
);

fn history(seed: HistorySeed) -> RunHistory {
    let (conversation, previous, through, unsent, held, conversation_id) = seed;
    RunHistory {
        mode: if conversation {
            HistoryMode::ConversationId
        } else {
            HistoryMode::PreviousResponseId
        },
        cursor: HistoryCursor {
            previous_response_id: previous,
            through_ordinal: through,
            unsent: unsent
                .into_iter()
                .map(|(item_id, part)| PartKey { item_id, part })
                .collect(),
            held_calls: held,
        },
        conversation_id,
    }
}

fn history_seed() -> impl Strategy<Value = HistorySeed> {
    (
        any::<bool>(),
        proptest::option::of(".{0,8}"),
        any::<u64>(),
        proptest::collection::vec((".{0,6}", any::<u32>()), 0..3),
        proptest::collection::vec(".{0,6}", 0..3),
        proptest::option::of(".{0,8}"),
    )
}

fn run_state() -> impl Strategy<Value = RunState> {
    (
        "[a-z0-9_]{1,8}",
        (0u8..2, 0u32..2),
        (any::<u32>(), any::<u32>()),
        proptest::option::of(".{0,10}"),
        proptest::collection::vec(".{0,10}", 0..4),
        any::<Index>(),
        proptest::collection::vec(call_seed(), 0..5),
        (any::<bool>(), proptest::option::of(history_seed())),
    )
        .prop_map(
            |(ids, current, counters, last, texts, ack, seeds, (omit, held))| {
                let mut state = build(ids, current, counters, last, texts, ack, seeds);
                if omit {
                    state.reasoning_ids = ReasoningIdPolicy::Omit;
                }
                state.history = held.map(history);
                state
            },
        )
}

/// JSON pointers to every leaf (and every container) of a value.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                pointers(
                    item,
                    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        _ => {}
    }
    out.push(at);
}

proptest! {
    #[test]
    fn valid_states_round_trip(state in run_state()) {
        state.validate().unwrap();
        let text = state.to_json();
        prop_assert_eq!(&RunState::from_json(&text).unwrap(), &state);
        prop_assert_eq!(&serde_json::from_str::<RunState>(&text).unwrap(), &state);
        for call in &state.calls {
            prop_assert_eq!(state.needs_execution(&call.call_id), !call.executed);
        }
        prop_assert_eq!(
            state.pending_interruptions().len(),
            state.interruptions.len()
        );
    }

    #[test]
    fn corrupting_any_field_never_echoes_it(
        state in run_state(),
        at in any::<Index>(),
        replacement in 0u8..4,
    ) {
        let mut value = serde_json::to_value(&state).unwrap();
        let mut all = Vec::new();
        pointers(&value, String::new(), &mut all);
        let pointer = all[at.index(all.len())].clone();
        let secret = match replacement {
            0 => json!(SECRET),
            1 => json!([SECRET]),
            2 => json!({ "x": SECRET }),
            _ => json!(-1),
        };
        match value.pointer_mut(&pointer) {
            Some(slot) => *slot = secret,
            None => unreachable!("pointer {pointer} came from the value"),
        }
        if let Err(error) = RunState::from_json(&value.to_string()) {
            let display = error.to_string();
            let debug = format!("{error:?}");
            prop_assert!(!display.contains(SECRET), "{}", display);
            prop_assert!(!debug.contains(SECRET), "{}", debug);
            prop_assert!(display.contains("supported RunState versions: 1.0, 1.1, 1.2"), "{}", display);
        }
    }
}
