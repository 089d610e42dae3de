//! A small MCP server for spool's tests, on stdio: `echo` answers with its
//! text, `fail` answers with an error result, `sleep` waits, `env` reads
//! its environment. With
//! `--exit-at-start` it exits before answering anything, saying so on
//! stderr; with `--pid-file PATH` it writes its pid there first; with
//! `--mute` it never answers (and never exits by itself).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// What to answer with.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EnvArgs {
    /// The variable to read.
    name: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    /// Milliseconds to wait.
    ms: u64,
}

#[derive(Clone)]
struct TestServer;

#[tool_router]
impl TestServer {
    #[tool(
        description = "Answers with the text it is given",
        annotations(read_only_hint = true)
    )]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Always fails", annotations(destructive_hint = true))]
    fn fail(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "this tool always fails",
        )]))
    }

    #[tool(description = "Answers with an environment variable's value, or `unset`")]
    fn env(&self, Parameters(EnvArgs { name }): Parameters<EnvArgs>) -> String {
        std::env::var(name).unwrap_or_else(|_| "unset".to_owned())
    }

    #[tool(description = "Waits, then answers")]
    async fn sleep(&self, Parameters(SleepArgs { ms }): Parameters<SleepArgs>) -> String {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        format!("slept {ms} ms")
    }
}

#[tool_handler]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--pid-file") {
        let path = args.get(at + 1).ok_or("--pid-file PATH")?;
        std::fs::write(path, std::process::id().to_string())?;
    }
    if args.iter().any(|a| a == "--mute") {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("test server: exiting at start, as asked");
        std::process::exit(3);
    }
    let server = TestServer;
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
