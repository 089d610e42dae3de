//! Where Codex clients notice how a server behaves, spool behaves as
//! Codex's app server does: a steer reaches the running turn's model in
//! that turn; `turn/start` during a turn feeds the running turn; thread
//! status changes are announced; reverts and unarchives are announced;
//! opted-out notifications are not sent; `turn/completed` carries the
//! turn's items; oversized input is refused; a wrong turn id names the
//! running turn.

mod serve_net;
mod support;

use serde_json::{Value, json};
use serve_net::{Server, Upgrade, WebSocket};
use spool_testkit::responses_api::{message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

/// One client connection, over stdio or WebSocket: every behaviour is
/// checked over both.
struct Conn {
    inner: Inner,
    _server: Option<Server>,
}

enum Inner {
    Stdio(Box<Client>),
    Ws(Box<WebSocket>),
}

#[derive(Debug, Clone, Copy)]
enum Transport {
    Stdio,
    Ws,
}

const BOTH: [Transport; 2] = [Transport::Stdio, Transport::Ws];

impl Conn {
    async fn open(transport: Transport, home: &Home, model: &str, extra: &[&str]) -> Conn {
        match transport {
            Transport::Stdio => Conn {
                inner: Inner::Stdio(Box::new(Client::start(home, model, extra))),
                _server: None,
            },
            Transport::Ws => {
                let mut args = vec!["--listen", "ws://127.0.0.1:0"];
                args.extend_from_slice(extra);
                let server = Server::start(home, model, &args, 1).await;
                let Upgrade::Open(ws) = WebSocket::connect(&server.addr("ws"), "/", &[]).await
                else {
                    panic!("the upgrade was refused");
                };
                Conn {
                    inner: Inner::Ws(Box::new(ws)),
                    _server: Some(server),
                }
            }
        }
    }
}

impl Peer for Conn {
    async fn send_message(&mut self, message: Value) {
        match &mut self.inner {
            Inner::Stdio(client) => client.send(message).await,
            Inner::Ws(ws) => ws.send(&message).await,
        }
    }

    async fn next_message(&mut self) -> Value {
        match &mut self.inner {
            Inner::Stdio(client) => client.next().await,
            Inner::Ws(ws) => ws.next_message().await,
        }
    }

    fn seen(&mut self) -> &mut Vec<Value> {
        match &mut self.inner {
            Inner::Stdio(client) => &mut client.seen,
            Inner::Ws(ws) => &mut ws.seen,
        }
    }
}

fn text(thread_id: &str, text: &str) -> Value {
    json!({"threadId": thread_id, "input": [{"type": "text", "text": text}]})
}

/// A model whose first answer streams "Working", waits for `gate`, then
/// ends; its second answer is "Steered.".
async fn gated_model(gate: &Gate) -> ScriptedServer {
    ScriptedServer::with_responses([
        paced_message_response(
            "r1",
            &["Working"],
            gate,
            &[" on it."],
            std::time::Duration::from_millis(1),
        ),
        message_response("r2", &["Steered."]),
    ])
    .await
    .unwrap()
}

/// Starts a thread and a turn; returns the thread and turn ids once the
/// first delta arrived (the model is answering).
async fn turn_in_progress(conn: &mut Conn) -> (String, String) {
    conn.initialize(json!({})).await;
    let thread_id = thread_id_of(&conn.call(1, "thread/start", json!({})).await);
    let started = conn.call(2, "turn/start", text(&thread_id, "start")).await;
    let turn_id = started["result"]["turn"]["id"].as_str().unwrap().to_owned();
    conn.until(|m| method_of(m) == "item/agentMessage/delta")
        .await;
    (thread_id, turn_id)
}

/// The running turn's end: exactly one `turn/completed`, for `turn_id`, and
/// the model was called a second time, with `said`, in the same turn.
async fn one_more_call_in_the_same_turn(
    conn: &mut Conn,
    model: &ScriptedServer,
    turn_id: &str,
    said: &str,
) {
    let completed = conn.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["id"], turn_id);
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one more model call in the same turn");
    let second = requests[1].body_text();
    assert!(second.contains(said), "{second}");
    assert_eq!(conn.count("turn/completed"), 1);
}

