//! `spool serve --listen http://…` as an HTTP client drives it: threads,
//! a turn answered with its SSE stream, event streams resumed with
//! `Last-Event-ID` without gap or duplicate, items in a view, an approval
//! answered over HTTP, JSON errors, the OpenAPI document, and auth.

mod serve_net;
mod support;

use serde_json::json;
use serve_net::{Server, Sse, SseEvent, Upgrade, WebSocket, http, new_thread, start_turn};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::*;

fn text_of(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.event == "item/agentMessage/delta")
        .map(|e| e.data["params"]["delta"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn threads_a_turn_as_sse_and_resumable_event_streams() {
    let model = ScriptedServer::with_responses([
        message_response("r1", &["Hello", " there."]),
        message_response("r2", &["Second", " turn."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "http://127.0.0.1:0"], 1).await;
    let addr = server.addr("http");

    let thread_id = new_thread(&addr, json!({})).await;
    let list = http(&addr, "GET", "/v1/threads?limit=10", &[], None)
        .await
        .json();
    assert_eq!(list["data"][0]["id"], thread_id, "{list}");
    let read = http(&addr, "GET", &format!("/v1/threads/{thread_id}"), &[], None).await;
    assert_eq!(read.json()["thread"]["id"], thread_id);
    let missing = http(&addr, "GET", "/v1/threads/nope", &[], None).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "not_found");
    let bad = http(&addr, "GET", "/v1/threads?limit=many", &[], None).await;
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"]["message"].is_string());
    // Bodies are read as the method's params, and say which when they
    // do not fit; replies are JSON, as the method wrote them.
    let content_type = |response: &serve_net::Response| {
        response
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .map(|(_, value)| value.clone())
    };
    assert_eq!(content_type(&read).as_deref(), Some("application/json"));
    let bad_start = http(
        &addr,
        "POST",
        "/v1/threads",
        &[],
        Some(&json!({"model": 5})),
    )
    .await;
    assert_eq!(bad_start.status, 400, "{}", bad_start.body);
    let message = bad_start.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("thread/start"), "{message}");
    let path = format!("/v1/threads/{thread_id}/turns");
    let bad_turn = http(&addr, "POST", &path, &[], Some(&json!({"input": "hi"}))).await;
    assert_eq!(bad_turn.status, 400, "{}", bad_turn.body);
    let message = bad_turn.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("turn/start"), "{message}");

    // A turn: its response is the SSE stream, turn/started to turn/completed.
    let mut sse = start_turn(&addr, &thread_id, "hi").await;
    let mut first = Vec::new();
    while let Some(event) = sse.next().await {
        first.push(event);
    }
    assert_eq!(first[0].event, "turn/started");
    assert_eq!(first.last().unwrap().event, "turn/completed");
    assert_eq!(
        first.last().unwrap().data["params"]["turn"]["status"],
        "completed"
    );
    assert_eq!(text_of(&first), "Hello there.");
    for event in &first {
        assert_eq!(event.data["method"], event.event);
        assert_eq!(event.data["params"]["seq"].as_u64(), event.id, "{event:?}");
    }
    let ids: Vec<u64> = first.iter().filter_map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    let last = *ids.last().unwrap();

    // Resume from Last-Event-ID: exactly the events after it, then live.
    let cursor = ids[2];
    let path = format!("/v1/threads/{thread_id}/events");
    let cursor_text = cursor.to_string();
    let mut events = Sse::open(
        &addr,
        "GET",
        &path,
        &[("Last-Event-ID", &cursor_text)],
        None,
    )
    .await;
    let replayed = events.until(|e| e.id == Some(last)).await;
    let replayed_ids: Vec<u64> = replayed.iter().filter_map(|e| e.id).collect();
    assert_eq!(replayed_ids, ((cursor + 1)..=last).collect::<Vec<_>>());
    // The same stream carries the next turn live, with no gap.
    let mut second = start_turn(&addr, &thread_id, "again").await;
    let second_events = second.until(|e| e.event == "turn/completed").await;
    let live = events.until(|e| e.event == "turn/completed").await;
    let mut live_ids: Vec<u64> = live.iter().filter_map(|e| e.id).collect();
    assert_eq!(live_ids[0], last + 1, "no gap after the replay");
    // The first turn's `thread/status/changed` (idle) came after its
    // `turn/completed`: in the thread's stream, not the second turn's.
    assert_eq!(live[0].event, "thread/status/changed");
    live_ids.remove(0);
    assert!(
        live_ids.windows(2).all(|w| w[1] == w[0] + 1),
        "{live_ids:?}"
    );
    assert_eq!(text_of(&live), "Second turn.");
    assert_eq!(
        live_ids,
        second_events
            .iter()
            .filter_map(|e| e.id)
            .collect::<Vec<_>>()
    );
    // `?after=` works the same.
    let mut after = Sse::open(&addr, "GET", &format!("{path}?after={last}"), &[], None).await;
    let again = after.until(|e| e.event == "turn/completed").await;
    assert_eq!(
        again
            .iter()
            .filter_map(|e| e.id)
            .skip(1)
            .collect::<Vec<_>>(),
        live_ids
    );

    // Items in a view.
    let items = http(
        &addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=client"),
        &[],
        None,
    )
    .await;
    let items = items.json();
    assert!(items["data"].as_array().unwrap().len() >= 4, "{items}");
    let llm = http(
        &addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=llm&tokens=100000"),
        &[],
        None,
    )
    .await
    .json();
    assert_eq!(llm["view"], "llm");
    assert!(llm["totalTokens"].as_u64().unwrap() > 0, "{llm}");
    let wrong = http(
        &addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=mine"),
        &[],
        None,
    )
    .await;
    assert_eq!(wrong.status, 400);
    // No turn runs: interrupting one is a conflict. A POST is JSON even
    // with nothing to say.
    let interrupt = http(
        &addr,
        "POST",
        &format!("/v1/threads/{thread_id}/turns/t1/interrupt"),
        &[],
        Some(&json!({})),
    )
    .await;
    assert_eq!(interrupt.status, 409, "{}", interrupt.body);
}

#[tokio::test]
async fn an_approval_is_answered_over_http() {
    let model = model_touching("approved.txt", "Done.").await;
    let home = Home::new();
    let server = Server::start(
        &home,
        &model.url(),
        &["--listen", "http://127.0.0.1:0", "--tools", "shell"],
        1,
    )
    .await;
    let addr = server.addr("http");
    let thread_id = new_thread(&addr, approval_settings()).await;
    let mut sse = start_turn(&addr, &thread_id, "make a file").await;
    let asked = sse
        .until(|e| e.event == "item/commandExecution/requestApproval")
        .await;
    let request = &asked.last().unwrap().data;
    assert_eq!(
        request["params"]["command"], "touch approved.txt",
        "{request}"
    );
    let request_id = request["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/threads/{thread_id}/requests/{request_id}");
    let unknown = http(
        &addr,
        "POST",
        &format!("/v1/threads/{thread_id}/requests/nope"),
        &[],
        Some(&json!({"decision": "accept"})),
    )
    .await;
    assert_eq!(unknown.status, 404);
    let wrong_shape = http(&addr, "POST", &path, &[], Some(&json!({"decision": 7}))).await;
    assert_eq!(wrong_shape.status, 400, "{}", wrong_shape.body);
    assert!(!home.path().join("approved.txt").exists());
    let answered = http(
        &addr,
        "POST",
        &path,
        &[],
        Some(&json!({"decision": "accept"})),
    )
    .await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    let rest = sse.until(|e| e.event == "turn/completed").await;
    assert_eq!(
        rest.last().unwrap().data["params"]["turn"]["status"],
        "completed"
    );
    assert!(rest.iter().any(|e| e.event == "serverRequest/resolved"));
    assert!(home.path().join("approved.txt").exists());
    let again = http(
        &addr,
        "POST",
        &path,
        &[],
        Some(&json!({"decision": "accept"})),
    )
    .await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(again.json()["error"]["code"], "already_answered");
}

#[tokio::test]
async fn a_non_loopback_listener_needs_the_bearer_token() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "t0ps3cret-token\n").unwrap();
    let server = Server::start(
        &home,
        &model.url(),
        &[
            "--listen",
            "http://0.0.0.0:0",
            "--listen",
            "ws://0.0.0.0:0",
            "--auth-token-file",
            token_file.to_str().unwrap(),
        ],
        2,
    )
    .await;
    let addr = server.addr("http");
    let right = [("Authorization", "Bearer t0ps3cret-token")];
    let wrong = [("Authorization", "Bearer t0ps3cret-tokem")];
    let none = http(&addr, "GET", "/v1/threads", &[], None).await;
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["error"]["code"], "unauthorized");
    assert_eq!(
        http(&addr, "GET", "/v1/threads", &wrong, None).await.status,
        401
    );
    assert_eq!(
        http(&addr, "GET", "/v1/threads", &right, None).await.status,
        200
    );
    assert_eq!(http(&addr, "GET", "/healthz", &[], None).await.status, 200);
    let refused = http(&addr, "POST", "/v1/threads", &[], Some(&json!({}))).await;
    assert_eq!(refused.status, 401);

    let ws_addr = server.addr("ws");
    for headers in [&[][..], &wrong[..]] {
        match WebSocket::connect(&ws_addr, "/", headers).await {
            Upgrade::Refused(response) => assert_eq!(response.status, 401),
            Upgrade::Open(_) => panic!("upgraded without the token"),
        }
    }
    let Upgrade::Open(mut ws) = WebSocket::connect(&ws_addr, "/", &right).await else {
        panic!("the right token upgrades");
    };
    ws.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "t", "version": "1"}}}))
        .await;
    let reply = ws.next().await.unwrap();
    assert!(reply["result"]["userAgent"].is_string(), "{reply}");
    assert!(!server.stderr_text().contains("t0ps3cret"));
}

#[tokio::test]
async fn the_openapi_document_is_served_and_every_documented_route_exists() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "http://127.0.0.1:0"], 1).await;
    let addr = server.addr("http");
    let served = http(&addr, "GET", "/v1/openapi.json", &[], None)
        .await
        .json();
    assert_eq!(served, spool_server::openapi::openapi());
    let nowhere = http(&addr, "GET", "/v1/nowhere", &[], None).await;
    assert_eq!(nowhere.json()["error"]["message"], "no such route");
    for (method, path) in spool_server::openapi::routes() {
        let path = path.replace('{', "x").replace('}', "");
        let response = http(&addr, &method.to_uppercase(), &path, &[], Some(&json!({}))).await;
        assert!(
            response.status != 405 && !response.body.contains("no such route"),
            "{method} {path}: {} {}",
            response.status,
            response.body
        );
    }
}
