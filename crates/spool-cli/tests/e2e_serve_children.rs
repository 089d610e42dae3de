//! A command dies with the server that started it: `kill -9` of
//! `spool serve` while a command runs (and has a child of its own in the
//! background) leaves nothing running, so neither finishes its side
//! effects — inside the sandbox and outside it. And if the helper that
//! kills it could not act, the restarted server's crash recovery kills the
//! group it recorded.

mod support;

use std::time::Duration;

use serde_json::json;
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::Home;
use support::peer::Peer;
use support::rpc::{Client, method_of, thread_id_of};

/// The model's one call: a command that writes `started.txt`, then, 2 s
/// later, `foreground.txt`, and has a background child that writes
/// `background.txt` 2 s later too.
async fn model_running_a_slow_command() -> ScriptedServer {
    let script =
        "touch started.txt; (sleep 2; touch background.txt) & sleep 2; touch foreground.txt";
    ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[(
                "call_1",
                "shell",
                json!({"command": ["sh", "-c", script], "timeout_ms": 30000}),
            )],
        ),
        message_response("r2", &["done"]),
    ])
    .await
    .unwrap()
}

/// Starts a server whose model runs the slow command under `sandbox`, and
/// waits until the command started.
async fn command_running(home: &Home, model: &ScriptedServer, sandbox: &str) -> Client {
    let mut client = Client::start(home, &model.url(), &["--tools", "shell"]);
    client.initialize(json!({})).await;
    let settings = json!({"approvalPolicy": "never", "sandbox": sandbox});
    let thread_id = thread_id_of(&client.call(1, "thread/start", settings).await);
    let input = json!({"threadId": thread_id, "input": [{"type": "text", "text": "run"}]});
    client.call(2, "turn/start", input).await;
    client
        .until(|m| {
            method_of(m) == "item/started" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    // Let the command and its background child start.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(home.path().join("started.txt").exists(), "the command ran");
    client
}

fn assert_nothing_written_after(home: &Home, case: &str) {
    for file in ["foreground.txt", "background.txt"] {
        assert!(
            !home.path().join(file).exists(),
            "{case}: {file} was written after the server died"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_kills_a_group_the_helper_could_not() {
    let model = model_running_a_slow_command().await;
    let home = Home::new();
    let mut client = command_running(&home, &model, "workspace-write").await;
    // The group on record: the helper leads it.
    let pgid: i64 = rusqlite::Connection::open(home.db())
        .unwrap()
        .query_row("SELECT pgid FROM running_processes", [], |row| row.get(0))
        .expect("the running command is on record");
    // The helper dies first (it can no longer kill the group), then the
    // server: the command and its background child run on, orphaned.
    let killed = tokio::process::Command::new("kill")
        .args(["-KILL", &pgid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    client.child.start_kill().unwrap();
    client.child.wait().await.unwrap();
    // The restart recovers: it kills the recorded group before closing the
    // item, well before the command's 2 s are up.
    let mut restarted = Client::start(&home, &model.url(), &["--tools", "shell"]);
    restarted.initialize(json!({})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_nothing_written_after(&home, "helper killed first");
    let left: i64 = rusqlite::Connection::open(home.db())
        .unwrap()
        .query_row("SELECT count(*) FROM running_processes", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(left, 0, "recovery forgets what it killed");
    restarted.close().await;
}

async fn killed_mid_command(sandbox: &str) {
    let model = model_running_a_slow_command().await;
    let home = Home::new();
    let mut client = command_running(&home, &model, sandbox).await;
    client.child.start_kill().unwrap();
    client.child.wait().await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_nothing_written_after(&home, sandbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_dies_with_the_server() {
    killed_mid_command("workspace-write").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfined_command_dies_with_the_server() {
    killed_mid_command("danger-full-access").await;
}
