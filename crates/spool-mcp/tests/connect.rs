//! Starting real MCP servers (child processes on stdio) and listing their
//! tools: the test server of this crate, and children that fail.

use std::time::Duration;

use spool_mcp::{McpConnection, McpError, McpServerConfig};

fn test_server(args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        command: Some(env!("CARGO_BIN_EXE_spool-mcp-test-server").to_owned()),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        enabled: true,
        ..McpServerConfig::default()
    }
}

fn names(connection: &McpConnection) -> Vec<&str> {
    let mut names: Vec<&str> = connection.tools().iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn a_server_starts_and_lists_its_tools_with_their_hints() {
    let connection = McpConnection::start("test", &test_server(&[]))
        .await
        .unwrap();
    assert_eq!(connection.name(), "test");
    assert_eq!(names(&connection), ["echo", "fail", "sleep"]);
    let echo = connection
        .tools()
        .iter()
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
        .iter()
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
    let connection = McpConnection::start("test", &config).await.unwrap();
    assert_eq!(names(&connection), ["echo"]);
    connection.close().await;
}

#[tokio::test]
async fn a_server_that_exits_is_an_error_with_its_last_words() {
    let error = McpConnection::start("gone", &test_server(&["--exit-at-start"]))
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
    let error = McpConnection::start("mute", &config).await.unwrap_err();
    assert!(
        matches!(error, McpError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_missing_command_or_an_http_server_is_a_clear_error() {
    let missing = McpServerConfig {
        command: Some("/nonexistent/spool-mcp-server".to_owned()),
        enabled: true,
        ..McpServerConfig::default()
    };
    let error = McpConnection::start("missing", &missing).await.unwrap_err();
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/spool-mcp-server"));

    let http = McpServerConfig {
        url: Some("http://127.0.0.1:9/mcp".to_owned()),
        enabled: true,
        ..McpServerConfig::default()
    };
    let error = McpConnection::start("web", &http).await.unwrap_err();
    assert!(matches!(error, McpError::HttpNotBuilt { .. }), "{error:?}");
}