#[tokio::test]
async fn a_steer_while_the_model_answers_reaches_the_model_in_the_same_turn() {
    for transport in BOTH {
        let gate = Gate::new();
        let model = gated_model(&gate).await;
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &[]).await;
        let (thread_id, turn_id) = turn_in_progress(&mut conn).await;
        let steered = conn
            .call(
                3,
                "turn/steer",
                json!({"threadId": thread_id, "expectedTurnId": turn_id,
                       "input": [{"type": "text", "text": "and mind the steer"}]}),
            )
            .await;
        assert_eq!(
            steered["result"]["turnId"],
            turn_id.as_str(),
            "{transport:?}: {steered}"
        );
        gate.open();
        one_more_call_in_the_same_turn(&mut conn, &model, &turn_id, "and mind the steer").await;
    }
}

#[tokio::test]
async fn turn_start_while_a_turn_runs_feeds_that_turn_and_answers_with_it() {
    for transport in BOTH {
        let gate = Gate::new();
        let model = gated_model(&gate).await;
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &[]).await;
        let (thread_id, turn_id) = turn_in_progress(&mut conn).await;
        let again = conn
            .call(3, "turn/start", text(&thread_id, "one more thing"))
            .await;
        assert_eq!(
            again["result"]["turn"]["id"],
            turn_id.as_str(),
            "{transport:?}: the running turn answers: {again}"
        );
        assert_eq!(again["result"]["turn"]["status"], "inProgress");
        gate.open();
        one_more_call_in_the_same_turn(&mut conn, &model, &turn_id, "one more thing").await;
        assert_eq!(conn.count("turn/started"), 1, "no second turn");
    }
}

#[tokio::test]
async fn thread_status_goes_active_waits_on_approval_and_returns_to_idle() {
    for transport in BOTH {
        let model = model_touching("status.txt", "Done.").await;
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &["--tools", "shell"]).await;
        conn.initialize(json!({})).await;
        let thread_id = thread_id_of(&conn.call(1, "thread/start", approval_settings()).await);
        conn.call(2, "turn/start", text(&thread_id, "touch it"))
            .await;
        let request = conn
            .until(|m| method_of(m) == "item/commandExecution/requestApproval")
            .await;
        conn.until(|m| {
            method_of(m) == "thread/status/changed"
                && m["params"]["status"]["activeFlags"] == json!(["waitingOnApproval"])
        })
        .await;
        conn.send_message(
            json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "accept"}}),
        )
        .await;
        conn.until(|m| method_of(m) == "turn/completed").await;
        conn.until(|m| {
            method_of(m) == "thread/status/changed" && m["params"]["status"]["type"] == "idle"
        })
        .await;
        let statuses: Vec<Value> = conn
            .seen()
            .iter()
            .filter(|m| method_of(m) == "thread/status/changed")
            .map(|m| m["params"]["status"].clone())
            .collect();
        assert_eq!(
            statuses,
            [
                json!({"type": "active", "activeFlags": []}),
                json!({"type": "active", "activeFlags": ["waitingOnApproval"]}),
                json!({"type": "active", "activeFlags": []}),
                json!({"type": "idle"}),
            ],
            "{transport:?}"
        );
    }
}

#[tokio::test]
async fn reverts_and_unarchives_are_announced_and_turn_completed_carries_the_answer() {
    for transport in BOTH {
        let model = ScriptedServer::with_responses([message_response("r1", &["The answer."])])
            .await
            .unwrap();
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &[]).await;
        conn.initialize(json!({})).await;
        let thread_id = thread_id_of(&conn.call(1, "thread/start", json!({})).await);
        let started = conn.call(2, "turn/start", text(&thread_id, "ask")).await;
        let turn_id = started["result"]["turn"]["id"].as_str().unwrap().to_owned();
        let completed = conn.until(|m| method_of(m) == "turn/completed").await;
        let turn = &completed["params"]["turn"];
        assert_eq!(turn["itemsView"], "summary", "{transport:?}: {turn}");
        assert_eq!(turn["items"][0]["type"], "agentMessage");
        assert_eq!(turn["items"][0]["text"], "The answer.");

        conn.call(3, "thread/archive", json!({"threadId": thread_id}))
            .await;
        conn.until(|m| method_of(m) == "thread/archived").await;
        conn.until(|m| {
            method_of(m) == "thread/status/changed" && m["params"]["status"]["type"] == "notLoaded"
        })
        .await;
        let unarchived = conn
            .call(4, "thread/unarchive", json!({"threadId": thread_id}))
            .await;
        assert!(unarchived.get("result").is_some(), "{unarchived}");
        conn.until(|m| {
            method_of(m) == "thread/unarchived" && m["params"]["threadId"] == thread_id.as_str()
        })
        .await;

        let reverted = conn
            .call(
                5,
                "thread/revert",
                json!({"threadId": thread_id, "beforeTurnId": turn_id}),
            )
            .await;
        assert!(reverted.get("result").is_some(), "{reverted}");
        conn.until(|m| {
            method_of(m) == "thread/reverted" && m["params"]["threadId"] == thread_id.as_str()
        })
        .await;
    }
}

