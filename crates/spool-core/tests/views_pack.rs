//! `llm_view` packing: whole turns, newest first, under a token budget.

mod views_support;

use std::time::Instant;

use spool_core::ItemRecord;
use spool_core::llm::{LlmViewOptions, llm_view};
use spool_core::tokens::count_input_item;
use spool_protocol::{FunctionCallStatus, ItemStatus, ThreadItem};
use views_support::{agent, function_call, record, shape, texts, user, with_count, with_status};

fn budget(tokens: usize) -> LlmViewOptions {
    LlmViewOptions {
        token_budget: Some(tokens),
        ..LlmViewOptions::default()
    }
}

/// A turn of a user message and a reply, each with a cached count.
fn turn(n: u64, user_tokens: u32, agent_tokens: u32) -> Vec<ItemRecord> {
    let turn = format!("t{n}");
    vec![
        with_count(
            record(&turn, n * 10, user(&format!("u{n}"), &format!("q{n}"))),
            user_tokens,
        ),
        with_count(
            record(&turn, n * 10 + 1, agent(&format!("a{n}"), &format!("r{n}"))),
            agent_tokens,
        ),
    ]
}

fn thread(turns: &[(u32, u32)]) -> Vec<ItemRecord> {
    turns
        .iter()
        .enumerate()
        .flat_map(|(i, &(u, a))| turn(i as u64 + 1, u, a))
        .collect()
}

#[test]
fn no_budget_means_everything() {
    let records = thread(&[(10, 10), (10, 10), (10, 10)]);
    let view = llm_view(&records, &LlmViewOptions::default());
    assert_eq!(texts(&view.input), ["q1", "r1", "q2", "r2", "q3", "r3"]);
    assert_eq!(
        (view.total_tokens, view.turns_included, view.turns_omitted),
        (60, 3, 0)
    );
}

#[test]
fn whole_turns_are_packed_newest_first_within_the_budget() {
    let records = thread(&[(10, 10), (10, 10), (10, 10)]);
    // 45 tokens: the two newest turns (40) fit, the third would make 60.
    let view = llm_view(&records, &budget(45));
    assert_eq!(texts(&view.input), ["q2", "r2", "q3", "r3"]);
    assert_eq!(
        (view.total_tokens, view.turns_included, view.turns_omitted),
        (40, 2, 1)
    );
    // Exactly at the budget still fits.
    assert_eq!(llm_view(&records, &budget(60)).turns_included, 3);
}

#[test]
fn the_newest_turn_is_always_included_even_over_budget() {
    let records = thread(&[(1, 1), (500, 500)]);
    let view = llm_view(&records, &budget(100));
    assert_eq!(texts(&view.input), ["q2", "r2"]);
    assert_eq!(
        (view.total_tokens, view.turns_included, view.turns_omitted),
        (1000, 1, 1)
    );
}

#[test]
fn history_stays_contiguous_after_a_turn_that_does_not_fit() {
    // Turn 1 is tiny and would fit on its own, but turn 2 did not: taking
    // turn 1 would leave a hole in the history.
    let records = thread(&[(1, 1), (100, 100), (10, 10)]);
    let view = llm_view(&records, &budget(50));
    assert_eq!(texts(&view.input), ["q3", "r3"]);
    assert_eq!((view.turns_included, view.turns_omitted), (1, 2));
}

#[test]
fn a_tool_call_and_its_output_stay_together_across_the_budget_boundary() {
    let mut records = vec![
        with_count(record("t1", 1, user("u1", "q1")), 5),
        with_count(record("t1", 2, function_call("f1", "call_1", "out1")), 30),
        with_count(record("t1", 3, agent("a1", "r1")), 5),
    ];
    records.extend(turn(2, 5, 5));
    let cut = llm_view(&records, &budget(30));
    assert_eq!(shape(&cut.input), ["message:user", "message:assistant"]);
    let whole = llm_view(&records, &budget(50));
    assert_eq!(
        shape(&whole.input),
        [
            "message:user",
            "function_call",
            "function_call_output",
            "message:assistant",
            "message:user",
            "message:assistant"
        ]
    );
}

