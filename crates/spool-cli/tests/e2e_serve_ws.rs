//! `spool serve --listen ws://…` as a WebSocket client drives it: probes,
//! the handshake and a streamed turn (exact notification order), several
//! listeners at once, bad listen URLs, refusing a non-loopback listener
//! without a token, and SIGTERM during a turn.

mod serve_net;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use serve_net::{Server, Sse, Upgrade, WebSocket, http};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::*;

fn method_of(message: &Value) -> &str {
    message["method"].as_str().unwrap_or("")
}

async fn open(addr: &str) -> WebSocket {
    match WebSocket::connect(addr, "/", &[]).await {
        Upgrade::Open(ws) => ws,
        Upgrade::Refused(r) => panic!("upgrade refused: {} {}", r.status, r.body),
    }
}

#[tokio::test]
async fn a_turn_over_websocket_streams_in_order_and_the_probes_answer() {
    let model = ScriptedServer::with_responses([message_response("r1", &["Hello", " there."])])
        .await
        .unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "ws://127.0.0.1:0"], 1).await;
    let addr = server.addr("ws");
    assert!(!addr.ends_with(":0"), "the real port is printed: {addr}");
    let health = http(&addr, "GET", "/healthz", &[], None).await;
    assert_eq!(health.status, 200);
    assert_eq!(http(&addr, "GET", "/readyz", &[], None).await.status, 200);

    let mut ws = open(&addr).await;
    let init = ws
        .call(
            0,
            "initialize",
            json!({"clientInfo": {"name": "test", "version": "1"}}),
        )
        .await;
    assert!(
        init["result"]["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("spool/")
    );
    ws.send(&json!({"jsonrpc": "2.0", "method": "initialized"}))
        .await;
    let started = ws.call(1, "thread/start", json!({})).await;
    let thread_id = started["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let turn = ws
        .call(
            2,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(turn["result"]["turn"]["status"], "inProgress", "{turn}");
    while !ws.seen.iter().any(|m| method_of(m) == "turn/completed") {
        let message = ws.next().await.expect("the turn completes");
        ws.seen.push(message);
    }
    let methods: Vec<&str> = ws.seen.iter().map(method_of).collect();
    assert_eq!(
        methods,
        [
            "thread/started",
            "turn/started",
            "thread/status/changed",
            "item/started",
            "item/completed",
            "item/started",
            "item/agentMessage/delta",
            "item/agentMessage/delta",
            "item/completed",
            "thread/tokenUsage/updated",
            "turn/completed",
        ],
        "{:#?}",
        ws.seen
    );
    let completed = ws.seen.last().unwrap();
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    // The thread goes idle after its turn, as Codex announces.
    let idle = ws.next().await.expect("the status follows");
    assert_eq!(method_of(&idle), "thread/status/changed", "{idle}");
    assert_eq!(idle["params"]["status"], json!({"type": "idle"}));
    // A WebSocket client that did not opt in sees no spool additions.
    assert!(ws.seen.iter().all(|m| m["params"].get("seq").is_none()));
}

#[tokio::test]
async fn several_listeners_at_once_and_bad_urls_are_refused_clearly() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let server = Server::start(
        &home,
        &model.url(),
        &[
            "--listen",
            "ws://127.0.0.1:0",
            "--listen",
            "http://127.0.0.1:0",
        ],
        2,
    )
    .await;
    let ws_addr = server.addr("ws");
    let http_addr = server.addr("http");
    assert_eq!(
        http(&ws_addr, "GET", "/healthz", &[], None).await.status,
        200
    );
    let list = http(&http_addr, "GET", "/v1/threads", &[], None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    // WebSocket on the HTTP listener's /ws too.
    let Upgrade::Open(mut ws) = WebSocket::connect(&http_addr, "/ws", &[]).await else {
        panic!("/ws upgrades");
    };
    let early = ws.call(1, "thread/list", json!({})).await;
    assert_eq!(early["error"]["message"], "Not initialized");

    for (url, says) in [
        ("ftp://127.0.0.1:1", "unknown scheme"),
        ("ws://127.0.0.1", "no port"),
        ("http://127.0.0.1:99999", "port"),
        ("ws://127.0.0.1:0/path", "only HOST:PORT"),
        ("127.0.0.1:0", "no scheme"),
    ] {
        let out = home.spool(&model.url(), &["serve", "--listen", url]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url}");
        assert!(
            stderr.contains("invalid listen URL") && stderr.contains(says),
            "{url}: {stderr}"
        );
    }
    let out = home
        .spool(&model.url(), &["serve", "--listen", "ws://0.0.0.0:0"])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("not a loopback address and no auth token"),
        "{stderr}"
    );
}

#[tokio::test]
async fn sigterm_during_a_turn_interrupts_it_once_and_exits_zero() {
    let slow = message_response("r1", &["one ", "two ", "three ", "four ", "five ", "six "])
        .chunk_delay(Duration::from_millis(700));
    let model = ScriptedServer::with_responses([slow]).await.unwrap();
    let home = Home::new();
    let mut server =
        Server::start(&home, &model.url(), &["--listen", "http://127.0.0.1:0"], 1).await;
    let addr = server.addr("http");
    let thread = http(&addr, "POST", "/v1/threads", &[], Some(&json!({})))
        .await
        .json();
    let thread_id = thread["thread"]["id"].as_str().unwrap().to_owned();
    let mut sse = Sse::open(
        &addr,
        "POST",
        &format!("/v1/threads/{thread_id}/turns"),
        &[],
        Some(&json!({"input": [{"type": "text", "text": "count"}]})),
    )
    .await;
    assert_eq!(sse.body.status, 200);
    sse.until(|e| e.event == "item/agentMessage/delta").await;
    let status = server.terminate().await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
    // The stream got the interruption before it closed.
    let mut rest = Vec::new();
    while let Some(event) = sse.next().await {
        rest.push(event);
    }
    let completed: Vec<_> = rest
        .iter()
        .filter(|e| e.event == "turn/completed")
        .collect();
    assert_eq!(completed.len(), 1, "{rest:#?}");
    assert_eq!(completed[0].data["params"]["turn"]["status"], "interrupted");

    // The log has exactly one turn/completed, interrupted.
    let out = home
        .spool(&model.url(), &["threads", "events", &thread_id])
        .await;
    assert!(out.status.success());
    let log: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ends: Vec<&Value> = log
        .iter()
        .filter(|e| e["method"] == "turn/completed")
        .collect();
    assert_eq!(ends.len(), 1, "{log:#?}");
    assert_eq!(ends[0]["params"]["turn"]["status"], "interrupted");
}

#[tokio::test]
async fn binary_frames_are_read_as_text_and_a_bad_one_does_not_stop_the_connection() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "ws://127.0.0.1:0"], 1).await;
    let mut ws = open(&server.addr("ws")).await;
    ws.call(
        0,
        "initialize",
        json!({"clientInfo": {"name": "test", "version": "1"}}),
    )
    .await;
    // Not UTF-8, so not JSON: no readable id, so a Codex client gets no
    // reply (none would fit its schema), and the connection stays.
    ws.send_binary(b"\xff\xfe\xfd").await;
    // A request in a binary frame is served like one in a text frame, and
    // its reply is the next message.
    ws.send_binary(br#"{"jsonrpc": "2.0", "id": 7, "method": "thread/list", "params": {}}"#)
        .await;
    let listed = ws.next().await.expect("a reply");
    assert_eq!(listed["id"], 7, "{listed}");
    assert!(listed["result"]["data"].is_array(), "{listed}");
}
