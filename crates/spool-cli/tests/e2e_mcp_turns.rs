//! MCP tools in turns over `spool serve`: a scripted model calls the test
//! MCP server's tools (two servers offering the same tool names, one that
//! crashes), each call is an `mcpToolCall` item in Codex's shape (checked
//! against Codex's schema by the client), the model gets every result, and
//! calls follow the approval policy.

mod support;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::mcp::*;
use support::rpc::{method_of, thread_id_of};
use support::*;

#[tokio::test]
async fn a_turn_calls_mcp_tools_and_the_model_gets_each_result() {
    let model = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[
                ("c_echo", "mcp__tools__echo", json!({"text": "hi"})),
                ("c_other", "mcp__other__echo", json!({"text": "there"})),
                ("c_progress", "mcp__tools__progress", json!({"steps": 3})),
                ("c_fail", "mcp__tools__fail", json!({})),
                ("c_sleep", "mcp__tools__sleep", json!({"ms": 5000})),
                ("c_crash", "mcp__fragile__crash", json!({})),
            ],
        ),
        message_response("r2", &["Tools used."]),
        calls_response(
            "r3",
            &[("c_again", "mcp__fragile__echo", json!({"text": "back"}))],
        ),
        message_response("r4", &["Fragile is back."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    configure(&home);
    let mut client = open(&home, &model.url()).await;
    let thread = turn(&mut client, 1, None, "never").await;
    turn_completed(&mut client).await;

    // The model saw every tool, each server's under its own name.
    let first = &model.requests()[0].body;
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in [
        "mcp__tools__echo",
        "mcp__other__echo",
        "mcp__fragile__crash",
    ] {
        assert!(names.contains(&name), "{name} not offered: {names:?}");
    }

    let seen = client.seen.clone();
    let echo = completed(&seen, "tools", "echo");
    assert_eq!(echo["status"], "completed", "{echo}");
    assert_eq!(echo["arguments"], json!({"text": "hi"}));
    assert_eq!(echo["result"]["content"][0]["text"], "hi");
    assert!(echo["durationMs"].is_i64(), "{echo}");
    assert_eq!(echo["readOnlyHint"], true);
    let other = completed(&seen, "other", "echo");
    assert_eq!(other["result"]["content"][0]["text"], "there");

    // Progress arrives in order, on the call's item, before it completes.
    let progress = completed(&seen, "tools", "progress");
    let item_id = progress["id"].as_str().unwrap();
    let reports: Vec<(usize, &str)> = seen
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            method_of(m) == "item/mcpToolCall/progress" && m["params"]["itemId"] == item_id
        })
        .map(|(at, m)| (at, m["params"]["message"].as_str().unwrap()))
        .collect();
    let messages: Vec<&str> = reports.iter().map(|(_, m)| *m).collect();
    assert_eq!(messages, ["step 1 (1/3)", "step 2 (2/3)", "step 3 (3/3)"]);
    let completed_at = seen
        .iter()
        .position(|m| method_of(m) == "item/completed" && m["params"]["item"]["id"] == item_id)
        .unwrap();
    assert!(reports.iter().all(|(at, _)| *at < completed_at));

    let fail = completed(&seen, "tools", "fail");
    assert_eq!(fail["status"], "failed");
    assert_eq!(fail["error"]["message"], "this tool always fails");
    assert_eq!(
        fail["result"]["content"][0]["text"],
        "this tool always fails"
    );
    let sleep = completed(&seen, "tools", "sleep");
    assert_eq!(sleep["status"], "failed");
    let message = sleep["error"]["message"].as_str().unwrap();
    assert!(message.contains("tool_timeout_sec"), "{message}");
    let crash = completed(&seen, "fragile", "crash");
    assert_eq!(crash["status"], "failed");
    let message = crash["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("crashing in the middle of a call"),
        "the server's last words are in the error: {message}"
    );

    // The model was told each outcome.
    let second = &model.requests()[1].body;
    assert_eq!(output_for(second, "c_echo"), "hi");
    assert_eq!(output_for(second, "c_other"), "there");
    assert_eq!(output_for(second, "c_progress"), "done");
    assert!(output_for(second, "c_fail").contains("this tool always fails"));
    assert!(output_for(second, "c_sleep").contains("tool_timeout_sec"));

    // The crashed server starts again on its next call.
    client.seen.clear();
    turn(&mut client, 3, Some(&thread), "never").await;
    turn_completed(&mut client).await;
    let seen = client.seen.clone();
    let again = completed(&seen, "fragile", "echo");
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(again["result"]["content"][0]["text"], "back");
    assert_eq!(model.remaining(), 0);
    client.close().await;
}

