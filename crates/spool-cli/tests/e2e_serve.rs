//! `spool serve` over stdio as a Codex app-server client drives it: the
//! handshake rules, error codes, a streamed turn with exactly one
//! `turn/completed`, an approval answered by the client, a resume by
//! cursor in a new server process without gaps or duplicates, and a client
//! that stops reading while a reply fills the pipe.

mod support;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

#[tokio::test]
async fn handshake_rules_and_error_codes() {
    let home = Home::new();
    let mut client = Client::start(&home, "http://127.0.0.1:9/v1", &[]);
    let early = client.call(1, "thread/list", json!({})).await;
    assert_eq!(early["error"]["code"], -32600);
    assert_eq!(early["error"]["message"], "Not initialized");

    let init = client.initialize(json!({})).await;
    assert!(
        init["result"]["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("spool/")
    );
    assert!(
        init["result"].get("spool").is_none(),
        "no opt-in, no spool fields"
    );
    let again = client
        .call(
            2,
            "initialize",
            json!({"clientInfo": {"name": "x", "version": "1"}}),
        )
        .await;
    assert_eq!(again["error"]["message"], "Already initialized");

    let unknown = client.call(3, "thread/teleport", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = client.call(4, "turn/start", json!({"input": []})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("threadId"),
        "{bad}"
    );

    // A line whose id cannot be read: a Codex client has no use for an
    // `"id": null` error (its `RequestId` has none), so it gets none.
    client.send_raw("{not json").await;

    // Still serving after all of that, and the next message is this reply.
    client
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "thread/list", "params": {}}))
        .await;
    let list = client.next().await;
    assert_eq!(list["id"], 5, "nothing came before it: {list}");
    assert!(list["result"]["data"].is_array(), "{list}");
    client.close().await;
}

#[tokio::test]
async fn a_turn_streams_and_completes_once_and_a_cursor_resume_has_no_gap_or_duplicate() {
    let model = ScriptedServer::with_responses([message_response("r1", &["Hello", " there."])])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let started = client.call(1, "thread/start", json!({})).await;
    let thread_id = thread_id_of(&started);
    let turn = client
        .call(
            2,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(turn["result"]["turn"]["status"], "inProgress", "{turn}");
    client.until(|m| method_of(m) == "turn/completed").await;
    let methods: Vec<&str> = client.seen.iter().map(method_of).collect();
    assert!(methods.contains(&"thread/started"), "{methods:?}");
    assert!(methods.contains(&"turn/started"), "{methods:?}");
    assert_eq!(
        methods.iter().filter(|m| **m == "turn/completed").count(),
        1
    );
    let text: String = client
        .seen
        .iter()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "Hello there.");
    // A Codex client that did not opt in sees no spool additions.
    assert!(
        client
            .seen
            .iter()
            .all(|m| m["params"].get("envelope").is_none() && m["params"].get("seq").is_none()),
        "{:?}",
        client.seen
    );
    client.close().await;

    // A new server process; a client that opted in to cursors resumes
    // after seq 3 and gets every later event once, in order.
    let mut client = Client::start(&home, &model.url(), &[]);
    let init = client.initialize(json!({"spool": {"seq": true}})).await;
    assert_eq!(init["result"]["spool"]["seq"], true, "{init}");
    let resumed = client
        .call(
            1,
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 3}),
        )
        .await;
    assert!(resumed["result"]["thread"]["turns"].is_array(), "{resumed}");
    let last = client.until(|m| method_of(m) == "turn/completed").await;
    let seqs: Vec<u64> = client
        .seen
        .iter()
        .filter_map(|m| m["params"]["seq"].as_u64())
        .collect();
    let expected: Vec<u64> = (4..=last["params"]["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs, expected,
        "every event after the cursor, once, in order"
    );
    client.close().await;
}

#[tokio::test]
async fn an_approval_is_asked_of_the_client_and_its_answer_runs_the_command() {
    let model = model_touching("approved.txt", "Done.").await;
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = client.approval_thread().await;
    client
        .call(
            2,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "make a file"}]}),
        )
        .await;
    let request = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    assert_eq!(
        request["params"]["command"], "touch approved.txt",
        "{request}"
    );
    assert!(
        !home.path().join("approved.txt").exists(),
        "not before the answer"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "accept"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert!(home.path().join("approved.txt").exists());
    let resolved: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| method_of(m) == "serverRequest/resolved")
        .collect();
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["params"]["requestId"], request["id"]);
    client.close().await;
}

/// Standard output is written by a thread of its own, a batch at a time: a
/// client that stops reading while a long reply streams (the pipe full, the
/// thread blocked in its write, batches queuing behind it), then reads
/// again, gets every message whole, once and in order, and the server still
/// answers afterwards.
#[tokio::test]
async fn a_client_that_stops_reading_gets_every_message_once_in_order() {
    // ~3,000 deltas of ~200 bytes on the wire each: ten times what a pipe
    // holds (64 KiB).
    let deltas: Vec<String> = (0..3_000)
        .map(|i| format!("{i:05}{}", "x".repeat(59)))
        .collect();
    let parts: Vec<&str> = deltas.iter().map(String::as_str).collect();
    let model = ScriptedServer::with_responses([message_response("r1", &parts)])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let thread_id = thread_id_of(&client.call(1, "thread/start", json!({})).await);
    let input = json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]});
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "turn/start", "params": input}))
        .await;
    // Not reading while the whole reply is written: the pipe fills.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    client.until(|m| method_of(m) == "turn/completed").await;
    let streamed: Vec<&str> = client
        .seen
        .iter()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .map(|m| m["params"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed.len(), parts.len(), "every delta once");
    assert!(streamed == parts, "in order");
    let reply = client
        .seen
        .iter()
        .find(|m| m["id"] == 2)
        .expect("turn/start answered");
    assert_eq!(reply["result"]["turn"]["status"], "inProgress", "{reply}");
    let read = client
        .call(
            3,
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let items = read["result"]["thread"]["turns"][0]["items"]
        .as_array()
        .unwrap();
    let text = items.iter().find(|i| i["type"] == "agentMessage").unwrap()["text"].clone();
    assert_eq!(text, json!(parts.concat()));
    client.close().await;
}
