//! What a Codex client meets before its first turn, from `spool
//! app-server` launched as tools launch `codex app-server`: the reads of
//! the TUI's bootstrap (each result checked against Codex 0.163.0's schema
//! by the test client), `-c` overrides, Codex's default tools, loaded
//! threads and unsubscribing, and -32601 naming a method spool does not
//! serve.

mod support;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::rpc::{Client, thread_id_of};
use support::*;

/// Starts a turn (request `id`) and waits until it completes.
async fn run_turn(client: &mut Client, id: i64, thread_id: &str, text: &str) {
    client
        .call(
            id,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": text}]}),
        )
        .await;
    client.until(|m| m["method"] == "turn/completed").await;
}

fn result(reply: &Value) -> &Value {
    reply
        .get("result")
        .unwrap_or_else(|| panic!("an error: {reply}"))
}

#[tokio::test]
async fn the_bootstrap_reads_answer_with_the_servers_true_state() {
    let model = ScriptedServer::with_responses([message_response("r1", &["Hello."])])
        .await
        .unwrap();
    let home = Home::new();
    let toml = home.path().join("spool.toml");
    std::fs::write(&toml, "provider = \"local\"\n").unwrap();
    let mut client = Client::app_server(
        &home,
        &model.url(),
        &[
            "--listen",
            "stdio://",
            "-c",
            "model=\"scripted-model\"",
            "-c",
            "approval_policy=\"untrusted\"",
            "--sandbox",
            "read-only",
        ],
    );
    client.initialize(json!({})).await;

    let account = client.call(1, "account/read", json!({})).await;
    assert_eq!(
        result(&account),
        &json!({"account": null, "requiresOpenaiAuth": false}),
        "the local provider needs no key and spool no login"
    );

    let config = client.call(2, "config/read", json!({})).await;
    let config = result(&config);
    assert_eq!(config["config"]["model"], "scripted-model", "{config}");
    assert_eq!(config["config"]["model_provider"], "local");
    assert_eq!(config["config"]["approval_policy"], "untrusted");
    assert_eq!(config["config"]["sandbox_mode"], "read-only");
    let origin = |key: &str| config["origins"][key]["name"].clone();
    assert_eq!(
        origin("model"),
        json!({"type": "sessionFlags"}),
        "-c: {config}"
    );
    assert_eq!(origin("approval_policy"), json!({"type": "sessionFlags"}));
    assert_eq!(
        origin("sandbox_mode"),
        json!({"type": "sessionFlags"}),
        "a flag"
    );
    assert_eq!(
        origin("model_provider"),
        json!({"type": "user", "file": toml.display().to_string()}),
        "spool.toml set the provider"
    );

    let models = client.call(3, "model/list", json!({})).await;
    let models = result(&models)["data"].as_array().unwrap().clone();
    assert_eq!(models.len(), 1, "the provider lists none: {models:?}");
    assert_eq!(models[0]["id"], "scripted-model");
    assert_eq!(models[0]["isDefault"], true);

    let cwd = home.path().display().to_string();
    let skills = client.call(4, "skills/list", json!({})).await;
    assert_eq!(
        result(&skills),
        &json!({"data": [{"cwd": cwd, "skills": [], "errors": []}]})
    );
    let hooks = client.call(5, "hooks/list", json!({"cwds": ["/x"]})).await;
    assert_eq!(
        result(&hooks),
        &json!({"data": [{"cwd": "/x", "hooks": [], "errors": [], "warnings": []}]})
    );
    let plugins = client.call(6, "plugin/list", json!({})).await;
    assert_eq!(result(&plugins)["marketplaces"], json!([]));
    let modes = client.call(7, "collaborationMode/list", json!({})).await;
    assert_eq!(result(&modes), &json!({"data": []}));

    let requirements = client.call(8, "configRequirements/read", json!({})).await;
    assert_eq!(result(&requirements), &json!({"requirements": null}));

    let unserved = client
        .call(9, "fs/readFile", json!({"path": "/etc/hostname"}))
        .await;
    assert_eq!(unserved["error"]["code"], -32601, "{unserved}");
    assert_eq!(
        unserved["error"]["message"],
        "method not found: fs/readFile (spool does not serve it)"
    );
    client.close().await;
}