#[tokio::test]
async fn mcp_calls_follow_the_approval_policy() {
    let model = ScriptedServer::with_responses([
        // Under on-request: echo is read-only (runs), fail may destroy
        // (asked; declined), progress says nothing (asked; accepted for
        // the session).
        calls_response(
            "r1",
            &[
                ("c_echo", "mcp__tools__echo", json!({"text": "hi"})),
                ("c_fail", "mcp__tools__fail", json!({})),
                ("c_progress", "mcp__tools__progress", json!({"steps": 1})),
            ],
        ),
        message_response("r2", &["Done."]),
        // Allowed for the session: not asked again.
        calls_response(
            "r3",
            &[("c_progress2", "mcp__tools__progress", json!({"steps": 1}))],
        ),
        message_response("r4", &["Done again."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    configure(&home);
    let mut client = open(&home, &model.url()).await;
    let thread = turn(&mut client, 1, None, "on-request").await;
    // Asked one at a time: each answer lets the next question out.
    let tool_of = |request: &Value| request["params"]["_meta"]["tool_name"].clone();
    let mut asked: Vec<Value> = Vec::new();
    for _ in 0..2 {
        let request = client
            .until(|m| {
                method_of(m) == "mcpServer/elicitation/request"
                    && !asked.iter().any(|a| a["id"] == m["id"])
            })
            .await;
        let params = &request["params"];
        assert_eq!(params["serverName"], "tools");
        assert_eq!(params["threadId"], thread.as_str());
        assert_eq!(params["mode"], "form");
        assert_eq!(params["_meta"]["codex_approval_kind"], "mcp_tool_call");
        let answer = match tool_of(&request).as_str() {
            Some("fail") => json!({"action": "decline"}),
            _ => json!({"action": "accept", "content": {}, "_meta": {"persist": "session"}}),
        };
        client
            .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": answer}))
            .await;
        asked.push(request);
    }
    let mut tools: Vec<Value> = asked.iter().map(tool_of).collect();
    tools.sort_by_key(|t| t.to_string());
    assert_eq!(tools, [json!("fail"), json!("progress")]);
    turn_completed(&mut client).await;
    let seen = client.seen.clone();
    assert_eq!(completed(&seen, "tools", "echo")["status"], "completed");
    let fail = completed(&seen, "tools", "fail");
    assert_eq!(fail["status"], "failed");
    assert!(
        fail["result"].is_null(),
        "a declined tool never ran: {fail}"
    );
    assert_eq!(completed(&seen, "tools", "progress")["status"], "completed");
    let second = &model.requests()[1].body;
    assert!(output_for(second, "c_fail").contains("declined"));

    client.seen.clear();
    turn(&mut client, 3, Some(&thread), "on-request").await;
    turn_completed(&mut client).await;
    assert!(
        !client
            .seen
            .iter()
            .any(|m| method_of(m) == "mcpServer/elicitation/request"),
        "accepted for the session: not asked again"
    );
    let seen = client.seen.clone();
    assert_eq!(completed(&seen, "tools", "progress")["status"], "completed");
    client.close().await;
}

#[tokio::test]
async fn a_client_lists_the_servers_and_reloads_their_configuration() {
    let home = Home::new();
    configure(&home);
    let mut client = open(&home, "http://127.0.0.1:9/v1").await;
    let listed = client.call(1, "mcpServerStatus/list", json!({})).await;
    let data = listed["result"]["data"].as_array().unwrap();
    let names: Vec<&str> = data.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["fragile", "other", "tools"]);
    let tools = &data[2];
    assert_eq!(tools["runtimeStatus"], "connected", "{tools}");
    assert_eq!(tools["tools"]["echo"]["annotations"]["readOnlyHint"], true);
    assert!(tools["tools"]["echo"]["inputSchema"]["properties"]["text"].is_object());
    // Each start was announced: starting, then ready.
    let announced = |seen: &[Value], name: &str| -> Vec<String> {
        seen.iter()
            .filter(|m| method_of(m) == "mcpServer/startupStatus/updated")
            .filter(|m| m["params"]["name"] == name)
            .map(|m| m["params"]["status"].as_str().unwrap().to_owned())
            .collect()
    };
    client
        .until(|m| {
            method_of(m) == "mcpServer/startupStatus/updated"
                && m["params"]["name"] == "tools"
                && m["params"]["status"] == "ready"
        })
        .await;
    assert_eq!(announced(&client.seen, "tools"), ["starting", "ready"]);
    let one = client
        .call(2, "mcpServerStatus/list", json!({"serverName": "other"}))
        .await;
    assert_eq!(one["result"]["data"].as_array().unwrap().len(), 1);

    // `other` goes, `late` comes (failing to start: its error is shown).
    let server = test_server();
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            "[mcp_servers.tools]\ncommand = \"{}\"\n\n[mcp_servers.late]\ncommand = \"{}\"\nargs = [\"--exit-at-start\"]\n",
            server.display(),
            server.display()
        ),
    )
    .unwrap();
    let reloaded = client.call(3, "config/mcpServer/reload", json!({})).await;
    assert_eq!(reloaded["result"], json!({}), "{reloaded}");
    let listed = client.call(4, "mcpServerStatus/list", json!({})).await;
    let data = listed["result"]["data"].as_array().unwrap();
    let names: Vec<&str> = data.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["late", "tools"]);
    assert_eq!(data[0]["runtimeStatus"], "failed");
    assert!(
        data[0]["toolsError"]
            .as_str()
            .is_some_and(|e| e.contains("late"))
    );
    let failed = client
        .until(|m| {
            method_of(m) == "mcpServer/startupStatus/updated"
                && m["params"]["name"] == "late"
                && m["params"]["status"] == "failed"
        })
        .await;
    assert!(
        failed["params"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("late"))
    );
    client.close().await;
}

