//! Two `spool serve` processes on one PostgreSQL (`scripts/postgres.sh`),
//! a client on each: what one server runs, a client of the other follows
//! live, every event once and in order.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use spool_testkit::postgres::TestDatabase;
use spool_testkit::responses_api::{message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

/// Servers A and B on `db`, each in a home of its own (kept while the
/// servers run), with a client on each that opted in to seqs.
async fn two_servers(db: &TestDatabase, model_url: &str) -> (Client, Client, (Home, Home)) {
    let homes = (Home::new(), Home::new());
    let store = ["--store", db.url()];
    let mut a = Client::start(&homes.0, model_url, &store);
    let mut b = Client::start(&homes.1, model_url, &store);
    a.initialize(json!({"spool": {"seq": true}})).await;
    b.initialize(json!({"spool": {"seq": true}})).await;
    (a, b, homes)
}

/// The events a client got, by seq; a seq twice fails.
fn by_seq(seen: &[Value]) -> BTreeMap<u64, Value> {
    let mut events = BTreeMap::new();
    for message in seen {
        if let Some(seq) = message["params"]["seq"].as_u64() {
            assert!(
                events.insert(seq, message.clone()).is_none(),
                "seq {seq} delivered twice"
            );
        }
    }
    events
}

#[tokio::test]
async fn a_client_on_b_streams_a_turn_run_by_a_and_gets_exactly_its_events() {
    let db = TestDatabase::create();
    let gate = Gate::new();
    let model = ScriptedServer::with_responses([paced_message_response(
        "resp_1",
        &["Hel", "lo "],
        &gate,
        &["from ", "server ", "A."],
        Duration::from_millis(20),
    )])
    .await
    .unwrap();
    let (mut a, mut b, _homes) = two_servers(&db, &model.url()).await;

    let thread_id = thread_id_of(&a.call(1, "thread/start", json!({})).await);
    a.call(
        2,
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]}),
    )
    .await;
    // Mid-stream (the model waits at the gate), B's client joins.
    a.until(|m| method_of(m) == "item/agentMessage/delta").await;
    let resumed = b
        .call(
            1,
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 0}),
        )
        .await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    gate.open();
    let done_a = a.until(|m| method_of(m) == "turn/completed").await;
    let done_b = b.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(done_a["params"]["seq"], done_b["params"]["seq"]);

    let (seen_a, seen_b) = (by_seq(&a.seen), by_seq(&b.seen));
    let last = done_b["params"]["seq"].as_u64().unwrap();
    assert_eq!(
        seen_b.keys().copied().collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>(),
        "B gets every event, once, in order"
    );
    for (seq, event) in &seen_a {
        assert_eq!(seen_b.get(seq), Some(event), "seq {seq}: B got what A sent");
    }
    let text: String = seen_b
        .values()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "Hello from server A.");
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn when_a_is_killed_mid_turn_b_takes_the_thread_over_and_runs_the_next_turn() {
    let db = TestDatabase::create();
    // A's turn never ends by itself: its model waits at a gate nobody opens.
    let gate = Gate::new();
    let model = ScriptedServer::with_responses([
        paced_message_response(
            "resp_1",
            &["Half ", "an "],
            &gate,
            &["answer"],
            Duration::from_millis(20),
        ),
        message_response("resp_2", &["B ", "answers."]),
    ])
    .await
    .unwrap();
    let (mut a, mut b, _homes) = two_servers(&db, &model.url()).await;
    let thread_id = thread_id_of(&a.call(1, "thread/start", json!({})).await);
    a.call(
        2,
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]}),
    )
    .await;
    b.call(
        1,
        "thread/resume",
        json!({"threadId": thread_id, "afterSeq": 0}),
    )
    .await;
    b.until(|m| method_of(m) == "item/agentMessage/delta").await;

    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    let killed = Instant::now();
    let done = b.until(|m| method_of(m) == "turn/completed").await;
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(10), "taken over after {took:?}");
    assert_eq!(done["params"]["turn"]["status"], "interrupted", "{done}");
    let seen = by_seq(&b.seen);
    let last = done["params"]["seq"].as_u64().unwrap();
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>(),
        "every committed event once, in order"
    );
    let incomplete = seen
        .values()
        .find(|m| method_of(m) == "item/completed" && m["params"]["item"]["type"] == "agentMessage")
        .expect("the message A was streaming is closed");
    // It holds what A committed of it: the deltas B was sent.
    let streamed: String = seen
        .values()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert!(!streamed.is_empty());
    assert_eq!(incomplete["params"]["item"]["text"], streamed.as_str());

    // B holds the thread now: a new turn runs there.
    b.call(
        2,
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "again"}]}),
    )
    .await;
    let second = b
        .until(|m| method_of(m) == "turn/completed" && m["params"]["seq"].as_u64() > Some(last))
        .await;
    assert_eq!(second["params"]["turn"]["status"], "completed", "{second}");
    b.close().await;
}

