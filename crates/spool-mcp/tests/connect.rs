//! Starting real MCP servers (child processes on stdio) and listing their
//! tools: the test server of this crate, and children that fail. Servers
//! over HTTP are in `http.rs`.

use std::sync::Mutex;
use std::time::Duration;

use spool_mcp::{McpCallError, McpConnection, McpError, McpProgress, McpServerConfig};

fn test_server(args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        command: Some(env!("CARGO_BIN_EXE_spool-mcp-test-server").to_owned()),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        enabled: true,
        ..McpServerConfig::default()
    }
}

fn no_progress(_: McpProgress) {}

fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    value.as_object().cloned()
}

fn names(connection: &McpConnection) -> Vec<String> {
    let mut names: Vec<String> = connection.tools().into_iter().map(|t| t.name).collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn a_server_starts_and_lists_its_tools_with_their_hints() {
    let connection = McpConnection::start("test", &test_server(&[]), None)
        .await
        .unwrap();
    assert_eq!(connection.name(), "test");
    assert_eq!(
        names(&connection),
        ["ask", "crash", "echo", "env", "fail", "progress", "sleep"]
    );
    let echo = connection
        .tools()
        .into_iter()
        .find(|t| t.name == "echo")
        .unwrap();
    assert_eq!(
        echo.description.as_deref(),
        Some("Answers with the text it is given")
    );
    assert_eq!(echo.read_only, Some(true));
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
    let fail = connection
        .tools()
        .into_iter()
        .find(|t| t.name == "fail")
        .unwrap();
    assert_eq!(fail.destructive, Some(true));
    connection.close().await;
}

#[tokio::test]
async fn a_section_chooses_which_tools_are_offered() {
    let mut config = test_server(&[]);
    config.enabled_tools = Some(vec!["echo".to_owned(), "sleep".to_owned()]);
    config.disabled_tools = vec!["sleep".to_owned()];
    let connection = McpConnection::start("test", &config, None).await.unwrap();
    assert_eq!(names(&connection), ["echo"]);
    connection.close().await;
}

#[tokio::test]
async fn a_server_that_exits_is_an_error_with_its_last_words() {
    let error = McpConnection::start("gone", &test_server(&["--exit-at-start"]), None)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            error,
            McpError::Protocol {
                doing: "initialize",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(message.contains("MCP server gone"), "{message}");
    assert!(message.contains("exiting at start, as asked"), "{message}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    // A real child that reads nothing and writes nothing.
    let config = McpServerConfig {
        command: Some("sleep".to_owned()),
        args: vec!["30".to_owned()],
        startup_timeout_sec: Some(0.3),
        enabled: true,
        ..McpServerConfig::default()
    };
    let error = McpConnection::start("mute", &config, None)
        .await
        .unwrap_err();
    assert!(
        matches!(error, McpError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_missing_command_or_a_url_nothing_answers_is_a_clear_error() {
    let missing = McpServerConfig {
        command: Some("/nonexistent/spool-mcp-server".to_owned()),
        enabled: true,
        ..McpServerConfig::default()
    };
    let error = McpConnection::start("missing", &missing, None)
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/spool-mcp-server"));

    // A port nothing listens on (any more).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let http = McpServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        enabled: true,
        ..McpServerConfig::default()
    };
    let error = McpConnection::start("web", &http, None).await.unwrap_err();
    assert!(
        matches!(
            error,
            McpError::Protocol {
                doing: "initialize",
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("MCP server web"), "{message}");
    // The cause, not only rmcp's "error sending request".
    assert!(message.contains("Connection refused"), "{message}");
}

#[tokio::test]
async fn tools_are_called_and_a_slow_one_times_out_without_ending_the_session() {
    let connection = McpConnection::start("test", &test_server(&[]), None)
        .await
        .unwrap();
    let wait = Duration::from_secs(10);

    let echoed = connection
        .call_tool(
            "echo",
            args(serde_json::json!({"text": "hello"})),
            wait,
            &no_progress,
        )
        .await
        .unwrap();
    assert!(!echoed.is_error);
    assert_eq!(
        echoed.content,
        [serde_json::json!({"type": "text", "text": "hello"})]
    );

    let failed = connection
        .call_tool("fail", None, wait, &no_progress)
        .await
        .unwrap();
    assert!(failed.is_error, "an error result is a result, marked");
    assert_eq!(failed.content[0]["text"], "this tool always fails");

    let slow = connection
        .call_tool(
            "sleep",
            args(serde_json::json!({"ms": 5_000})),
            Duration::from_millis(200),
            &no_progress,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&slow, McpCallError::Timeout { tool, .. } if tool == "sleep"),
        "{slow:?}"
    );
    assert!(slow.to_string().contains("tool_timeout_sec"), "{slow}");

    // The session goes on after the timeout.
    let again = connection
        .call_tool(
            "echo",
            args(serde_json::json!({"text": "still here"})),
            wait,
            &no_progress,
        )
        .await
        .unwrap();
    assert_eq!(again.content[0]["text"], "still here");

    let unknown = connection
        .call_tool("no_such_tool", None, wait, &no_progress)
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, McpCallError::Failed { .. }),
        "{unknown:?}"
    );
    connection.close().await;
}

#[tokio::test]
async fn a_server_sees_only_the_basic_environment_and_its_own_env() {
    let mut config = test_server(&[]);
    config
        .env
        .insert("SPOOL_MCP_GIVEN".to_owned(), "given".to_owned());
    let connection = McpConnection::start("test", &config, None).await.unwrap();
    let read = |name: &str| {
        let args = serde_json::json!({"name": name}).as_object().cloned();
        let connection = &connection;
        async move {
            let result = connection
                .call_tool("env", args, Duration::from_secs(10), &no_progress)
                .await
                .unwrap();
            result.content[0]["text"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(read("SPOOL_MCP_GIVEN").await, "given");
    assert_eq!(read("PATH").await, std::env::var("PATH").unwrap());
    // Set for this test process by cargo, and not passed on.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert_eq!(read("CARGO_MANIFEST_DIR").await, "unset");
    connection.close().await;
}

/// A call's progress, as `progress` with `steps` reports it.
fn steps(steps: u32) -> Vec<McpProgress> {
    (1..=steps)
        .map(|step| McpProgress {
            progress: f64::from(step),
            total: Some(f64::from(steps)),
            message: Some(format!("step {step}")),
        })
        .collect()
}

/// Calls `progress` with `n` steps: its answer, and the progress seen
/// before the call returned.
async fn call_progress(connection: &McpConnection, n: u32) -> (String, Vec<McpProgress>) {
    let seen = Mutex::new(Vec::new());
    let result = connection
        .call_tool(
            "progress",
            args(serde_json::json!({"steps": n})),
            Duration::from_secs(10),
            &|update| seen.lock().unwrap().push(update),
        )
        .await
        .unwrap();
    let text = result.content[0]["text"].as_str().unwrap().to_owned();
    (text, seen.into_inner().unwrap())
}

// On several worker threads, as spool runs: rmcp's notification handlers
// run in tasks of their own there, in any order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_caller_in_order_before_the_answer() {
    let connection = McpConnection::start("test", &test_server(&[]), None)
        .await
        .unwrap();
    let (text, seen) = call_progress(&connection, 50).await;
    assert_eq!(text, "done");
    assert_eq!(seen, steps(50));
    // Each call gets its own progress only, also when two run at once.
    let ((a, seen_a), (b, seen_b)) =
        tokio::join!(call_progress(&connection, 3), call_progress(&connection, 7));
    assert_eq!((a.as_str(), b.as_str()), ("done", "done"));
    assert_eq!(seen_a, steps(3));
    assert_eq!(seen_b, steps(7));
    connection.close().await;
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_closes_the_connection_with_its_last_words() {
    let connection = McpConnection::start("test", &test_server(&[]), None)
        .await
        .unwrap();
    assert!(!connection.is_closed());
    let error = connection
        .call_tool("crash", None, Duration::from_secs(10), &no_progress)
        .await
        .unwrap_err();
    let McpCallError::Closed { tool, reason, .. } = &error else {
        panic!("not Closed: {error:?}");
    };
    assert_eq!(tool, "crash");
    assert!(
        reason.contains("test server: crashing in the middle of a call, as asked"),
        "{error}"
    );
    assert!(connection.is_closed());
    // Every later call is refused the same way, not left waiting.
    let later = connection
        .call_tool(
            "echo",
            args(serde_json::json!({"text": "anyone?"})),
            Duration::from_secs(10),
            &no_progress,
        )
        .await
        .unwrap_err();
    assert!(matches!(later, McpCallError::Closed { .. }), "{later:?}");
}

#[tokio::test]
async fn a_server_that_says_its_tools_changed_is_noted() {
    let connection = McpConnection::start("test", &test_server(&["--list-changed"]), None)
        .await
        .unwrap();
    assert!(!connection.tools_changed());
    // `echo` says so before it answers: noted by the time the answer is.
    connection
        .call_tool(
            "echo",
            args(serde_json::json!({"text": "hi"})),
            Duration::from_secs(10),
            &no_progress,
        )
        .await
        .unwrap();
    assert!(connection.tools_changed());
    connection.close().await;
}

/// Waits until `path` has `lines` lines: what the server does after a call
/// was given up on has no answer to wait for.
async fn wait_for_lines(path: &std::path::Path, lines: usize) {
    for _ in 0..500 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never had {lines} lines", path.display());
}

#[tokio::test]
async fn a_call_given_up_on_is_cancelled_at_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let cancelled = dir.path().join("cancelled");
    let config = test_server(&["--cancel-file", cancelled.to_str().unwrap()]);
    let connection = McpConnection::start("test", &config, None).await.unwrap();
    let long_sleep = || args(serde_json::json!({"ms": 600_000}));

    // Past its timeout.
    let error = connection
        .call_tool(
            "sleep",
            long_sleep(),
            Duration::from_millis(100),
            &no_progress,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, McpCallError::Timeout { .. }), "{error:?}");
    wait_for_lines(&cancelled, 1).await;

    // Dropped by its caller before the answer (a turn interrupted).
    let call = connection.call_tool(
        "sleep",
        long_sleep(),
        Duration::from_secs(600),
        &no_progress,
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err()
    );
    wait_for_lines(&cancelled, 2).await;
    connection.close().await;
}