#[tokio::test]
async fn a_client_calls_a_tool_itself_and_the_call_is_on_record() {
    let model = ScriptedServer::with_responses([message_response("r1", &["I see the echo."])])
        .await
        .unwrap();
    let home = Home::new();
    configure(&home);
    let mut client = open(&home, &model.url()).await;
    let started = client.call(1, "thread/start", json!({})).await;
    let thread = thread_id_of(&started);
    let called = client
        .call(
            2,
            "mcpServer/tool/call",
            json!({"threadId": thread, "server": "other", "tool": "echo",
                   "arguments": {"text": "by hand"}}),
        )
        .await;
    assert_eq!(
        called["result"]["content"][0]["text"], "by hand",
        "{called}"
    );
    assert_eq!(called["result"]["isError"], false);
    // A turn of its own, holding the call's item.
    let item = client
        .until(|m| method_of(m) == "item/completed" && m["params"]["item"]["type"] == "mcpToolCall")
        .await;
    assert_eq!(item["params"]["item"]["server"], "other");
    let done = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(done["params"]["turn"]["status"], "completed");

    // No such server: an error reply, and a failed item on record.
    let missing = client
        .call(
            3,
            "mcpServer/tool/call",
            json!({"threadId": thread, "server": "nowhere", "tool": "echo"}),
        )
        .await;
    let message = missing["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("nowhere"), "{missing}");

    // The model sees the client's call in the next turn.
    let started = client
        .call(
            4,
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "what did I do?"}]}),
        )
        .await;
    let turn_id = started["result"]["turn"]["id"].clone();
    client
        .until(|m| method_of(m) == "turn/completed" && m["params"]["turn"]["id"] == turn_id)
        .await;
    let input = model.requests()[0].body["input"].to_string();
    assert!(
        input.contains("mcp__other__echo") && input.contains("by hand"),
        "{input}"
    );
    client.close().await;
}

