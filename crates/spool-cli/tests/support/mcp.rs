//! Helpers of the MCP end-to-end tests: the test MCP server (built beside
//! `spool`), a configuration naming it, turns, and the items they leave.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::Home;
use super::peer::Peer;
use super::rpc::{Client, method_of, thread_id_of};

/// The test MCP server, built beside `spool` (`cargo nextest run
/// --workspace` builds every binary of the workspace).
pub fn test_server() -> PathBuf {
    let spool = PathBuf::from(env!("CARGO_BIN_EXE_spool"));
    let server = spool.with_file_name("spool-mcp-test-server");
    assert!(
        server.exists(),
        "{} is not built: run the tests with --workspace, or `cargo build -p spool-mcp`",
        server.display()
    );
    server
}

/// A Codex-shaped client on `spool serve` for `home`, initialized.
pub async fn open(home: &Home, model_url: &str) -> Client {
    let mut client = Client::start(home, model_url, &[]);
    client.initialize(json!({})).await;
    client
}

/// Waits for a `turn/completed` and checks the turn completed.
pub async fn turn_completed(client: &mut Client) {
    let done = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
}

/// `tools` and `other` run the same server (the same tool names);
/// `fragile` is where the crash happens, so it ends no other server's
/// calls.
pub fn configure(home: &Home) {
    let server = test_server();
    let server = server.display();
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            r#"
[mcp_servers.tools]
command = "{server}"
tool_timeout_sec = 1

[mcp_servers.other]
command = "{server}"

[mcp_servers.fragile]
command = "{server}"
"#
        ),
    )
    .unwrap();
}

/// Starts a thread with `policy` and a turn; returns the thread id.
pub async fn turn(client: &mut Client, id: i64, thread: Option<&str>, policy: &str) -> String {
    let thread_id = match thread {
        Some(thread) => thread.to_owned(),
        None => {
            let started = client
                .call(id, "thread/start", json!({"approvalPolicy": policy}))
                .await;
            thread_id_of(&started)
        }
    };
    client
        .call(
            id + 1,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "use the tools"}]}),
        )
        .await;
    thread_id
}

/// The completed `mcpToolCall` item of `server`/`tool`.
pub fn completed<'a>(seen: &'a [Value], server: &str, tool: &str) -> &'a Value {
    seen.iter()
        .filter(|m| method_of(m) == "item/completed")
        .map(|m| &m["params"]["item"])
        .find(|item| {
            item["type"] == "mcpToolCall" && item["server"] == server && item["tool"] == tool
        })
        .unwrap_or_else(|| panic!("no completed {server}/{tool} call"))
}

/// The output the model was given for `call_id` in `body`.
pub fn output_for(body: &Value, call_id: &str) -> String {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call_output" && item["call_id"] == call_id)
        .and_then(|item| item["output"].as_str())
        .unwrap_or_else(|| panic!("no output for {call_id} in {body}"))
        .to_owned()
}