#[tokio::test]
async fn a_holder_paused_past_its_lease_cannot_append_after_the_takeover() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let db = TestDatabase::create();
    let gate = Gate::new();
    let model = ScriptedServer::with_responses([paced_message_response(
        "resp_1",
        &["Before "],
        &gate,
        &["after ", "the ", "pause."],
        Duration::from_millis(20),
    )])
    .await
    .unwrap();
    let (mut a, mut b, _homes) = two_servers(&db, &model.url()).await;
    let thread_id = thread_id_of(&a.call(1, "thread/start", json!({})).await);
    a.call(
        2,
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]}),
    )
    .await;
    a.until(|m| method_of(m) == "item/agentMessage/delta").await;
    b.call(
        1,
        "thread/resume",
        json!({"threadId": thread_id, "afterSeq": 0}),
    )
    .await;

    // A stops (cut off, or paused by the OS) past its lease; B takes over.
    let pid = Pid::from_raw(a.child.id().unwrap() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let done = b.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(done["params"]["turn"]["status"], "interrupted");
    let last = done["params"]["seq"].as_u64().unwrap();

    // A resumes and its model goes on streaming: none of it is stored.
    kill(pid, Signal::SIGCONT).unwrap();
    gate.open();
    let ended = a
        .until(|m| method_of(m) == "turn/completed" || m.get("error").is_some())
        .await;
    let stored = db
        .query(&format!(
            "SELECT max(seq) FROM events WHERE thread_id = '{thread_id}'"
        ))
        .unwrap();
    assert_eq!(
        stored,
        last.to_string(),
        "A appended after the takeover: {ended}"
    );
    let text: String = by_seq(&b.seen)
        .values()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert!(!text.contains("pause"), "{text}");
    b.close().await;
}