#[tokio::test]
async fn a_server_asks_the_client_during_a_call_and_nobody_there_is_a_decline() {
    let model = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[(
                "c_ask",
                "mcp__tools__ask",
                json!({"question": "Who is there?"}),
            )],
        ),
        message_response("r2", &["Greeted."]),
        calls_response(
            "r3",
            &[("c_ask2", "mcp__tools__ask", json!({"question": "Anyone?"}))],
        ),
        message_response("r4", &["Nobody answered."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    configure(&home);
    let mut client = open(&home, &model.url()).await;
    let thread = turn(&mut client, 1, None, "never").await;
    let asked = client
        .until(|m| method_of(m) == "mcpServer/elicitation/request")
        .await;
    let params = &asked["params"];
    assert_eq!(params["serverName"], "tools");
    assert_eq!(params["threadId"], thread.as_str());
    assert_eq!(params["mode"], "form");
    assert_eq!(params["message"], "Who is there?");
    assert!(
        params["requestedSchema"]["properties"]["name"].is_object(),
        "{params}"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"],
                     "result": {"action": "accept", "content": {"name": "Ada"}}}))
        .await;
    turn_completed(&mut client).await;
    let seen = client.seen.clone();
    let item = completed(&seen, "tools", "ask");
    assert_eq!(item["result"]["content"][0]["text"], "hello Ada", "{item}");
    // The answer is on record, like an approval's.
    let resolved = client
        .until(|m| method_of(m) == "serverRequest/resolved")
        .await;
    assert_eq!(resolved["params"]["requestId"], asked["id"]);
    client.close().await;

    // With no client watching (a turn run by `spool run`'s terminal-less
    // stdin), the question is declined and the server says so.
    let (_, stderr) = home
        .spool_ok(
            &model.url(),
            &[
                "run",
                "--thread",
                &thread,
                "--tools",
                "none",
                "--approval-policy",
                "never",
                "ask again",
            ],
        )
        .await;
    assert!(stderr.contains("turn completed"), "{stderr}");
    let events = home
        .spool_ok(&model.url(), &["threads", "events", &thread])
        .await
        .0;
    let answers: Vec<serde_json::Value> = json_lines(&events)
        .into_iter()
        .filter(|e| {
            e["method"] == "serverRequest/resolved"
                || e["payload"]["method"] == "serverRequest/resolved"
        })
        .collect();
    assert_eq!(answers.len(), 2, "both questions were resolved: {events}");
    let last = model.requests()[3].body["input"].to_string();
    assert!(last.contains("no answer: decline"), "{last}");
}

#[tokio::test]
async fn tools_a_server_adds_are_offered_at_the_next_model_call() {
    let server = test_server();
    let home = Home::new();
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            "[mcp_servers.growing]\ncommand = \"{}\"\nargs = [\"--grow\"]\n",
            server.display()
        ),
    )
    .unwrap();
    let model = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[("c_echo", "mcp__growing__echo", json!({"text": "grow"}))],
        ),
        calls_response("r2", &[("c_late", "mcp__growing__late", json!({}))]),
        message_response("r3", &["The late tool answered."]),
    ])
    .await
    .unwrap();
    let mut client = open(&home, &model.url()).await;
    turn(&mut client, 1, None, "never").await;
    turn_completed(&mut client).await;
    let offered = |at: usize| model.requests()[at].body["tools"].to_string();
    assert!(!offered(0).contains("mcp__growing__late"), "{}", offered(0));
    assert!(offered(1).contains("mcp__growing__late"), "{}", offered(1));
    let seen = client.seen.clone();
    let late = completed(&seen, "growing", "late");
    assert_eq!(late["result"]["content"][0]["text"], "late", "{late}");
    client.close().await;
}