#[tokio::test]
async fn opted_out_notifications_are_not_sent() {
    for transport in BOTH {
        let model = ScriptedServer::with_responses([message_response("r1", &["A ", "b."])])
            .await
            .unwrap();
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &[]).await;
        conn.initialize(json!({"optOutNotificationMethods":
            ["item/agentMessage/delta", "thread/status/changed"]}))
            .await;
        let thread_id = thread_id_of(&conn.call(1, "thread/start", json!({})).await);
        conn.call(2, "turn/start", text(&thread_id, "ask")).await;
        conn.until(|m| method_of(m) == "turn/completed").await;
        // A later reply proves nothing opted out was still on its way.
        conn.call(3, "thread/loaded/list", json!({})).await;
        assert_eq!(conn.count("item/agentMessage/delta"), 0, "{transport:?}");
        assert_eq!(conn.count("thread/status/changed"), 0, "{transport:?}");
        assert!(conn.count("item/completed") >= 2, "the rest still arrives");
    }
}

#[tokio::test]
async fn input_over_the_limit_is_refused_and_starts_nothing() {
    for transport in BOTH {
        let model = ScriptedServer::with_responses([message_response("r1", &["Fine."])])
            .await
            .unwrap();
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &[]).await;
        conn.initialize(json!({})).await;
        let thread_id = thread_id_of(&conn.call(1, "thread/start", json!({})).await);
        // Codex's default limit: 1,048,576 characters.
        let over = "é".repeat(1_048_577);
        let refused = conn.call(2, "turn/start", text(&thread_id, &over)).await;
        assert_eq!(refused["error"]["code"], -32602, "{transport:?}");
        assert_eq!(
            refused["error"]["message"],
            "the input is 1048577 characters, over this server's limit of 1048576 \
             (--max-input-chars)"
        );
        assert!(model.requests().is_empty(), "nothing reached the model");
        let at_limit = "é".repeat(1_048_576);
        let started = conn
            .call(3, "turn/start", text(&thread_id, &at_limit))
            .await;
        assert!(started.get("result").is_some(), "at the limit is fine");
        conn.until(|m| method_of(m) == "turn/completed").await;
        assert_eq!(conn.count("turn/started"), 1);
    }
}

#[tokio::test]
async fn interrupting_the_wrong_turn_names_the_running_one() {
    for transport in BOTH {
        let gate = Gate::new();
        let model = gated_model(&gate).await;
        let home = Home::new();
        let mut conn = Conn::open(transport, &home, &model.url(), &[]).await;
        let (thread_id, turn_id) = turn_in_progress(&mut conn).await;
        let wrong = conn
            .call(
                3,
                "turn/interrupt",
                json!({"threadId": thread_id, "turnId": "not-it"}),
            )
            .await;
        assert_eq!(wrong["error"]["code"], -32602, "{transport:?}");
        assert_eq!(
            wrong["error"]["message"],
            format!(
                "turn not-it is not running on thread {thread_id}; the running turn is {turn_id}"
            )
        );
        let right = conn
            .call(
                4,
                "turn/interrupt",
                json!({"threadId": thread_id, "turnId": turn_id}),
            )
            .await;
        assert!(right.get("result").is_some(), "{right}");
        let completed = conn.until(|m| method_of(m) == "turn/completed").await;
        assert_eq!(completed["params"]["turn"]["status"], "interrupted");
        gate.open();
    }
}
