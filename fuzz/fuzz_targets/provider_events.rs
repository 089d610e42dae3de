//! Provider event mapping, end to end without a network: a Responses API
//! or Chat Completions SSE body (raw bytes, or a structured stream built
//! with `arbitrary` from the real event names and fields) through
//! spool-model's wire parser under the driver's stream contract, then
//! spool-runtime's `OutputMapper`, then spool-core's reducer.
//!
//! Input: byte 0 picks the mode (`% 4`: raw Responses, raw Chat,
//! structured Responses, structured Chat), byte 1 the chunking (see
//! `spool_fuzz::chunk`), the rest is the body or `arbitrary`'s input.
//!
//! Asserts: no panic; the model stream keeps its contract (exactly one
//! terminal item, last; at most one `Created`, first; every
//! `OutputItemDone` after an `OutputItemAdded` of its output index;
//! indices within the parser's bound); and the reducer accepts everything
//! the mapper makes of it, as the runner uses it (calls deferred) and with
//! function call items, so that the turn can then complete.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use spool_core::ThreadReducer;
use spool_fuzz::provider_stream::{CChunk, REvent};
use spool_model::ModelEvent;
use spool_model::fuzzing::{Wire, model_events};
use spool_protocol::{
    FunctionCallStatus, ServerNotification, ThreadEvent, Turn, TurnCompletedNotification,
    TurnStartedNotification, TurnStatus,
};
use spool_runtime::output_mapper::OutputMapper;

/// The parser's bound on indices (spool-model `fields::MAX_STREAM_INDEX`).
const MAX_STREAM_INDEX: usize = 4096;

// ---- the checks ----------------------------------------------------------

type Item_ = Result<ModelEvent, spool_model::ModelError>;

fn check_contract(wire: Wire, items: &[Item_]) {
    let terminal = |i: &Item_| i.as_ref().map_or(true, ModelEvent::is_terminal);
    assert_eq!(
        items.iter().filter(|i| terminal(i)).count(),
        1,
        "one terminal: {items:#?}"
    );
    assert!(
        items.last().is_some_and(terminal),
        "the terminal is last: {items:#?}"
    );
    let created: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Ok(ModelEvent::Created { .. })))
        .map(|(n, _)| n)
        .collect();
    assert!(
        created.len() <= 1 && created.iter().all(|n| *n == 0),
        "Created at most once, first: {items:#?}"
    );
    let mut added = std::collections::HashSet::new();
    for item in items.iter().flatten() {
        let index = match item {
            ModelEvent::OutputItemAdded { output_index, .. } => {
                added.insert(*output_index);
                *output_index
            }
            ModelEvent::OutputItemDone { output_index, .. } => {
                assert!(
                    added.contains(output_index),
                    "done before added: {items:#?}"
                );
                *output_index
            }
            ModelEvent::OutputTextDelta { output_index, .. }
            | ModelEvent::FunctionCallArgumentsDelta { output_index, .. } => *output_index,
            ModelEvent::ReasoningSummaryPartAdded { summary_index, .. }
            | ModelEvent::ReasoningSummaryDelta { summary_index, .. } => *summary_index,
            ModelEvent::ReasoningTextDelta { content_index, .. } => *content_index,
            ModelEvent::Created { .. } | ModelEvent::Completed { .. } => 0,
        };
        if wire == Wire::Responses {
            assert!(
                index <= MAX_STREAM_INDEX,
                "index {index} past the bound: {item:?}"
            );
        }
    }
}

struct Log {
    reducer: ThreadReducer,
    seq: u64,
}

impl Log {
    fn apply(&mut self, payload: ServerNotification, context: &dyn std::fmt::Debug) {
        self.seq += 1;
        let event = ThreadEvent {
            thread_id: "thr".into(),
            seq: self.seq,
            at_ms: 1_700_000_000_000 + self.seq as i64,
            payload,
        };
        if let Err(e) = self.reducer.apply(&event) {
            panic!(
                "the reducer refused {:?}: {e}\nstream: {context:#?}",
                event.payload
            );
        }
    }
}

fn check_mapping(items: &[Item_], defer_calls: bool) {
    let mut log = Log {
        reducer: ThreadReducer::new("thr"),
        seq: 0,
    };
    log.apply(
        ServerNotification::TurnStarted(TurnStartedNotification {
            thread_id: "thr".into(),
            turn: Turn::new("turn", TurnStatus::InProgress),
        }),
        &items,
    );
    let mut mapper = OutputMapper::new("thr", "turn", "agent");
    if defer_calls {
        mapper = mapper.deferring_calls();
    }
    let now = 1_700_000_000_000;
    let mut failed = false;
    for item in items {
        match item {
            Ok(ModelEvent::Completed { .. }) => break,
            Ok(event) => {
                for n in mapper.on_event(event.clone(), now) {
                    log.apply(n, &items);
                }
            }
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    for n in mapper.close_open(now) {
        log.apply(n, &items);
    }
    for call in mapper.take_pending_calls() {
        log.apply(
            call.complete(FunctionCallStatus::Completed, "ok".into(), 1, now),
            &items,
        );
    }
    let _ = mapper.take_model_calls();
    let status = if failed {
        TurnStatus::Failed
    } else {
        TurnStatus::Completed
    };
    log.apply(
        ServerNotification::TurnCompleted(TurnCompletedNotification {
            thread_id: "thr".into(),
            turn: Turn::new("turn", status),
        }),
        &items,
    );
}

fuzz_target!(|data: &[u8]| {
    let [mode, seed, rest @ ..] = data else {
        return;
    };
    let (wire, body) = match mode % 4 {
        0 => (Wire::Responses, rest.to_vec()),
        1 => (Wire::Chat, rest.to_vec()),
        2 => {
            let Ok(events) = Vec::<REvent>::arbitrary_take_rest(Unstructured::new(rest)) else {
                return;
            };
            (
                Wire::Responses,
                events
                    .iter()
                    .map(REvent::sse)
                    .collect::<String>()
                    .into_bytes(),
            )
        }
        _ => {
            let Ok(chunks) = Vec::<CChunk>::arbitrary_take_rest(Unstructured::new(rest)) else {
                return;
            };
            (
                Wire::Chat,
                chunks
                    .iter()
                    .map(CChunk::sse)
                    .collect::<String>()
                    .into_bytes(),
            )
        }
    };
    if std::env::var_os("SPOOL_FUZZ_DUMP").is_some() {
        // To turn a structured input into a regression test's body.
        eprintln!(
            "{wire:?} body (chunking {seed}):\n{}",
            String::from_utf8_lossy(&body)
        );
    }
    let items = block_on(model_events(wire, spool_fuzz::chunk(&body, *seed)));
    check_contract(wire, &items);
    check_mapping(&items, true);
    check_mapping(&items, false);
});
