//! `spool run` when things go wrong: a clear one-line reason, a non-zero
//! exit, and the failed turn still on record.

mod support;

use serde_json::json;
use spool_testkit::{ScriptedResponse, ScriptedServer};
use support::*;

#[tokio::test]
async fn a_provider_error_exits_non_zero_with_one_line() {
    let server = ScriptedServer::with_responses([ScriptedResponse::json(
        401,
        &json!({"error": {"message": "Incorrect API key provided"}}),
    )])
    .await
    .unwrap();
    let home = Home::new();
    let out = home.spool(&server.url(), &["run", "hello"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error_lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(error_lines.len(), 1, "{stderr}");
    assert!(
        error_lines[0].contains("HTTP 401: Incorrect API key provided"),
        "{stderr}"
    );

    let thread = thread_id_from(&stderr);
    let (events, _) = home
        .spool_ok(&server.url(), &["threads", "events", &thread])
        .await;
    let events = json_lines(&events);
    let completed: Vec<_> = events
        .iter()
        .filter(|e| e["method"] == "turn/completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["params"]["turn"]["status"], "failed");
    assert_eq!(
        completed[0]["params"]["turn"]["error"]["codexErrorInfo"],
        "unauthorized"
    );
}

#[tokio::test]
async fn nothing_listening_is_a_clear_error() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = Home::new();
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = home.spool(&url, &["run", "hello"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.lines().any(|l| l.starts_with("error:")), "{stderr}");
}

#[tokio::test]
async fn a_bad_config_file_names_file_line_and_key() {
    let home = Home::new();
    std::fs::write(
        home.path().join("spool.toml"),
        "[providers.lab]\nbase_url = \"http://x/v1\"\nwire_api = \"grpc\"\n",
    )
    .unwrap();
    let out = home.spool("http://127.0.0.1:9/v1", &["run", "hello"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("spool.toml:3:"), "{stderr}");
    assert!(stderr.contains("key `wire_api`"), "{stderr}");
}

#[tokio::test]
async fn an_unknown_thread_is_a_clear_error() {
    let home = Home::new();
    let out = home
        .spool(
            "http://127.0.0.1:9/v1",
            &["run", "--thread", "nope", "hello"],
        )
        .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no thread nope"), "{stderr}");
}
