//! An MCP server over streamable HTTP in a turn: the test MCP server in
//! its HTTP mode, requiring a bearer token that spool reads from the
//! variable the section names; a scripted model calls its tools over
//! `spool serve`, and the token is nowhere in the thread's record.

mod support;

use std::process::Stdio;

use serde_json::json;
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::mcp::*;
use support::rpc::{Client, method_of};
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

const TOKEN: &str = "s3cret-mcp-token-7f1c";

#[tokio::test]
async fn a_turn_calls_the_tools_of_an_http_server_with_its_token() {
    let mut server = tokio::process::Command::new(test_server())
        .args(["--http", "127.0.0.1:0", "--require-token", TOKEN])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).await.unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();

    let home = Home::new();
    std::fs::write(
        home.path().join("spool.toml"),
        format!("[mcp_servers.web]\nurl = \"{url}\"\nbearer_token_env_var = \"WEB_MCP_TOKEN\"\n"),
    )
    .unwrap();
    let model = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[
                ("c_echo", "mcp__web__echo", json!({"text": "over http"})),
                ("c_progress", "mcp__web__progress", json!({"steps": 2})),
            ],
        ),
        message_response("r2", &["Both answered."]),
    ])
    .await
    .unwrap();
    let mut client = Client::start_with_env(&home, &model.url(), &[], &[("WEB_MCP_TOKEN", TOKEN)]);
    client.initialize(json!({})).await;
    let thread = turn(&mut client, 1, None, "never").await;
    turn_completed(&mut client).await;
    let seen = client.seen.clone();
    let echo = completed(&seen, "web", "echo");
    assert_eq!(echo["result"]["content"][0]["text"], "over http", "{echo}");
    let progress = completed(&seen, "web", "progress");
    assert_eq!(progress["status"], "completed", "{progress}");
    let reports = seen
        .iter()
        .filter(|m| method_of(m) == "item/mcpToolCall/progress")
        .filter(|m| m["params"]["itemId"] == progress["id"])
        .count();
    assert_eq!(reports, 2);
    assert_eq!(output_for(&model.requests()[1].body, "c_echo"), "over http");
    client.close().await;

    // The token reached the server, and nothing else: not the log, not
    // the model.
    let (events, _) = home
        .spool_ok(&model.url(), &["threads", "events", &thread])
        .await;
    assert!(events.contains("over http"));
    assert!(!events.contains(TOKEN));
    assert!(
        model
            .requests()
            .iter()
            .all(|r| !r.body_text().contains(TOKEN))
    );
}
