//! A command dies with the server that started it: `kill -9` of
//! `spool serve` while a command runs (and has a child of its own in the
//! background) leaves nothing running, so neither finishes its side
//! effects — inside the sandbox and outside it.

mod support;

use std::time::Duration;

use serde_json::json;
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::Home;
use support::peer::Peer;
use support::rpc::{Client, method_of, thread_id_of};

async fn killed_mid_command(sandbox: &str) {
    let script =
        "touch started.txt; (sleep 2; touch background.txt) & sleep 2; touch foreground.txt";
    let model = ScriptedServer::with_responses([
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
    .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
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
    // Let the command and its background child start, then kill -9.
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.child.start_kill().unwrap();
    client.child.wait().await.unwrap();
    assert!(home.path().join("started.txt").exists(), "the command ran");
    tokio::time::sleep(Duration::from_secs(4)).await;
    for file in ["foreground.txt", "background.txt"] {
        assert!(
            !home.path().join(file).exists(),
            "{sandbox}: {file} was written after the server died"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_dies_with_the_server() {
    killed_mid_command("workspace-write").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfined_command_dies_with_the_server() {
    killed_mid_command("danger-full-access").await;
}
