//! The kernel sandbox driven by a client of `spool serve`: `on-failure`
//! asks after a denial and re-runs the command outside the sandbox once
//! accepted, and a `turn/start` `sandboxPolicy` carries its extra writable
//! roots and network access down to the commands.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

/// A folder outside the workspace and outside /tmp (writable under
/// workspace-write).
fn outside_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("outside-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// A model that runs each script with `sh -c`, in one response, then says
/// "Done.".
async fn model_running(scripts: &[&str]) -> ScriptedServer {
    let calls: Vec<(String, Value)> = scripts
        .iter()
        .enumerate()
        .map(|(i, script)| (format!("c{i}"), json!({"command": ["sh", "-c", script]})))
        .collect();
    let borrowed: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "shell", args.clone()))
        .collect();
    ScriptedServer::with_responses([
        calls_response("r1", &borrowed),
        message_response("r2", &["Done."]),
    ])
    .await
    .unwrap()
}

fn command_items(client: &Client) -> Vec<Value> {
    client
        .seen
        .iter()
        .filter(|m| method_of(m) == "item/completed")
        .map(|m| m["params"]["item"].clone())
        .filter(|item| item["type"] == "commandExecution")
        .collect()
}

/// `on-failure` is spool's addition (Codex 0.163.0 dropped it), so a client
/// asking for it opts into spool's additions.
async fn start_thread(client: &mut Client, settings: Value) -> String {
    let capabilities = if settings["approvalPolicy"] == "on-failure" {
        json!({"spool": {"seq": true}})
    } else {
        json!({})
    };
    client.initialize(capabilities).await;
    let started = client.call(1, "thread/start", settings).await;
    thread_id_of(&started)
}

async fn start_turn(client: &mut Client, thread_id: &str, extra: Value) {
    let mut params = json!({"threadId": thread_id, "input": [{"type": "text", "text": "go"}]});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let reply = client.call(2, "turn/start", params).await;
    assert!(reply.get("result").is_some(), "{reply}");
}

#[tokio::test]
async fn on_failure_asks_after_a_denial_and_reruns_outside_once_accepted() {
    let home = Home::new();
    let outside = outside_dir();
    let target = outside.path().join("out.txt");
    let model = model_running(&[&format!("echo x > {}", target.display())]).await;
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = start_thread(
        &mut client,
        json!({"approvalPolicy": "on-failure", "sandbox": "workspace-write"}),
    )
    .await;
    start_turn(&mut client, &thread_id, json!({})).await;

    let request = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    let reason = request["params"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the sandbox (workspace-write) denied this command")
            && reason.contains("run it again outside the sandbox?"),
        "the person is told why: {request:#}"
    );
    assert!(
        !target.exists(),
        "the kernel stopped the first run: {request:#}"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "accept"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "x\n",
        "the accepted re-run ran outside the sandbox"
    );
    let items = command_items(&client);
    let last = items.last().expect("a command item");
    assert_eq!(last["status"], "completed", "{items:#?}");
    client.close().await;
}

#[tokio::test]
async fn on_failure_declined_leaves_the_denial_standing() {
    let home = Home::new();
    let outside = outside_dir();
    let target = outside.path().join("out.txt");
    let model = model_running(&[&format!("echo x > {}", target.display())]).await;
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = start_thread(
        &mut client,
        json!({"approvalPolicy": "on-failure", "sandbox": "workspace-write"}),
    )
    .await;
    start_turn(&mut client, &thread_id, json!({})).await;
    let request = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "decline"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert!(!target.exists());
    let items = command_items(&client);
    assert!(
        items.iter().all(|item| item["status"] != "completed"),
        "{items:#?}"
    );
    client.close().await;
}

fn python_connect(port: u16) -> String {
    format!("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"")
}

#[tokio::test]
async fn a_turn_sandbox_policy_adds_writable_roots_and_the_network() {
    let home = Home::new();
    let extra = outside_dir();
    let other = outside_dir();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let write = |dir: &Path| format!("echo x > {}/f.txt", dir.display());
    let model = model_running(&[
        &write(extra.path()),
        &write(other.path()),
        &python_connect(port),
    ])
    .await;
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = start_thread(
        &mut client,
        json!({"approvalPolicy": "never", "sandbox": "workspace-write"}),
    )
    .await;
    let policy = json!({"sandboxPolicy": {
        "type": "workspaceWrite",
        "writableRoots": [extra.path()],
        "networkAccess": true,
    }});
    start_turn(&mut client, &thread_id, policy).await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");

    let items = command_items(&client);
    assert_eq!(items.len(), 3, "{items:#?}");
    // Calls of one response may finish in any order: find each by command.
    let item_of = |needle: &str| {
        items
            .iter()
            .find(|item| item["command"].as_str().unwrap_or("").contains(needle))
            .unwrap_or_else(|| panic!("no command with {needle}: {items:#?}"))
            .clone()
    };
    let in_extra = item_of(&extra.path().display().to_string());
    let in_other = item_of(&other.path().display().to_string());
    let connect = item_of("socket");
    assert_eq!(in_extra["status"], "completed", "{in_extra:#}");
    assert!(extra.path().join("f.txt").exists());
    assert_eq!(in_other["status"], "failed", "{in_other:#}");
    assert!(!other.path().join("f.txt").exists(), "only the named root");
    let denial = in_other["aggregatedOutput"].as_str().unwrap_or_default();
    assert!(
        denial.contains(&extra.path().display().to_string()),
        "the denial names the roots it may write: {denial}"
    );
    assert_eq!(connect["status"], "completed", "{connect:#}");
    assert!(listener.accept().is_ok(), "the connection was made");
    client.close().await;
}

#[tokio::test]
async fn without_network_access_the_same_connection_is_stopped_at_the_kernel() {
    let home = Home::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let model = model_running(&[&python_connect(port)]).await;
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = start_thread(
        &mut client,
        json!({"approvalPolicy": "never", "sandbox": "workspace-write"}),
    )
    .await;
    start_turn(&mut client, &thread_id, json!({})).await;
    client.until(|m| method_of(m) == "turn/completed").await;
    let items = command_items(&client);
    assert_eq!(items[0]["status"], "failed", "{items:#?}");
    assert!(listener.accept().is_err(), "no connection was made");
    client.close().await;
}
