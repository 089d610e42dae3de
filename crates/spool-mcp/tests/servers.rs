//! The process's servers (`McpServers`) over the test server: a server
//! that crashed is started again at once, and one that keeps crashing
//! before any call is answered waits for its backoff.

use spool_mcp::{McpProgress, McpServerConfig, McpServers};
use spool_tools::mcp::McpToolbox;

fn no_progress(_: McpProgress) {}

#[tokio::test]
async fn a_server_that_keeps_crashing_backs_off_and_an_answer_resets_it() {
    let section = McpServerConfig {
        command: Some(env!("CARGO_BIN_EXE_spool-mcp-test-server").to_owned()),
        enabled: true,
        ..McpServerConfig::default()
    };
    let servers = McpServers::new([("fragile".to_owned(), section)].into(), None);
    let call = |tool: &'static str| {
        let servers = &servers;
        async move {
            let arguments = serde_json::json!({"text": "hi"}).as_object().cloned();
            servers
                .call("fragile", tool, arguments, &no_progress, None)
                .await
        }
    };
    // A first crash: the next call starts the server again at once.
    let first = call("crash").await.unwrap_err();
    assert!(first.contains("started again on the next call"), "{first}");
    let second = call("crash").await.unwrap_err();
    assert!(second.contains("crashing in the middle"), "{second}");
    // It crashed again before any call got an answer: not started again
    // until its backoff (0.5 s) has passed.
    let refused = call("echo").await.unwrap_err();
    assert!(refused.contains("started again in"), "{refused}");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let answered = call("echo").await.unwrap();
    assert_eq!(answered.content[0]["text"], "hi");
    // An answer resets the count: the next crash is a first again.
    call("crash").await.unwrap_err();
    let again = call("echo").await.unwrap();
    assert_eq!(again.content[0]["text"], "hi");
}
