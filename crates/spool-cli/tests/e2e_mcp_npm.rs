//! A real third-party MCP server from a registry in a turn: the reference
//! filesystem server (`@modelcontextprotocol/server-filesystem` from npm,
//! run with `npx --offline` from the cache `scripts/codex-peers.sh`
//! installs) lists a temporary directory for a scripted model over
//! `spool serve`. Without it the test fails and says how to install it,
//! unless SPOOL_SKIP_PEERS=1.

mod support;

use std::path::{Path, PathBuf};

use serde_json::json;
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::mcp::{open, turn_completed};
use support::rpc::{method_of, thread_id_of};
use support::*;

/// The npm prefix holding the server, from `scripts/codex-peers.sh`.
fn npm_prefix() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new("bash")
        .arg(repo.join("scripts/codex-peers.sh"))
        .arg("npm-prefix")
        .current_dir(&repo)
        .output()
        .ok()?;
    let printed = String::from_utf8_lossy(&out.stdout);
    let prefix = PathBuf::from(printed.lines().last()?.trim());
    let bin = prefix.join("node_modules/.bin/mcp-server-filesystem");
    (out.status.success() && bin.exists()).then_some(prefix)
}

#[tokio::test]
async fn the_reference_filesystem_server_lists_a_directory_in_a_turn() {
    let Some(prefix) = npm_prefix() else {
        if std::env::var("SPOOL_SKIP_PEERS").is_ok_and(|v| v == "1") {
            eprintln!("skipped: SPOOL_SKIP_PEERS=1 and the MCP filesystem server is missing");
            return;
        }
        panic!("the MCP filesystem server is not installed: run `scripts/codex-peers.sh install`");
    };
    let home = Home::new();
    let shared = home.path().join("shared");
    std::fs::create_dir_all(shared.join("notes")).unwrap();
    std::fs::write(shared.join("todo.txt"), "water the plants\n").unwrap();
    // As a user would declare it, with npx from a local cache (no network).
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            "[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"--offline\", \"--prefix\", \"{}\", \
             \"mcp-server-filesystem\", \"{}\"]\nstartup_timeout_sec = 60\n",
            prefix.display(),
            shared.display()
        ),
    )
    .unwrap();
    let model = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[(
                "c_list",
                "mcp__fs__list_directory",
                json!({"path": shared.display().to_string()}),
            )],
        ),
        message_response("r2", &["There is a todo list and a notes folder."]),
    ])
    .await
    .unwrap();
    let mut client = open(&home, &model.url()).await;
    let started = client
        .call(1, "thread/start", json!({"approvalPolicy": "never"}))
        .await;
    let thread = thread_id_of(&started);
    client
        .call(
            2,
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "what is shared?"}]}),
        )
        .await;
    turn_completed(&mut client).await;

    let offered = model.requests()[0].body["tools"].to_string();
    assert!(offered.contains("mcp__fs__read_text_file"), "{offered}");
    let item = client
        .until(|m| method_of(m) == "item/completed" && m["params"]["item"]["type"] == "mcpToolCall")
        .await;
    let item = &item["params"]["item"];
    assert_eq!(item["server"], "fs");
    assert_eq!(item["tool"], "list_directory");
    assert_eq!(item["status"], "completed", "{item}");
    let listing = item["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        listing.contains("[FILE] todo.txt") && listing.contains("[DIR] notes"),
        "{listing}"
    );
    // The model got the listing as the call's output.
    let second = model.requests()[1].body["input"].to_string();
    assert!(second.contains("[FILE] todo.txt"), "{second}");
    client.close().await;
}