#[tokio::test]
async fn threads_load_on_start_and_unsubscribing_says_what_it_did() {
    let model = ScriptedServer::with_responses([message_response("r1", &["Hi."])])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let loaded = client.call(1, "thread/loaded/list", json!({})).await;
    assert_eq!(result(&loaded), &json!({"data": [], "nextCursor": null}));

    let started = client.call(2, "thread/start", json!({})).await;
    let thread_id = thread_id_of(&started);
    let loaded = client.call(3, "thread/loaded/list", json!({})).await;
    assert_eq!(result(&loaded)["data"], json!([thread_id]));

    // Codex's default tools are offered without --tools.
    run_turn(&mut client, 4, &thread_id, "hi").await;
    let request = &model.requests()[0];
    let body: Value = serde_json::from_str(&request.body_text()).unwrap();
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in ["shell", "apply_patch", "update_plan"] {
        assert!(tools.contains(&tool), "{tool} offered: {tools:?}");
    }

    let unsubscribed = client
        .call(5, "thread/unsubscribe", json!({"threadId": thread_id}))
        .await;
    assert_eq!(result(&unsubscribed), &json!({"status": "unsubscribed"}));
    // The last watcher left and nothing runs: the thread is unloaded.
    let closed = client.until(|m| m["method"] == "thread/closed").await;
    assert_eq!(closed["params"]["threadId"], thread_id.as_str());
    let again = client
        .call(6, "thread/unsubscribe", json!({"threadId": thread_id}))
        .await;
    assert_eq!(result(&again), &json!({"status": "notSubscribed"}));
    let unknown = client
        .call(
            7,
            "thread/unsubscribe",
            json!({"threadId": "no-such-thread"}),
        )
        .await;
    assert_eq!(result(&unknown), &json!({"status": "notLoaded"}));
    let loaded = client.call(8, "thread/loaded/list", json!({})).await;
    assert_eq!(result(&loaded)["data"], json!([]), "no one watches it now");
    client.close().await;
}

#[tokio::test]
async fn tools_none_offers_no_tools() {
    let model = ScriptedServer::with_responses([message_response("r1", &["Hi."])])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::app_server(&home, &model.url(), &["--tools", "none"]);
    client.initialize(json!({})).await;
    let started = client.call(1, "thread/start", json!({})).await;
    let thread_id = thread_id_of(&started);
    run_turn(&mut client, 2, &thread_id, "hi").await;
    let body: Value = serde_json::from_str(&model.requests()[0].body_text()).unwrap();
    assert!(body.get("tools").is_none(), "{body}");
    client.close().await;
}

#[tokio::test]
async fn unknown_c_keys_are_named_once_and_bad_values_of_known_ones_refused() {
    let home = Home::new();
    let out = home
        .spool(
            "http://127.0.0.1:9/v1",
            &[
                "app-server",
                "-c",
                "features.web_search=true",
                "-c",
                "show_raw_agent_reasoning=true",
            ],
        )
        .await;
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ignoring -c"))
        .collect();
    assert_eq!(
        warnings,
        [
            "spool serve: ignoring -c keys spool has no use for: features.web_search, \
          show_raw_agent_reasoning"
        ],
        "{stderr}"
    );
    // Before the subcommand too, as `codex -c … app-server` is spelled.
    let before = home
        .spool(
            "http://127.0.0.1:9/v1",
            &["-c", "features.web_search=true", "app-server"],
        )
        .await;
    assert!(before.status.success(), "{before:?}");
    assert!(
        String::from_utf8_lossy(&before.stderr)
            .contains("ignoring -c keys spool has no use for: features.web_search"),
        "{before:?}"
    );
    let elsewhere = home
        .spool(
            "http://127.0.0.1:9/v1",
            &["-c", "model=\"x\"", "threads", "list"],
        )
        .await;
    assert!(
        !elsewhere.status.success(),
        "-c means nothing to other commands"
    );
    let bad = home
        .spool(
            "http://127.0.0.1:9/v1",
            &["app-server", "-c", "approval_policy=sometimes"],
        )
        .await;
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("-c approval_policy"),
        "{bad:?}"
    );
}

