//! `spool mcp list`: each MCP server of `$SPOOL_HOME/spool.toml`, started
//! as a turn would start it, with its state and its tools.

use serde_json::{Value, json};
use spool_mcp::{McpConnection, McpTool};
use tokio::task::JoinSet;

use crate::config::ConfigFile;

/// What became of one server.
enum State {
    Disabled,
    Ready(Vec<McpTool>),
    Failed(String),
}

/// Starts every enabled server at once (each within its own startup
/// timeout) and prints them in name order; 1 when a `required` one failed.
pub async fn list(config: &ConfigFile, json_lines: bool) -> anyhow::Result<i32> {
    if config.mcp_servers.is_empty() {
        eprintln!("no MCP servers: declare them as [mcp_servers.NAME] in $SPOOL_HOME/spool.toml");
        return Ok(0);
    }
    // Each server runs under spool's own helper, which kills it when spool
    // dies, however it dies.
    let launcher = std::env::current_exe()
        .ok()
        .map(spool_tools::sandbox::Launcher::spool);
    let mut starting = JoinSet::new();
    for (name, server) in &config.mcp_servers {
        let (name, server, launcher) = (name.clone(), server.clone(), launcher.clone());
        starting.spawn(async move {
            let state = match server.enabled {
                false => State::Disabled,
                true => match McpConnection::start(&name, &server, launcher.as_ref()).await {
                    Ok(connection) => {
                        let tools = connection.tools().to_vec();
                        connection.close().await;
                        State::Ready(tools)
                    }
                    Err(error) => State::Failed(error.to_string()),
                },
            };
            (name, server.required, state)
        });
    }
    let mut servers = Vec::with_capacity(config.mcp_servers.len());
    while let Some(done) = starting.join_next().await {
        servers.push(done?);
    }
    servers.sort_by(|a, b| a.0.cmp(&b.0));
    let width = servers
        .iter()
        .map(|(name, ..)| name.len())
        .max()
        .unwrap_or(0);
    let mut required_failed = false;
    for (name, required, state) in &servers {
        required_failed |= *required && matches!(state, State::Failed(_));
        if json_lines {
            println!("{}", as_json(name, *required, state));
            continue;
        }
        let required = if *required { " (required)" } else { "" };
        match state {
            State::Disabled => println!("{name:width$}  disabled{required}"),
            State::Ready(tools) => {
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                println!(
                    "{name:width$}  ready{required}  {} tool{}: {}",
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" },
                    names.join(", ")
                );
            }
            State::Failed(error) => println!("{name:width$}  failed{required}  {error}"),
        }
    }
    Ok(i32::from(required_failed))
}

fn as_json(name: &str, required: bool, state: &State) -> Value {
    let (state, tools, error) = match state {
        State::Disabled => ("disabled", Vec::new(), None),
        State::Ready(tools) => ("ready", tools.iter().map(tool_json).collect(), None),
        State::Failed(error) => ("failed", Vec::new(), Some(error.as_str())),
    };
    json!({"name": name, "state": state, "required": required, "tools": tools, "error": error})
}

fn tool_json(tool: &McpTool) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "readOnlyHint": tool.read_only,
        "destructiveHint": tool.destructive,
    })
}