#[test]
fn a_call_id_reused_by_a_later_exchange_keeps_both_exchanges() {
    // Some servers number calls per response (`call_0`, ...): each record
    // is still its own call and output.
    let records = [
        record("t1", 1, user("u1", "q")),
        record("t1", 2, function_call("f1", "call_0", "first")),
        record("t2", 3, user("u2", "q")),
        record("t2", 4, function_call("f2", "call_0", "second")),
    ];
    let view = llm_view(&records, &LlmViewOptions::default());
    assert_eq!(
        shape(&view.input),
        [
            "message:user",
            "function_call",
            "function_call_output",
            "message:user",
            "function_call",
            "function_call_output"
        ]
    );
}

#[test]
fn a_running_call_in_the_newest_turn_is_left_out_with_its_output() {
    let mut running = function_call("f", "call_1", "");
    if let ThreadItem::FunctionCall { status, output, .. } = &mut running {
        *status = FunctionCallStatus::InProgress;
        *output = None;
    }
    let records = [
        record("t1", 1, user("u1", "q")),
        with_status(record("t1", 2, running), ItemStatus::InProgress),
    ];
    let view = llm_view(&records, &LlmViewOptions::default());
    assert_eq!(shape(&view.input), ["message:user"]);
    // Its count (0) is not offered for caching: the item will change.
    assert_eq!(view.computed_token_counts.len(), 1);
    assert_eq!(view.computed_token_counts[0].0, "u1");
}

#[test]
fn cached_counts_are_trusted_even_when_wrong() {
    let honest = thread(&[(5, 5), (5, 5)]);
    assert_eq!(llm_view(&honest, &budget(30)).turns_included, 2);
    // The same thread, but the cache claims the old reply is huge.
    let mut lying = honest.clone();
    lying[1].token_count = Some(10_000);
    let view = llm_view(&lying, &budget(30));
    assert_eq!((view.turns_included, view.turns_omitted), (1, 1));
    assert!(
        view.computed_token_counts.is_empty(),
        "everything was cached"
    );
}

#[test]
fn computed_counts_are_returned_for_the_store_to_cache() {
    let records = [
        record("t1", 1, user("u1", "hello world")),
        with_count(record("t1", 2, agent("a1", "hi")), 7),
        record("t1", 3, function_call("f1", "call_1", "ok")),
    ];
    let view = llm_view(&records, &LlmViewOptions::default());
    let converted = &view.input;
    let user_tokens = count_input_item(&converted[0]);
    let call_tokens = count_input_item(&converted[2]) + count_input_item(&converted[3]);
    assert_eq!(
        view.computed_token_counts,
        [
            ("f1".to_owned(), call_tokens),
            ("u1".to_owned(), user_tokens)
        ]
    );
    assert_eq!(view.total_tokens, (user_tokens + 7 + call_tokens) as usize);

    // Feeding the counts back gives the same view without computing any.
    let cached: Vec<ItemRecord> = records
        .iter()
        .map(|r| {
            let count = view
                .computed_token_counts
                .iter()
                .find(|(id, _)| id == r.item.id())
                .map(|&(_, count)| count);
            let mut r = r.clone();
            r.token_count = r.token_count.or(count);
            r
        })
        .collect();
    let again = llm_view(&cached, &LlmViewOptions::default());
    assert!(again.computed_token_counts.is_empty());
    assert_eq!(again.input, view.input);
    assert_eq!(again.total_tokens, view.total_tokens);
}

#[test]
fn turns_beyond_the_budget_are_not_converted() {
    // 1,000 uncached turns; only the two that fit and the first that does
    // not are counted (and so converted).
    let records: Vec<ItemRecord> = (1..=1_000u64)
        .flat_map(|n| {
            let turn = format!("t{n}");
            [
                record(&turn, n * 10, user(&format!("u{n}"), "hello world")),
                record(&turn, n * 10 + 1, agent(&format!("a{n}"), "hello world")),
            ]
        })
        .collect();
    let view = llm_view(&records, &budget(25));
    assert_eq!((view.turns_included, view.turns_omitted), (2, 998));
    assert_eq!(view.computed_token_counts.len(), 6);
}