#[tokio::test]
async fn a_deleted_thread_is_gone_from_lists_reads_and_the_store_file() {
    let model = ScriptedServer::with_responses([message_response("r1", &["Hi."])])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let doomed = thread_id_of(&client.call(1, "thread/start", json!({})).await);
    let kept = thread_id_of(&client.call(2, "thread/start", json!({})).await);
    run_turn(&mut client, 3, &doomed, "hi").await;

    let deleted = client
        .call(4, "thread/delete", json!({"threadId": doomed}))
        .await;
    assert_eq!(result(&deleted), &json!({}));
    let told = client.until(|m| m["method"] == "thread/deleted").await;
    assert_eq!(
        told["params"]["threadId"],
        doomed.as_str(),
        "its watcher is told"
    );

    let list = client.call(5, "thread/list", json!({})).await;
    let ids: Vec<&str> = result(&list)["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [kept.as_str()]);
    let read = client
        .call(6, "thread/read", json!({"threadId": doomed}))
        .await;
    assert_eq!(read["error"]["code"], -32602, "{read}");
    assert_eq!(
        read["error"]["message"],
        format!("thread {doomed} was deleted")
    );
    let again = client
        .call(7, "thread/delete", json!({"threadId": doomed}))
        .await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    client.close().await;

    // Nothing of it is left in the file but its id among the deleted.
    let db = rusqlite::Connection::open(home.db()).unwrap();
    for table in ["events", "items", "pending_requests", "run_states"] {
        let left: i64 = db
            .query_row(
                &format!("SELECT count(*) FROM {table} WHERE thread_id = ?1"),
                [&doomed],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "{table}");
    }
    let recorded: i64 = db
        .query_row(
            "SELECT count(*) FROM deleted_threads WHERE id = ?1",
            [&doomed],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(recorded, 1);
}

#[tokio::test]
async fn an_ephemeral_thread_is_never_listed_and_is_gone_once_unloaded() {
    let model = ScriptedServer::with_responses([message_response("r1", &["A title."])])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let started = client
        .call(1, "thread/start", json!({"ephemeral": true}))
        .await;
    assert_eq!(result(&started)["thread"]["ephemeral"], true, "{started}");
    let thread_id = thread_id_of(&started);
    run_turn(&mut client, 2, &thread_id, "name it").await;
    let list = client.call(3, "thread/list", json!({})).await;
    assert_eq!(result(&list)["data"], json!([]), "never listed");
    let read = client
        .call(4, "thread/read", json!({"threadId": thread_id}))
        .await;
    assert!(
        read.get("result").is_some(),
        "readable while loaded: {read}"
    );

    client
        .call(5, "thread/unsubscribe", json!({"threadId": thread_id}))
        .await;
    client.until(|m| m["method"] == "thread/closed").await;
    // Deleted in the background once unloaded.
    let mut id = 6;
    let gone = loop {
        let read = client
            .call(id, "thread/read", json!({"threadId": thread_id}))
            .await;
        if read.get("error").is_some() || id > 200 {
            break read;
        }
        id += 1;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(
        gone["error"]["message"],
        format!("thread {thread_id} was deleted"),
        "{gone}"
    );
    client.close().await;
}

/// `thread/compact/start` as a Codex client meets it: `{}` at once, then
/// the compaction's turn with its `contextCompaction` item and
/// `thread/compacted`, every message checked against Codex 0.163.0's
/// schema (spool's `summary` and `replaces` included); the next turn's
/// request carries the summary, not what it replaced.
#[tokio::test]
async fn a_compaction_reaches_a_codex_client_in_codex_shapes() {
    let model = ScriptedServer::with_responses([
        message_response("r1", &["Hi."]),
        message_response("r2", &["SUMMARY: greetings."]),
        message_response("r3", &["Again."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let started = client.call(1, "thread/start", json!({})).await;
    let thread_id = thread_id_of(&started);
    run_turn(&mut client, 2, &thread_id, "hello").await;

    let reply = client
        .call(3, "thread/compact/start", json!({"threadId": thread_id}))
        .await;
    assert_eq!(result(&reply), &json!({}));
    let compacted = client.until(|m| m["method"] == "thread/compacted").await;
    let turn_id = compacted["params"]["turnId"].as_str().unwrap().to_owned();
    assert_eq!(compacted["params"]["threadId"], thread_id.as_str());
    let item = client
        .until(|m| {
            m["method"] == "item/completed" && m["params"]["item"]["type"] == "contextCompaction"
        })
        .await;
    assert_eq!(item["params"]["turnId"], turn_id.as_str());
    assert_eq!(item["params"]["item"]["summary"], "SUMMARY: greetings.");
    client
        .until(|m| m["method"] == "turn/completed" && m["params"]["turn"]["id"] == turn_id.as_str())
        .await;

    // (`run_turn` would find the first turn's `turn/completed`, kept.)
    client
        .call(
            4,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "hello again"}]}),
        )
        .await;
    client
        .until(|m| m["method"] == "item/completed" && m["params"]["item"]["text"] == "Again.")
        .await;
    let body: Value = serde_json::from_str(&model.requests()[2].body_text()).unwrap();
    let text = body["input"].to_string();
    assert!(text.contains("SUMMARY: greetings."), "{text}");
    assert!(!text.contains("\"hello\""), "{text}");
    client.close().await;
}
