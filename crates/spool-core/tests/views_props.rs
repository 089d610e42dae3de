//! Properties of the `llm` view over random threads and budgets.

mod views_support;

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use serde_json::{Value, json};
use spool_core::llm::{LlmViewOptions, ReasoningIdPolicy, llm_view};
use spool_core::tokens::count_input_item;
use spool_core::views::{keep, select};
use spool_core::{ItemRecord, View};
use spool_protocol::{
    Audience, CommandExecutionStatus, FunctionCallStatus, ItemStatus, ThreadItem,
};
use views_support::{agent, record, user};

/// One generated item, before it gets its place in the thread.
#[derive(Debug, Clone)]
enum Spec {
    User(String),
    Agent(String),
    /// A function call; call ids come from a small pool so they repeat.
    Call(u8, u8),
    /// A shell command, with or without a recorded provider call.
    Command(Option<u8>, u8),
    Reasoning {
        id: bool,
        summary: bool,
        encrypted: bool,
    },
    Context(String),
    Component,
    Status,
    Compaction {
        finished: bool,
    },
}

fn spec() -> impl Strategy<Value = Spec> {
    let text = "[a-z ]{0,30}";
    prop_oneof![
        4 => text.prop_map(Spec::User),
        4 => text.prop_map(Spec::Agent),
        3 => (0u8..4, 0u8..4).prop_map(|(id, status)| Spec::Call(id, status)),
        2 => (proptest::option::of(0u8..4), 0u8..4).prop_map(|(id, s)| Spec::Command(id, s)),
        2 => (any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(id, summary, encrypted)| Spec::Reasoning { id, summary, encrypted }),
        1 => text.prop_map(Spec::Context),
        1 => Just(Spec::Component),
        1 => Just(Spec::Status),
        1 => any::<bool>().prop_map(|finished| Spec::Compaction { finished }),
    ]
}

/// A generated item: its spec, an optional cached count, and whether its
/// producer moved it out of the model's audience.
type Generated = (Spec, Option<u32>, bool);

fn generated() -> impl Strategy<Value = Generated> {
    (
        spec(),
        proptest::option::weighted(0.3, 0u32..150),
        proptest::bool::weighted(0.1),
    )
}

fn build(turns: &[Vec<Generated>]) -> Vec<ItemRecord> {
    let mut records = Vec::new();
    let mut ordinal = 0;
    for (turn, items) in turns.iter().enumerate() {
        let turn_id = format!("turn{turn}");
        for (spec, cached, hidden) in items {
            ordinal += 1;
            let id = format!("item{ordinal}");
            let (item, status, provider) = item_of(spec, &id);
            let mut r = record(&turn_id, ordinal, item);
            r.envelope.status = status;
            r.envelope.provider_data = provider.map(Into::into);
            r.token_count = *cached;
            if *hidden {
                r.envelope.audience = Audience::CLIENT_ONLY;
            }
            records.push(r);
        }
    }
    records
}

