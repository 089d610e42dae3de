//! `spool mcp list`: each MCP server of `$SPOOL_HOME/spool.toml`, started
//! as a turn would start it, with its state and its tools.

use serde_json::{Value, json};
use spool_mcp::{McpTool, ServerState, ServerStatus};

use crate::config::ConfigFile;

/// The servers of `configs` as one process's toolbox (each started on
/// first use). Each runs under spool's own helper, which kills it when
/// spool dies, however it dies.
fn servers(
    configs: &std::collections::BTreeMap<String, spool_mcp::McpServerConfig>,
) -> std::sync::Arc<spool_mcp::McpServers> {
    let launcher = std::env::current_exe()
        .ok()
        .map(spool_tools::sandbox::Launcher::spool);
    std::sync::Arc::new(spool_mcp::McpServers::new(configs.clone(), launcher))
}

/// What `spool serve` gets of MCP: the toolbox every thread's agent shares
/// (always, maybe empty: a reload can add servers), the methods' admin,
/// and the servers whose start and failure every connection hears of.
pub struct ServeMcp {
    pub toolbox: Option<super::run::McpToolboxRef>,
    pub admin: Option<std::sync::Arc<dyn spool_server::McpAdmin>>,
    servers: std::sync::Arc<spool_mcp::McpServers>,
}

pub fn serve_setup(
    configs: &std::collections::BTreeMap<String, spool_mcp::McpServerConfig>,
) -> anyhow::Result<ServeMcp> {
    let servers = servers(configs);
    Ok(ServeMcp {
        toolbox: Some(servers.clone()),
        admin: Some(std::sync::Arc::new(ServedMcp {
            servers: servers.clone(),
            home: crate::home::spool_home()?,
            cwd: std::env::current_dir()?,
        })),
        servers,
    })
}

impl ServeMcp {
    /// Every connection of `hub` hears when a server starts, is ready or
    /// fails (`mcpServer/startupStatus/updated`).
    pub fn announce(&self, hub: &std::sync::Arc<spool_server::Hub>) {
        tokio::spawn(announce_updates(
            self.servers.clone(),
            std::sync::Arc::downgrade(hub),
        ));
    }
}

/// As [`servers`], or none when no server is configured (`spool run`).
pub fn toolbox(
    configs: &std::collections::BTreeMap<String, spool_mcp::McpServerConfig>,
) -> Option<super::run::McpToolboxRef> {
    (!configs.is_empty()).then(|| servers(configs) as _)
}

/// Starts every enabled server at once (each within its own startup
/// timeout), as a turn would start them, and prints them in name order;
/// 1 when a `required` one failed.
pub async fn list(config: &ConfigFile, json_lines: bool) -> anyhow::Result<i32> {
    if config.mcp_servers.is_empty() {
        eprintln!("no MCP servers: declare them as [mcp_servers.NAME] in $SPOOL_HOME/spool.toml");
        return Ok(0);
    }
    // Each server on its own, ended as soon as it is listed: one that is
    // slow to start keeps no other running.
    let mut starting = tokio::task::JoinSet::new();
    for (name, section) in &config.mcp_servers {
        let one = servers(&[(name.clone(), section.clone())].into());
        starting.spawn(async move { one.start_all().await });
    }
    let mut statuses = Vec::with_capacity(config.mcp_servers.len());
    while let Some(done) = starting.join_next().await {
        statuses.extend(done?);
    }
    statuses.sort_by(|a, b| a.name.cmp(&b.name));
    let width = statuses.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut required_failed = false;
    for status in &statuses {
        let failed = matches!(status.state, ServerState::Failed { .. });
        required_failed |= status.required && failed;
        if json_lines {
            println!("{}", as_json(status));
            continue;
        }
        let name = &status.name;
        let required = if status.required { " (required)" } else { "" };
        match &status.state {
            ServerState::Ready => {
                let names: Vec<&str> = status.tools.iter().map(|t| t.name.as_str()).collect();
                println!(
                    "{name:width$}  ready{required}  {} tool{}: {}",
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                );
            }
            ServerState::Failed { error } => println!("{name:width$}  failed{required}  {error}"),
            state => println!("{name:width$}  {}{required}", state.as_str()),
        }
    }
    Ok(i32::from(required_failed))
}

