//! A cursor means one thing forever, across crashes: the real `spool serve`
//! streams a long turn to a WebSocket client with `seq`, is SIGKILLed at a
//! seeded point, and restarts on the same store; the client resumes from
//! the last seq it saw. No seq it saw names a different event afterwards
//! (seqs whose deltas were lost are named by `thread/eventsLost`), it gets
//! the turn's `turn/completed`, and the committed text is a prefix of what
//! it saw. 5 seeds here, 20 in `sigkill_soak` (`--run-ignored only`).

mod serve_net;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use serve_net::{Server, ws_open};
use spool_testkit::responses_api::paced_message_response;
use spool_testkit::{Gate, ScriptedServer};
use support::Home;
use support::peer::Peer;
use support::rpc::{method_of, thread_id_of};

/// Deltas in the model's reply.
const DELTAS: usize = 1_500;

/// A small deterministic generator, so a failing seed can be rerun.
fn next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

/// A message as the log holds it: without the connection's `seq`.
fn event_of(message: &Value) -> Value {
    let mut event = message.clone();
    if let Some(params) = event["params"].as_object_mut() {
        params.remove("seq");
    }
    event
}

/// The ranges `thread/eventsLost` voided, among `messages`.
fn lost_ranges(messages: &[Value]) -> Vec<(u64, u64)> {
    messages
        .iter()
        .filter(|m| method_of(m) == "thread/eventsLost")
        .map(|m| {
            let params = &m["params"];
            (
                params["fromSeq"].as_u64().unwrap(),
                params["toSeq"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn delta_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap())
        .collect()
}

/// One crash at the point `seed` picks, checked.
async fn crash_and_resume(seed: u64) {
    let mut state = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let words: Vec<String> = (0..DELTAS).map(|n| format!("w{n} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let gate = Gate::new();
    gate.open();
    let model = ScriptedServer::with_responses([paced_message_response(
        "r1",
        &words,
        &gate,
        &[],
        Duration::from_micros(500),
    )])
    .await
    .unwrap();
    let home = Home::new();
    let args = ["--listen", "ws://127.0.0.1:0"];
    let mut server = Server::start(&home, &model.url(), &args, 1).await;
    let mut client = ws_open(&server.addr("ws"), json!({"spool": {"seq": true}})).await;
    let thread_id = thread_id_of(&client.call(1, "thread/start", json!({})).await);
    let input = json!({"threadId": thread_id, "input": [{"type": "text", "text": "go"}]});
    client.call(2, "turn/start", input).await;

    // Kill at a seeded point of the stream, then read what was already on
    // its way: every message the client gets before the socket closes.
    let kill_after = 1 + (next(&mut state) as usize % (DELTAS - 100));
    while delta_text(&client.seen).len() < kill_after * 3 {
        let message = client.next_message().await;
        client.seen.push(message);
    }
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    while let Some(message) = client.next().await {
        client.seen.push(message);
    }
    let before = std::mem::take(&mut client.seen);
    let last_seq = before
        .iter()
        .filter_map(|m| m["params"]["seq"].as_u64())
        .max()
        .expect("seqs were sent");

    // Restart on the same store and resume from the last seq seen.
    let server = Server::start(&home, &model.url(), &args, 1).await;
    let mut resumed = ws_open(&server.addr("ws"), json!({"spool": {"seq": true}})).await;
    let reply = resumed
        .call(
            1,
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": last_seq}),
        )
        .await;
    assert!(reply["result"]["thread"].is_object(), "{reply}");
    let completed = resumed.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(
        completed["params"]["turn"]["status"], "interrupted",
        "seed {seed}"
    );
    let after = std::mem::take(&mut resumed.seen);
    let resumed_seqs: Vec<u64> = after
        .iter()
        .filter_map(|m| m["params"]["seq"].as_u64())
        .collect();
    assert!(
        resumed_seqs.iter().all(|&s| s > last_seq) && resumed_seqs.is_sorted(),
        "seed {seed}: only what came after the cursor, in order: {resumed_seqs:?}"
    );

    // The whole log, read back: no seq the client saw names another event.
    let mut log_reader = ws_open(&server.addr("ws"), json!({"spool": {"seq": true}})).await;
    log_reader
        .call(
            1,
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 0}),
        )
        .await;
    log_reader.until(|m| method_of(m) == "turn/completed").await;
    let log: BTreeMap<u64, Value> = log_reader
        .seen
        .iter()
        .filter_map(|m| Some((m["params"]["seq"].as_u64()?, event_of(m))))
        .collect();
    let lost = lost_ranges(&after);
    let voided = |seq: u64| lost.iter().any(|&(from, to)| (from..=to).contains(&seq));
    let mut lost_deltas = 0;
    for message in &before {
        let Some(seq) = message["params"]["seq"].as_u64() else {
            continue;
        };
        if voided(seq) {
            assert!(
                !log.contains_key(&seq),
                "seed {seed}: voided seq {seq} is in the log"
            );
            lost_deltas += 1;
            continue;
        }
        assert_eq!(
            log.get(&seq),
            Some(&event_of(message)),
            "seed {seed}: seq {seq} names another event after the crash"
        );
    }
    if lost_deltas > 0 {
        assert_eq!(lost.len(), 1, "seed {seed}: one voided range: {lost:?}");
    }

    // What was committed is a prefix of what the client saw, and seen
    // minus what was voided plus what came after is exactly it.
    let committed = after
        .iter()
        .chain(log_reader.seen.iter())
        .find(|m| method_of(m) == "item/completed")
        .and_then(|m| m["params"]["item"]["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    let saw = delta_text(&before) + &delta_text(&after);
    assert!(
        saw.starts_with(&committed),
        "seed {seed}: committed {} chars, not a prefix of the {} seen",
        committed.len(),
        saw.len()
    );
    let kept: Vec<Value> = before
        .iter()
        .filter(|m| m["params"]["seq"].as_u64().is_some_and(|s| !voided(s)))
        .cloned()
        .collect();
    assert_eq!(
        delta_text(&kept) + &delta_text(&after),
        committed,
        "seed {seed}"
    );
    eprintln!(
        "seed {seed}: killed after {kill_after} deltas; saw up to seq {last_seq}; \
         {lost_deltas} seen seqs voided by {lost:?}; committed {} chars",
        committed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_never_reuses_a_seq_the_client_saw() {
    for seed in 0..5 {
        crash_and_resume(seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: cargo nextest run --run-ignored only -E 'test(sigkill_soak)'"]
async fn sigkill_soak() {
    for seed in 100..120 {
        crash_and_resume(seed).await;
    }
}
