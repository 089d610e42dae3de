//! Servers reached over streamable HTTP: the test server of this crate run
//! as a child in its HTTP mode (`--http 127.0.0.1:0`), on a real socket.

use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use spool_mcp::{McpCallError, McpConnection, McpError, McpProgress, McpServerConfig};

/// The test server serving over HTTP, killed when dropped.
struct HttpServer {
    url: String,
    _child: tokio::process::Child,
    /// Kept open: the server's stdout is a pipe to the test.
    _stdout: BufReader<tokio::process::ChildStdout>,
}

async fn http_server(args: &[&str]) -> HttpServer {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_spool-mcp-test-server"))
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).await.unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("not where it listens: {line:?}"))
        .to_owned();
    HttpServer {
        url,
        _child: child,
        _stdout: stdout,
    }
}

fn section(url: &str) -> McpServerConfig {
    McpServerConfig {
        url: Some(url.to_owned()),
        enabled: true,
        ..McpServerConfig::default()
    }
}

fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    value.as_object().cloned()
}

fn no_progress(_: McpProgress) {}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_tools_are_listed_filtered_and_called_with_their_progress() {
    let server = http_server(&[]).await;
    let mut config = section(&server.url);
    config.disabled_tools = vec!["sleep".to_owned()];
    let connection = McpConnection::start("web", &config, None).await.unwrap();
    let mut names: Vec<String> = connection.tools().into_iter().map(|t| t.name).collect();
    names.sort_unstable();
    assert_eq!(names, ["ask", "crash", "echo", "env", "fail", "progress"]);

    let echoed = connection
        .call_tool(
            "echo",
            args(serde_json::json!({"text": "over http"})),
            WAIT,
            &no_progress,
        )
        .await
        .unwrap();
    assert_eq!(
        echoed.content,
        [serde_json::json!({"type": "text", "text": "over http"})]
    );

    let seen = Mutex::new(Vec::new());
    let done = connection
        .call_tool(
            "progress",
            args(serde_json::json!({"steps": 20})),
            WAIT,
            &|update| seen.lock().unwrap().push(update),
        )
        .await
        .unwrap();
    assert_eq!(done.content[0]["text"], "done");
    let messages: Vec<String> = seen
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|p| format!("{}/{} {}", p.progress, p.total.unwrap(), p.message.unwrap()))
        .collect();
    let expected: Vec<String> = (1..=20).map(|i| format!("{i}/20 step {i}")).collect();
    assert_eq!(messages, expected);
    assert!(!connection.is_closed());
    connection.close().await;
}

// The test cannot set a variable of its own (`set_var` is unsafe while
// other threads run), so the token is one it has: PATH's value.
#[tokio::test]
async fn the_bearer_token_is_sent_and_a_wrong_or_missing_one_fails_start() {
    let path = std::env::var("PATH").unwrap();
    let server = http_server(&["--require-token", &path]).await;

    let mut config = section(&server.url);
    config.bearer_token_env_var = Some("PATH".to_owned());
    let connection = McpConnection::start("web", &config, None).await.unwrap();
    let echoed = connection
        .call_tool(
            "echo",
            args(serde_json::json!({"text": "let in"})),
            WAIT,
            &no_progress,
        )
        .await
        .unwrap();
    assert_eq!(echoed.content[0]["text"], "let in");
    connection.close().await;

    let missing = McpConnection::start("web", &section(&server.url), None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            McpError::Unauthorized {
                status: 401,
                token_var: None,
                ..
            }
        ),
        "{missing:?}"
    );
    let message = missing.to_string();
    assert!(message.contains("MCP server web"), "{message}");
    assert!(message.contains("bearer_token_env_var"), "{message}");

    // A token, the wrong one: refused alike, and never printed.
    let wrong_server = http_server(&["--require-token", "not-the-path"]).await;
    let mut config = section(&wrong_server.url);
    config.bearer_token_env_var = Some("PATH".to_owned());
    let wrong = McpConnection::start("web", &config, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&wrong, McpError::Unauthorized { status: 401, token_var: Some(var), .. } if var == "PATH"),
        "{wrong:?}"
    );
    let message = wrong.to_string();
    assert!(message.contains("the token in PATH"), "{message}");
    assert!(!message.contains(&path), "the token is printed: {message}");
    assert!(!format!("{wrong:?}").contains(&path), "{wrong:?}");
}

#[tokio::test]
async fn a_token_variable_that_is_not_set_is_named() {
    let server = http_server(&[]).await;
    let mut config = section(&server.url);
    config.bearer_token_env_var = Some("SPOOL_MCP_TEST_NO_SUCH_TOKEN".to_owned());
    let error = McpConnection::start("web", &config, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpError::TokenUnset { var, .. } if var == "SPOOL_MCP_TEST_NO_SUCH_TOKEN"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("SPOOL_MCP_TEST_NO_SUCH_TOKEN"),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_ends_the_call_as_closed_not_at_its_timeout() {
    let server = http_server(&[]).await;
    let connection = McpConnection::start("web", &section(&server.url), None)
        .await
        .unwrap();
    // Long enough that a call left waiting for its stream to come back
    // would be a Timeout only after the stream's few retries are long over.
    let error = connection
        .call_tool("crash", None, Duration::from_secs(60), &no_progress)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpCallError::Closed { tool, .. } if tool == "crash"),
        "{error:?}"
    );
}
