//! Store-side speed of the Session API and the model view, on the items of
//! the Agents SDK benchmark (`bench/README.md`, workloads c, d and g). Not a timed
//! test: run it in release mode and read the numbers.
//!
//! ```sh
//! cargo test --release -p spool-store --test session_speed -- --ignored --nocapture
//! ```

mod common;
mod session_support;

use std::time::{Duration, Instant};

use common::*;
use session_support::sdk_item;
use spool_core::llm::LlmViewOptions;
use spool_store::{Durability, Session, Store, StoreOptions};

fn fast_fill() -> StoreOptions {
    // Filling is not what is measured; reads do not depend on it.
    StoreOptions {
        durability: Durability::Normal,
        ..StoreOptions::default()
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run in release mode with --ignored --nocapture"]
async fn session_reads_and_the_model_view() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), fast_fill());
    let s = Session::open(store.clone(), "bench").await.unwrap();
    let items: Vec<_> = (0..10_000).map(sdk_item).collect();
    for batch in items.chunks(100) {
        s.add_items(batch.to_vec()).await.unwrap();
    }

    // (c) all 10,000 items, each fully decoded.
    let mut samples = Vec::new();
    for _ in 0..9 {
        let started = Instant::now();
        let got = s.get_items(None).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(got.len(), 10_000);
    }
    eprintln!(
        "(c) get_items(None) of 10,000: median {:?}",
        median(samples)
    );

    // (d) the newest 50, mean of 200 calls.
    for _ in 0..20 {
        s.get_items(Some(50)).await.unwrap();
    }
    let started = Instant::now();
    for _ in 0..200 {
        let got = s.get_items(Some(50)).await.unwrap();
        assert_eq!(got.len(), 50);
    }
    eprintln!(
        "(d) get_items(Some(50)): mean {:?}",
        started.elapsed() / 200
    );

    // (g) the model view under 20,000 tokens on 100,000 items.
    let big = Session::open(store.clone(), "bench-big").await.unwrap();
    let items: Vec<_> = (0..100_000).map(sdk_item).collect();
    for batch in items.chunks(100) {
        big.add_items(batch.to_vec()).await.unwrap();
    }
    let options = LlmViewOptions {
        token_budget: Some(20_000),
        ..LlmViewOptions::default()
    };
    let started = Instant::now();
    let first = store.llm_view("bench-big", options.clone()).await.unwrap();
    eprintln!(
        "(g) llm_view, first (counting {} items): {:?}",
        first.computed_token_counts.len(),
        started.elapsed()
    );
    store.flush().await.unwrap();
    let mut samples = Vec::new();
    for _ in 0..9 {
        let started = Instant::now();
        let view = store.llm_view("bench-big", options.clone()).await.unwrap();
        samples.push(started.elapsed());
        assert!(view.computed_token_counts.is_empty());
        assert_eq!(view.input.len(), first.input.len());
    }
    eprintln!(
        "(g) llm_view, counts cached: median {:?} ({} items, {} tokens, {} turns in, {} out)",
        median(samples),
        first.input.len(),
        first.total_tokens,
        first.turns_included,
        first.turns_omitted
    );
}

/// (g) as `spool bench store` builds it: 50,000 turns of a user and an
/// agent message, written by the runtime (typed items, no raw input).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run in release mode with --ignored --nocapture"]
async fn model_view_of_a_long_runtime_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_with(dir.path(), fast_fill());
    let t = new_thread(&store, false).await;
    let setup = Instant::now();
    for first in (0..50_000).step_by(500) {
        let mut events = Vec::new();
        for k in first..first + 500 {
            let turn = format!("turn_{k}");
            let text = |n: usize| match sdk_item(n).get("content") {
                Some(serde_json::Value::String(text)) => text.clone(),
                _ => sdk_item(n)["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            };
            let user = user_message(&format!("u{k}"), &text(2 * k));
            let agent = agent_message(&format!("a{k}"), &text(2 * k + 1));
            events.push(turn_started(&t, &turn));
            events.push(started(&t, &turn, user.clone()));
            events.push(completed(&t, &turn, user));
            events.push(started(&t, &turn, agent.clone()));
            events.push(completed(&t, &turn, agent));
            events.push(turn_completed(&t, &turn));
        }
        store.append(&t, events).await.unwrap();
    }
    eprintln!("(g') setup of 100,000 items: {:?}", setup.elapsed());
    let options = LlmViewOptions {
        token_budget: Some(20_000),
        ..LlmViewOptions::default()
    };
    let cold = Instant::now();
    let first = store.llm_view(&t, options.clone()).await.unwrap();
    eprintln!("(g') first call: {:?}", cold.elapsed());
    store.flush().await.unwrap();
    let mut samples = Vec::new();
    for _ in 0..9 {
        let warm = Instant::now();
        let view = store.llm_view(&t, options.clone()).await.unwrap();
        samples.push(warm.elapsed());
        assert_eq!(view.input, first.input);
    }
    eprintln!(
        "(g') counts cached: median {:?} ({} items, {} turns in, {} out)",
        median(samples),
        first.input.len(),
        first.turns_included,
        first.turns_omitted
    );
    assert_eq!(first.turns_included + first.turns_omitted, 50_000);
}