#[test]
fn a_long_cached_thread_packs_quickly() {
    // 100,000 items in 25,000 turns, all counts cached; a 20,000-token budget.
    let records: Vec<ItemRecord> = (0..25_000u64)
        .flat_map(|n| {
            let turn = format!("t{n}");
            let ordinal = n * 4;
            [
                with_count(
                    record(&turn, ordinal, user(&format!("u{n}"), "question")),
                    40,
                ),
                with_count(
                    record(
                        &turn,
                        ordinal + 1,
                        function_call(&format!("f{n}"), &format!("c{n}"), "42"),
                    ),
                    60,
                ),
                with_count(
                    record(&turn, ordinal + 2, agent(&format!("a{n}"), "answer")),
                    80,
                ),
                with_count(
                    record(
                        &turn,
                        ordinal + 3,
                        ThreadItem::Status {
                            id: format!("s{n}"),
                            text: "x".into(),
                        },
                    ),
                    0,
                ),
            ]
        })
        .collect();
    let options = budget(20_000);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let view = llm_view(&records, &options);
        best = best.min(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(view.turns_included, 111);
        assert_eq!(view.turns_included + view.turns_omitted, 25_000);
    }
    eprintln!("llm_view over 100,000 cached items: {best:.3} ms");
    // Generous: this runs unoptimized, next to other tests. A view that
    // converted every record would take far longer.
    assert!(best < 100.0, "{best} ms");
}

#[test]
fn turns_before_the_compaction_are_not_counted_as_omitted() {
    let mut records = turn(1, 5, 5);
    records.push(with_count(
        record(
            "t2",
            15,
            ThreadItem::ContextCompaction {
                id: "cc".into(),
                summary: Some("turn 1".into()),
                replaces: None,
            },
        ),
        5,
    ));
    records.extend(turn(2, 5, 5));
    records.extend(turn(3, 50, 50));
    // Turn 2 (with the compaction) does not fit; turn 1 is compacted away,
    // not omitted.
    let view = llm_view(&records, &budget(100));
    assert_eq!(texts(&view.input), ["q3", "r3"]);
    assert_eq!((view.turns_included, view.turns_omitted), (1, 1));
    // With room, the view starts at the summary.
    let view = llm_view(&records, &budget(200));
    assert_eq!(
        texts(&view.input),
        [
            "Summary of the conversation so far:\nturn 1",
            "q2",
            "r2",
            "q3",
            "r3"
        ]
    );
    assert_eq!((view.turns_included, view.turns_omitted), (2, 0));
}

/// Extending a view read with `extendable`: the records of the newest
/// turn are added; records that would push an older turn out, or an
/// unfinished one, are refused (a fresh read is the caller's next step).
#[test]
fn an_extension_adds_the_newest_turns_records_and_refuses_what_would_change_the_rest() {
    let options = LlmViewOptions {
        token_budget: Some(45),
        extendable: true,
        ..LlmViewOptions::default()
    };
    let mut records = thread(&[(10, 10), (10, 10)]);
    let mut view = llm_view(&records, &options);
    assert_eq!(view.base.as_ref().map(|b| b.through_ordinal()), Some(21));

    // A short reply more in the newest turn: 50 tokens would pass 45 with
    // two turns in, so the older one would have to go: refused.
    let more = with_count(record("t2", 22, agent("a2b", "more")), 10);
    assert!(!view.clone().extend(std::slice::from_ref(&more), &options));

    // Without the budget it goes in, as a fresh read has it.
    let open = LlmViewOptions {
        token_budget: None,
        ..options.clone()
    };
    let mut unbounded = llm_view(&records, &open);
    assert!(unbounded.extend(std::slice::from_ref(&more), &open));
    records.push(more.clone());
    assert_eq!(unbounded.input, llm_view(&records, &open).input);
    assert_eq!(texts(&unbounded.input), ["q1", "r1", "q2", "r2", "more"]);

    // An unfinished record, another turn's, or one already read: refused.
    let running = with_status(
        record("t2", 23, agent("a2c", "...")),
        ItemStatus::InProgress,
    );
    assert!(!view.extend(&[running], &options));
    let other_turn = with_count(record("t3", 30, user("u3", "q3")), 1);
    assert!(!view.extend(&[other_turn], &options));
    assert!(!view.extend(std::slice::from_ref(&records[0]), &options));

    // A view with an unfinished record cannot be extended at all.
    let mut records = thread(&[(10, 10)]);
    records.push(with_status(
        record("t1", 12, agent("a1b", "..")),
        ItemStatus::InProgress,
    ));
    assert_eq!(llm_view(&records, &options).base, None);
}
