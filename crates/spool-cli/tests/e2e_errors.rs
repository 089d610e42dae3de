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
    assert!(
        stderr.contains("scripts/local-model.sh start"),
        "the local provider's connect error says how to start the server: {stderr}"
    );
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

/// SIGINT (Ctrl-C) mid-stream: exit 130, what streamed is kept as an
/// incomplete item, and the turn is recorded as interrupted.
#[tokio::test]
async fn sigint_interrupts_the_turn_and_keeps_what_streamed() {
    use spool_testkit::Gate;
    use tokio::io::AsyncReadExt;

    let ev = |name: &str, mut data: serde_json::Value| {
        data["type"] = json!(name);
        (name.to_owned(), data)
    };
    let gate = Gate::new();
    let server = ScriptedServer::with_responses([ScriptedResponse::sse([
        ev("response.created", json!({"response": {"id": "r"}})),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message", "id": "m", "role": "assistant", "content": []}}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "m", "output_index": 0, "delta": "Streaming"}),
        ),
    ])
    .wait_for(&gate)])
    .await
    .unwrap();
    let home = Home::new();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(["run", "hello"])
        .current_dir(home.path())
        .env("SPOOL_HOME", home.path())
        .env("SPOOL_LOCAL_MODEL_URL", server.url())
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait until the first text is on the terminal: the turn is mid-stream.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("Streaming") {
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), stdout.read(&mut buf))
            .await
            .expect("spool printed the streamed text")
            .unwrap();
        assert!(n > 0, "stdout closed before the text arrived");
        seen.extend_from_slice(&buf[..n]);
    }
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("spool exits after SIGINT")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");

    let thread = thread_id_from(&stderr);
    let (items, _) = home
        .spool_ok(
            &server.url(),
            &["threads", "show", &thread, "--view", "all", "--json"],
        )
        .await;
    let items = json_lines(&items);
    let answer = items
        .iter()
        .find(|i| i["item"]["type"] == "agentMessage")
        .expect("the partial answer is stored");
    assert_eq!(answer["item"]["text"], "Streaming");
    assert_eq!(answer["envelope"]["status"], "incomplete");
    let (events, _) = home
        .spool_ok(&server.url(), &["threads", "events", &thread])
        .await;
    let completed: Vec<_> = json_lines(&events)
        .into_iter()
        .filter(|e| e["method"] == "turn/completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["params"]["turn"]["status"], "interrupted");
}

#[tokio::test]
async fn an_unreachable_postgres_store_is_named_without_its_password() {
    let home = Home::new();
    for (url, named) in [
        (
            "postgres://spool:secret@127.0.0.1:1/spool",
            "spool@127.0.0.1:1/spool",
        ),
        (
            "PostgreSQL://spool:secret@127.0.0.1:1/other",
            "spool@127.0.0.1:1/other",
        ),
    ] {
        let out = home
            .spool(
                "http://127.0.0.1:1/v1",
                &["--store", url, "threads", "list"],
            )
            .await;
        assert!(!out.status.success(), "{url} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("cannot connect to the PostgreSQL store {named}")),
            "{stderr}"
        );
        assert!(!stderr.contains("secret"), "{stderr}");
    }
    // Not taken for a file path: nothing was made on disk.
    let made: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(
        !made
            .iter()
            .any(|name| name.to_string_lossy().starts_with("postgres")),
        "{made:?}"
    );
}