fn item_of(spec: &Spec, id: &str) -> (ThreadItem, ItemStatus, Option<Value>) {
    let done = ItemStatus::Completed;
    match spec {
        Spec::User(text) => (user(id, text), done, None),
        Spec::Agent(text) => (agent(id, text), done, None),
        Spec::Call(call, status) => {
            let (status, envelope) = match status {
                0 => (FunctionCallStatus::Completed, done),
                1 => (FunctionCallStatus::Declined, ItemStatus::Declined),
                2 => (FunctionCallStatus::Failed, ItemStatus::Failed),
                _ => (FunctionCallStatus::InProgress, ItemStatus::InProgress),
            };
            let item = ThreadItem::FunctionCall {
                id: id.into(),
                name: "f".into(),
                call_id: format!("call_{call}"),
                arguments: "{}".into(),
                status,
                output: Some("out".into()),
                duration_ms: None,
            };
            (item, envelope, None)
        }
        Spec::Command(call, status) => {
            let (status, envelope) = match status {
                0 => (CommandExecutionStatus::Completed, done),
                1 => (CommandExecutionStatus::Declined, ItemStatus::Declined),
                2 => (CommandExecutionStatus::InProgress, ItemStatus::Incomplete),
                _ => (CommandExecutionStatus::InProgress, ItemStatus::InProgress),
            };
            let item = ThreadItem::CommandExecution {
                plugin_id: Default::default(),
                script_path: Default::default(),
                source: Default::default(),
                id: id.into(),
                command: "ls".into(),
                cwd: "/".into(),
                process_id: None,
                status,
                command_actions: Vec::new(),
                aggregated_output: Some("a\n".into()),
                exit_code: Some(0),
                duration_ms: None,
            };
            let provider = call.map(|call| {
                json!({"type": "function_call", "call_id": format!("call_{call}"),
                       "name": "shell", "arguments": "{}"})
            });
            (item, envelope, provider)
        }
        Spec::Reasoning {
            id: with_id,
            summary,
            encrypted,
        } => {
            let item = ThreadItem::Reasoning {
                id: id.into(),
                summary: if *summary {
                    vec!["thinking".into()]
                } else {
                    Vec::new()
                },
                content: Vec::new(),
            };
            let mut provider = serde_json::Map::new();
            if *with_id {
                provider.insert("id".into(), json!(format!("rs_{id}")));
            }
            if *encrypted {
                provider.insert("encrypted_content".into(), json!("gAAAAB"));
            }
            (item, done, Some(Value::Object(provider)))
        }
        Spec::Context(text) => (
            ThreadItem::Context {
                id: id.into(),
                text: text.clone(),
            },
            done,
            None,
        ),
        Spec::Component => (
            ThreadItem::Component {
                id: id.into(),
                name: "C".into(),
                props: json!({}),
            },
            done,
            None,
        ),
        Spec::Status => (
            ThreadItem::Status {
                id: id.into(),
                text: "…".into(),
            },
            done,
            None,
        ),
        Spec::Compaction { finished } => (
            ThreadItem::ContextCompaction {
                id: id.into(),
                summary: Some("earlier".into()),
                replaces: None,
            },
            if *finished {
                done
            } else {
                ItemStatus::InProgress
            },
            None,
        ),
    }
}