fn as_json(status: &ServerStatus) -> Value {
    let error = match &status.state {
        ServerState::Failed { error } => Some(error.as_str()),
        _ => None,
    };
    let tools: Vec<Value> = status.tools.iter().map(tool_json).collect();
    json!({"name": status.name, "state": status.state.as_str(), "required": status.required,
           "tools": tools, "error": error})
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

/// The MCP methods of `spool serve` over the process's servers; a reload
/// reads `[mcp_servers]` from `$SPOOL_HOME/spool.toml` again.
struct ServedMcp {
    servers: std::sync::Arc<spool_mcp::McpServers>,
    home: std::path::PathBuf,
    cwd: std::path::PathBuf,
}

impl spool_server::McpAdmin for ServedMcp {
    fn status<'a>(
        &'a self,
        server: Option<&'a str>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Vec<spool_protocol::McpServerStatus>> + Send + 'a>,
    > {
        Box::pin(async move {
            let configs = self.servers.configs();
            self.servers
                .start_all()
                .await
                .into_iter()
                .filter(|status| server.is_none_or(|name| name == status.name))
                .map(|status| {
                    let config = configs.get(&status.name).cloned().unwrap_or_default();
                    codex_status(status, &config)
                })
                .collect()
        })
    }

    fn reload(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(async move {
            let config = ConfigFile::load_layered(&self.home, &self.cwd)
                .map_err(|error| format!("cannot read the configuration: {error}"))?;
            self.servers.reload(config.mcp_servers);
            Ok(())
        })
    }
}

/// Sends each server's start, readiness or failure to the hub's
/// connections (`mcpServer/startupStatus/updated`) until the hub is gone.
async fn announce_updates(
    servers: std::sync::Arc<spool_mcp::McpServers>,
    hub: std::sync::Weak<spool_server::Hub>,
) {
    let mut updates = servers.subscribe();
    drop(servers);
    loop {
        let update = match updates.recv().await {
            Ok(update) => update,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        let Some(hub) = hub.upgrade() else { return };
        let (status, error) = match update.state {
            ServerState::Starting => ("starting", None),
            ServerState::Ready => ("ready", None),
            ServerState::Failed { error } => ("failed", Some(error)),
            // Not announced: nothing started or ended.
            ServerState::Disabled | ServerState::NotStarted => continue,
        };
        let notification = spool_protocol::McpServerStatusUpdatedNotification {
            name: update.name,
            status: status.to_owned(),
            error,
            thread_id: None,
        };
        hub.notice(spool_protocol::MCP_SERVER_STATUS_UPDATED, &notification);
    }
}

/// One server in Codex's `McpServerStatus` shape.
fn codex_status(
    status: ServerStatus,
    config: &spool_mcp::McpServerConfig,
) -> spool_protocol::McpServerStatus {
    let runtime = match &status.state {
        ServerState::Disabled => "disabled",
        ServerState::NotStarted => "notStarted",
        ServerState::Starting => "starting",
        ServerState::Ready => "connected",
        ServerState::Failed { .. } => "failed",
    };
    let tools = status
        .tools
        .iter()
        .map(|tool| {
            let mut hints = serde_json::Map::new();
            if let Some(read_only) = tool.read_only {
                hints.insert("readOnlyHint".to_owned(), read_only.into());
            }
            if let Some(destructive) = tool.destructive {
                hints.insert("destructiveHint".to_owned(), destructive.into());
            }
            let description = spool_protocol::McpToolDescription {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
                annotations: (!hints.is_empty()).then_some(Value::Object(hints)),
            };
            (tool.name.clone(), description)
        })
        .collect();
    spool_protocol::McpServerStatus {
        name: status.name,
        tools,
        resources: Vec::new(),
        resource_templates: Vec::new(),
        auth_status: match (&config.url, &config.bearer_token_env_var) {
            (Some(_), Some(_)) => "bearerToken",
            _ => "unsupported",
        }
        .to_owned(),
        runtime_status: Some(runtime.to_owned()),
        tools_error: match status.state {
            ServerState::Failed { error } => Some(error),
            _ => None,
        },
        http_origin: config.url.as_deref().and_then(http_origin),
    }
}

/// `scheme://host[:port]` of a URL, without credentials, path or query.
fn http_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    Some(format!("{scheme}://{host}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_origin_keeps_no_credentials_path_or_query() {
        assert_eq!(
            super::http_origin("https://user:secret@mcp.example:8443/v1/mcp?key=1"),
            Some("https://mcp.example:8443".to_owned())
        );
        assert_eq!(super::http_origin("not a url"), None);
    }
}
