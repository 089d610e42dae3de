//! `spool serve`'s guarantees end to end (the real binary, a scripted
//! model server): an approval declined, a client tool answered by the
//! client, a WebSocket client that drops mid-stream and resumes with
//! `afterSeq`, two clients on one thread, a pending approval surviving
//! `kill -9` and a restart, and malformed input of every kind.

mod serve_net;
mod support;

use std::collections::HashSet;

use serde_json::{Value, json};
use serve_net::{Server, ws_open};
use spool_testkit::responses_api::{calls_response, message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

fn text_input(thread_id: &str, text: &str) -> Value {
    json!({"threadId": thread_id, "input": [{"type": "text", "text": text}]})
}

fn deltas(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| method_of(m) == "item/agentMessage/delta")
        .collect()
}

/// The completed agent message's text.
fn completed_text(messages: &[Value]) -> String {
    messages
        .iter()
        .find(|m| method_of(m) == "item/completed" && m["params"]["item"]["type"] == "agentMessage")
        .and_then(|m| m["params"]["item"]["text"].as_str())
        .unwrap_or_else(|| panic!("no completed agent message: {messages:#?}"))
        .to_owned()
}

/// The function call output the model was sent for `call_id`.
fn call_output(request: &Value, call_id: &str) -> Value {
    request["input"]
        .as_array()
        .unwrap_or_else(|| panic!("no input: {request}"))
        .iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
        .unwrap_or_else(|| panic!("no output of {call_id}: {request:#}"))["output"]
        .clone()
}

#[tokio::test]
async fn a_declined_approval_does_not_run_the_command_and_the_turn_completes() {
    let model = model_touching("declined.txt", "Understood.").await;
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = client.approval_thread().await;
    client
        .call(2, "turn/start", text_input(&thread_id, "make a file"))
        .await;
    let request = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "decline"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert!(
        !home.path().join("declined.txt").exists(),
        "a declined command never runs"
    );
    let item = client
        .seen
        .iter()
        .find(|m| {
            method_of(m) == "item/completed" && m["params"]["item"]["type"] == "commandExecution"
        })
        .unwrap_or_else(|| panic!("no completed command item: {:#?}", client.seen));
    assert_eq!(item["params"]["item"]["status"], "declined", "{item}");
    assert_eq!(
        client
            .seen
            .iter()
            .filter(|m| method_of(m) == "serverRequest/resolved")
            .count(),
        1
    );
    // The model heard about the refusal and answered.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let output = call_output(&requests[1].body, "call_1");
    assert!(!output.is_null(), "{output}");
    assert_eq!(completed_text(&client.seen), "Understood.");
    client.close().await;
}