/// Checks that every call is answered by the next output with its id and
/// every output answers a call before it.
fn assert_paired(input: &[Value]) -> Result<(), TestCaseError> {
    let mut open: HashMap<&str, usize> = HashMap::new();
    for item in input {
        let Some(call_id) = item["call_id"].as_str() else {
            continue;
        };
        match item["type"].as_str() {
            Some("function_call" | "custom_tool_call") => {
                prop_assert!(
                    open.insert(call_id, 1).is_none(),
                    "call {call_id} opened twice"
                );
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                prop_assert!(open.remove(call_id).is_some(), "orphan output {call_id}");
            }
            other => prop_assert!(false, "unexpected item with a call id: {other:?}"),
        }
    }
    prop_assert!(open.is_empty(), "unanswered calls: {:?}", open.keys());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_llm_view_is_always_valid_input(
        turns in proptest::collection::vec(proptest::collection::vec(generated(), 0..6), 1..8),
        budget in proptest::option::of(0usize..600),
        omit in any::<bool>(),
    ) {
        let records = build(&turns);
        let policy = if omit { ReasoningIdPolicy::Omit } else { ReasoningIdPolicy::Preserve };
        let options = LlmViewOptions {
            token_budget: budget,
            reasoning_ids: policy,
            extendable: false,
            skip_token_counts: false,
        };
        let view = llm_view(&records, &options);
        let input = views_support::json(&view.input);

        // Not counting tokens changes nothing but the count (and only
        // without a budget does it skip counting).
        let uncounted = llm_view(&records, &LlmViewOptions { skip_token_counts: true, ..options.clone() });
        prop_assert_eq!(&uncounted.input, &view.input);
        prop_assert_eq!(uncounted.turns_included, view.turns_included);
        if budget.is_none() {
            prop_assert!(uncounted.computed_token_counts.is_empty());
        } else {
            prop_assert_eq!(&uncounted, &view);
        }

        // No orphan output, no unanswered call.
        assert_paired(&input)?;

        // The budget holds whenever more than the newest turn went in.
        if let (Some(budget), true) = (budget, view.turns_included > 1) {
            prop_assert!(view.total_tokens <= budget, "{} > {budget}", view.total_tokens);
        }

        // Owned or borrowed, every view picks the same records.
        for view in [View::All, View::Client, View::Llm] {
            let selected: Vec<ItemRecord> = select(&records, view).into_iter().cloned().collect();
            prop_assert_eq!(keep(records.clone(), view), selected);
        }

        // Every turn of the view is either included or omitted.
        let in_view = select(&records, View::Llm);
        let turn_ids: HashSet<&str> = in_view.iter().map(|r| r.turn_id.as_str()).collect();
        prop_assert_eq!(view.turns_included + view.turns_omitted, turn_ids.len());

        // The newest turn is always included whole: its input is exactly
        // the end of the view, whatever the budget.
        let newest = llm_view(&records, &LlmViewOptions { token_budget: Some(0), ..options.clone() });
        // (Turns that cost nothing still fit a zero budget.)
        prop_assert_eq!(newest.turns_included >= 1, !turn_ids.is_empty());
        prop_assert!(view.input.ends_with(&newest.input));

        // A larger budget never includes fewer turns.
        if let Some(budget) = budget {
            let larger = LlmViewOptions { token_budget: Some(budget + 100), ..options.clone() };
            prop_assert!(llm_view(&records, &larger).turns_included >= view.turns_included);
        }

        // With nothing cached, the total is the counted input (or more, when
        // sanitizing dropped an item).
        if records.iter().all(|r| r.token_count.is_none()) {
            let counted: usize = view.input.iter().map(|i| count_input_item(i) as usize).sum();
            prop_assert!(view.total_tokens >= counted);
        }

        // Omit leaves no reasoning id behind.
        if omit {
            for item in input.iter().filter(|item| item["type"] == "reasoning") {
                prop_assert!(item.get("id").is_none(), "{}", item);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A view grown by the records after it is the view a fresh read
    /// gives, whenever `extend` accepts them; and it accepts the common
    /// case: finished records of the newest turn, no budget.
    #[test]
    fn an_extended_view_is_a_fresh_read(
        turns in proptest::collection::vec(proptest::collection::vec(generated(), 0..6), 1..6),
        split in 0usize..40,
        budget in proptest::option::of(0usize..600),
        omit in any::<bool>(),
        skip in any::<bool>(),
    ) {
        let records = build(&turns);
        let split = split.min(records.len());
        let policy = if omit { ReasoningIdPolicy::Omit } else { ReasoningIdPolicy::Preserve };
        let options = LlmViewOptions {
            token_budget: budget,
            reasoning_ids: policy,
            extendable: true,
            skip_token_counts: skip,
        };
        let (before, after) = records.split_at(split);
        let mut view = llm_view(before, &options);
        let Some(base) = view.base.clone() else {
            // Not extendable: something in it was unfinished, or it is empty.
            let in_view: Vec<&ItemRecord> = select(before, View::Llm);
            prop_assert!(in_view.is_empty() || in_view.iter().any(|r| !r.envelope.status.is_terminal())
                || view.input.is_empty() && view.turns_included == 0);
            return Ok(());
        };
        let newer: Vec<ItemRecord> = after
            .iter()
            .filter(|r| r.ordinal > base.through_ordinal())
            .cloned()
            .collect();
        let accepted = view.extend(&newer, &options);
        let fresh = llm_view(&records, &options);
        if accepted {
            prop_assert_eq!(&view.input, &fresh.input);
            prop_assert_eq!(view.total_tokens, fresh.total_tokens);
            prop_assert_eq!(view.turns_included, fresh.turns_included);
            prop_assert_eq!(view.turns_omitted, fresh.turns_omitted);
        }
        let plain = budget.is_none()
            && newer.iter().filter(|r| spool_core::llm::in_view(r)).all(|r| {
                r.turn_id == base.turn_id()
                    && r.envelope.status.is_terminal()
                    && !spool_core::llm::is_cut_point(r)
            });
        if plain {
            prop_assert!(accepted, "refused a plain extension");
        }
    }
}