#[tokio::test]
async fn a_turn_started_through_b_on_a_thread_a_holds_runs_on_a_and_b_answers() {
    let db = TestDatabase::create();
    let model = ScriptedServer::with_responses([
        message_response("resp_1", &["First."]),
        message_response("resp_2", &["Second, ", "run by A."]),
    ])
    .await
    .unwrap();
    let (mut a, mut b, _homes) = two_servers(&db, &model.url()).await;
    let thread_id = thread_id_of(&a.call(1, "thread/start", json!({})).await);
    a.call(
        2,
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "one"}]}),
    )
    .await;
    a.until(|m| method_of(m) == "turn/completed").await;
    let holder = db
        .query(&format!(
            "SELECT holder FROM thread_leases WHERE thread_id = '{thread_id}'"
        ))
        .unwrap();

    b.call(
        1,
        "thread/resume",
        json!({"threadId": thread_id, "afterSeq": 0}),
    )
    .await;
    let started = b
        .call(
            2,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "two"}]}),
        )
        .await;
    let turn_id = started["result"]["turn"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("B answered turn/start: {started}"))
        .to_owned();
    // A ran it (its client sees it live), and B's client follows it.
    let done_a = a
        .until(|m| method_of(m) == "turn/completed" && m["params"]["turn"]["id"] == turn_id)
        .await;
    let done_b = b
        .until(|m| method_of(m) == "turn/completed" && m["params"]["turn"]["id"] == turn_id)
        .await;
    assert_eq!(done_a["params"]["turn"]["status"], "completed");
    assert_eq!(done_a["params"]["seq"], done_b["params"]["seq"]);
    assert_eq!(
        db.query(&format!(
            "SELECT holder FROM thread_leases WHERE thread_id = '{thread_id}'"
        ))
        .unwrap(),
        holder,
        "the thread stayed with A"
    );
    assert_eq!(
        db.query("SELECT count(*) FROM commands WHERE done_at IS NOT NULL")
            .unwrap(),
        "1",
        "one command, done"
    );
    let text: String = by_seq(&b.seen)
        .values()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "First.Second, run by A.");
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn an_approval_asked_on_a_killed_server_is_answered_on_b_and_the_tool_runs_once() {
    let db = TestDatabase::create();
    let model = model_touching("approved.txt", "Done.").await;
    let (home_a, home_b) = (Home::new(), Home::new());
    let args = ["--store", db.url(), "--tools", "shell"];
    let mut a = Client::start(&home_a, &model.url(), &args);
    let thread_id = a.approval_thread().await;
    a.call(
        2,
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": "make a file"}]}),
    )
    .await;
    a.until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();

    // B's client gets the open request with the thread, and answers it at
    // once: B forwards the answer to the thread's holder; A is dead, so
    // once its lease runs out the answer runs where the thread is taken
    // over (B), which resumes the paused turn.
    let mut b = Client::start(&home_b, &model.url(), &args);
    b.initialize(json!({})).await;
    b.call(1, "thread/resume", json!({"threadId": thread_id}))
        .await;
    let request = b
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    b.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "accept"}}))
        .await;
    // The answer waits for the thread's holder (here, for A's lease to run
    // out) off B's connection, which answers its client's next request at
    // once: before the approval is resolved.
    b.send(json!({"jsonrpc": "2.0", "id": 3, "method": "thread/read", "params": {"threadId": thread_id}}))
        .await;
    let first = b
        .until(|m| {
            (m["id"] == 3 && m.get("method").is_none()) || method_of(m) == "serverRequest/resolved"
        })
        .await;
    assert_eq!(first["id"], 3, "B's client waited for the answer: {first}");
    let done = b.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");

    let ran = db
        .query(&format!(
            "SELECT count(*) FROM events WHERE thread_id = '{thread_id}' \
             AND method IN ('item/completed', 'item/recorded') \
             AND payload LIKE '%\"type\":\"commandExecution\"%'"
        ))
        .unwrap();
    assert_eq!(ran, "1", "the command ran once");
    assert!(
        home_a.path().join("approved.txt").exists() || home_b.path().join("approved.txt").exists(),
        "the command ran"
    );
    b.close().await;
}

#[tokio::test]
async fn a_command_row_for_anything_but_a_forwarded_request_is_refused() {
    let db = TestDatabase::create();
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let (mut a, _b, _homes) = two_servers(&db, &model.url()).await;
    let thread_id = thread_id_of(&a.call(1, "thread/start", json!({})).await);
    // Rows whoever can write the database might insert: a request servers
    // never forward, and a rename whose thread is not the row's.
    for (id, method, params) in [
        ("c1", "thread/start", json!({})),
        (
            "c2",
            "thread/name/set",
            json!({"threadId": "another", "name": "x"}),
        ),
    ] {
        db.query(&format!(
            "INSERT INTO commands (id, thread_id, method, params, from_server) \
             VALUES ('{id}', '{thread_id}', '{method}', '{params}', 'nobody')"
        ))
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let errors = loop {
        let errors = db
            .query("SELECT string_agg(error, ' | ' ORDER BY id) FROM commands WHERE done_at IS NOT NULL")
            .unwrap();
        if errors.matches("not a request servers forward").count() == 2 {
            break errors;
        }
        assert!(
            Instant::now() < deadline,
            "not both refused in 10 s: {errors}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(errors.contains("thread/start"), "{errors}");
    let threads = db.query("SELECT count(*) FROM threads").unwrap();
    assert_eq!(threads, "1", "no thread was started by the row");
}