#[tokio::test]
async fn a_client_tool_is_called_through_the_client_and_its_answer_reaches_the_model() {
    let model = ScriptedServer::with_responses([
        calls_response("r1", &[("call_7", "lookup", json!({"key": "answer"}))]),
        message_response("r2", &["It is 42."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let started = client
        .call(
            1,
            "thread/start",
            json!({"dynamicTools": [{
                "name": "lookup",
                "description": "Looks a key up in the client's table.",
                "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}},
                                "required": ["key"]}
            }]}),
        )
        .await;
    let thread_id = thread_id_of(&started);
    client
        .call(
            2,
            "turn/start",
            text_input(&thread_id, "what is the answer?"),
        )
        .await;
    let call = client.until(|m| method_of(m) == "item/tool/call").await;
    assert_eq!(call["params"]["tool"], "lookup", "{call}");
    assert_eq!(call["params"]["arguments"], json!({"key": "answer"}));
    assert_eq!(call["params"]["callId"], "call_7");
    assert_eq!(call["params"]["threadId"], thread_id.as_str());
    client
        .send(json!({"jsonrpc": "2.0", "id": call["id"], "result": {
            "contentItems": [{"type": "inputText", "text": "answer = 42"}],
            "success": true
        }}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    let item = client
        .seen
        .iter()
        .find(|m| {
            method_of(m) == "item/completed" && m["params"]["item"]["type"] == "dynamicToolCall"
        })
        .unwrap_or_else(|| panic!("no completed client tool item: {:#?}", client.seen));
    assert_eq!(item["params"]["item"]["status"], "completed", "{item}");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0].body["tools"].to_string();
    assert!(tools.contains("lookup"), "the model is offered it: {tools}");
    let output = call_output(&requests[1].body, "call_7");
    assert!(
        output.to_string().contains("answer = 42"),
        "the client's answer goes to the model: {output}"
    );
    assert_eq!(completed_text(&client.seen), "It is 42.");
    client.close().await;
}

#[tokio::test]
async fn a_client_dropped_mid_stream_resumes_after_its_last_seq_without_gap_or_duplicate() {
    let gate = Gate::new();
    let before = ["Once ", "upon ", "a "];
    let after = [
        "time ", "there ", "was ", "a ", "server ", "that ", "kept ", "going.",
    ];
    let model = ScriptedServer::with_responses([paced_message_response(
        "r1",
        &before,
        &gate,
        &after,
        std::time::Duration::from_millis(15),
    )])
    .await
    .unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "ws://127.0.0.1:0"], 1).await;
    let addr = server.addr("ws");

    let mut first = ws_open(&addr, json!({"spool": {"seq": true}})).await;
    let thread_id = thread_id_of(&first.call(1, "thread/start", json!({})).await);
    first
        .call(2, "turn/start", text_input(&thread_id, "tell me a story"))
        .await;
    while deltas(&first.seen).len() < before.len() {
        let message = first.next_message().await;
        first.seen.push(message);
    }
    let last_seq = first
        .seen
        .iter()
        .filter_map(|m| m["params"]["seq"].as_u64())
        .max()
        .expect("opted in to seq");
    let received = std::mem::take(&mut first.seen);
    drop(first);
    // The rest streams while nobody is connected (and after).
    gate.open();

    let mut second = ws_open(&addr, json!({"spool": {"seq": true}})).await;
    let resumed = second
        .call(
            1,
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": last_seq}),
        )
        .await;
    assert!(resumed["result"]["thread"].is_object(), "{resumed}");
    second.until(|m| method_of(m) == "turn/completed").await;

    let all: Vec<Value> = received.iter().chain(&second.seen).cloned().collect();
    let streamed: String = deltas(&all)
        .iter()
        .map(|m| m["params"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, completed_text(&all));
    assert_eq!(streamed, before.concat() + &after.concat());
    let seqs: Vec<u64> = all
        .iter()
        .filter_map(|m| m["params"]["seq"].as_u64())
        .collect();
    let unique: HashSet<u64> = seqs.iter().copied().collect();
    assert_eq!(unique.len(), seqs.len(), "no seq twice: {seqs:?}");
    let resumed_seqs: Vec<u64> = second
        .seen
        .iter()
        .filter_map(|m| m["params"]["seq"].as_u64())
        .collect();
    let end = *resumed_seqs.last().unwrap();
    assert_eq!(
        resumed_seqs,
        (last_seq + 1..=end).collect::<Vec<_>>(),
        "exactly the missing events, in order"
    );
}

#[tokio::test]
async fn two_clients_on_one_thread_receive_identical_sequences() {
    let model = ScriptedServer::with_responses([message_response(
        "r1",
        &["Same ", "for ", "every", "one."],
    )])
    .await
    .unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "ws://127.0.0.1:0"], 1).await;
    let addr = server.addr("ws");
    let mut a = ws_open(&addr, json!({"spool": {"seq": true}})).await;
    let mut b = ws_open(&addr, json!({"spool": {"seq": true}})).await;
    let thread_id = thread_id_of(&a.call(1, "thread/start", json!({})).await);
    b.call(1, "thread/resume", json!({"threadId": thread_id}))
        .await;
    a.call(2, "turn/start", text_input(&thread_id, "hi")).await;
    a.until(|m| method_of(m) == "turn/completed").await;
    b.until(|m| method_of(m) == "turn/completed").await;

    let sequence = |seen: &[Value]| -> Vec<(String, u64)> {
        let start = seen
            .iter()
            .position(|m| method_of(m) == "turn/started")
            .expect("the turn started");
        seen[start..]
            .iter()
            .map(|m| {
                (
                    method_of(m).to_owned(),
                    m["params"]["seq"].as_u64().unwrap_or_else(|| panic!("{m}")),
                )
            })
            .collect()
    };
    let of_a = sequence(&a.seen);
    assert_eq!(of_a, sequence(&b.seen));
    assert!(
        of_a.iter()
            .filter(|(m, _)| m == "item/agentMessage/delta")
            .count()
            == 4,
        "{of_a:?}"
    );
    assert_eq!(completed_text(&b.seen), "Same for everyone.");
}

#[tokio::test]
async fn a_pending_approval_survives_kill_9_and_a_restart() {
    let model = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[(
                "call_1",
                "shell",
                // Leaving the sandbox is what asks under on-request.
                json!({"command": ["sh", "-c", "echo ran >> ran.txt"],
                       "sandbox_permissions": "require_escalated"}),
            )],
        ),
        message_response("r2", &["Ran it."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let settings = approval_settings();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    client.initialize(json!({})).await;
    let thread_id = thread_id_of(&client.call(1, "thread/start", settings.clone()).await);
    client
        .call(2, "turn/start", text_input(&thread_id, "run it"))
        .await;
    let asked = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    // SIGKILL: no shutdown, no flush.
    client.child.start_kill().unwrap();
    let status = client.child.wait().await.unwrap();
    assert!(!status.success(), "{status}");
    drop(client);
    assert!(!home.path().join("ran.txt").exists());

    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    client.initialize(json!({})).await;
    let mut resume = settings.clone();
    resume["threadId"] = json!(thread_id);
    let resumed = client.call(1, "thread/resume", resume).await;
    assert!(resumed["result"]["thread"].is_object(), "{resumed}");
    let again = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    assert_eq!(again["id"], asked["id"], "the same request");
    assert_eq!(again["params"], asked["params"]);
    client
        .send(json!({"jsonrpc": "2.0", "id": again["id"], "result": {"decision": "accept"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(home.path().join("ran.txt")).unwrap(),
        "ran\n",
        "the command ran once"
    );
    assert_eq!(
        client
            .seen
            .iter()
            .filter(|m| method_of(m) == "item/commandExecution/requestApproval")
            .count(),
        1,
        "asked once after the restart: {:#?}",
        client.seen
    );
    assert_eq!(completed_text(&client.seen), "Ran it.");
    client.close().await;
}

#[tokio::test]
async fn every_malformed_input_gets_its_error_and_the_server_keeps_serving() {
    let home = Home::new();
    let mut client = Client::start(&home, "http://127.0.0.1:9/v1", &[]);
    let error_of = |reply: &Value| reply["error"]["code"].as_i64().unwrap_or(0);

    // Before initialize.
    let early = client.call(1, "thread/start", json!({})).await;
    assert_eq!(error_of(&early), -32600, "{early}");
    assert_eq!(early["error"]["message"], "Not initialized");
    // A client of spool's additions gets an error (`"id": null`) even for
    // what has no readable id; a Codex client gets silence (`e2e_serve`).
    client.initialize(json!({"spool": {"seq": true}})).await;

    // Not JSON.
    client.send_raw("this is not json").await;
    let parse = client.next().await;
    assert_eq!(error_of(&parse), -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null);
    // JSON, but no request.
    client.send_raw("[1, 2, 3]").await;
    let not_request = client.next().await;
    assert_eq!(error_of(&not_request), -32600, "{not_request}");
    client.send_raw(r#"{"jsonrpc": "2.0", "id": 2}"#).await;
    let no_method = client.next().await;
    assert!(
        [-32600, -32700].contains(&error_of(&no_method)),
        "{no_method}"
    );
    // Unknown method.
    let unknown = client.call(3, "thread/teleport", json!({})).await;
    assert_eq!(error_of(&unknown), -32601, "{unknown}");
    // Wrong types.
    let wrong = client
        .call(4, "turn/start", json!({"threadId": 5, "input": "hi"}))
        .await;
    assert_eq!(error_of(&wrong), -32602, "{wrong}");
    let wrong_policy = client
        .call(5, "thread/start", json!({"approvalPolicy": 7}))
        .await;
    assert_eq!(error_of(&wrong_policy), -32602, "{wrong_policy}");
    let not_object = client.call(6, "thread/read", json!([1, 2])).await;
    assert_eq!(error_of(&not_object), -32602, "{not_object}");
    // Missing fields.
    let missing = client.call(7, "turn/start", json!({"input": []})).await;
    assert_eq!(error_of(&missing), -32602, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("threadId"),
        "{missing}"
    );
    let no_params = client.call(8, "thread/resume", Value::Null).await;
    assert_eq!(error_of(&no_params), -32602, "{no_params}");
    // A huge message: refused as too large, not held or parsed.
    let filler = "a".repeat(17 << 20);
    client
        .send_raw(&format!(
            r#"{{"jsonrpc": "2.0", "id": 9, "method": "thread/list", "params": {{"x": "{filler}"}}}}"#
        ))
        .await;
    let huge = client.next().await;
    assert_eq!(
        error_of(&huge),
        -32600,
        "{}",
        &huge.to_string()[..200.min(huge.to_string().len())]
    );
    assert!(
        huge["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too large"),
        "{huge}"
    );

    // Bytes that are not UTF-8 spoil their line, not the connection: a
    // request with one inside a string is still served (as U+FFFD), and a
    // line of nothing else is not JSON.
    use tokio::io::AsyncWriteExt;
    let mut bad =
        br#"{"jsonrpc": "2.0", "id": 12, "method": "thread/list", "params": {"x": ""#.to_vec();
    bad.extend_from_slice(b"\xff\xfe\"}}\n\xc3\x28\n");
    client.stdin.write_all(&bad).await.unwrap();
    client.stdin.flush().await.unwrap();
    let lossy = client.next().await;
    assert_eq!(lossy["id"], 12, "{lossy}");
    assert!(lossy["result"]["data"].is_array(), "{lossy}");
    let garbage = client.next().await;
    assert_eq!(error_of(&garbage), -32700, "{garbage}");

    // Still serving, in order, after all of that.
    let list = client.call(10, "thread/list", json!({})).await;
    assert!(list["result"]["data"].is_array(), "{list}");
    let started = client.call(11, "thread/start", json!({})).await;
    assert!(started["result"]["thread"]["id"].is_string(), "{started}");
    client.close().await;
}
