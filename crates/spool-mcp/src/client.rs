//! Starting an MCP server and asking for its tools.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt, BufReader};

use spool_tools::sandbox::Launcher;

use crate::config::{ConfigError, McpServerConfig, Transport};

/// A tool a server offers, as the server names and describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
    /// The server's hints (`readOnlyHint`, `destructiveHint`).
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("MCP server {name}: streamable HTTP ({url}) is not supported yet")]
    HttpNotBuilt { name: String, url: String },
    #[error("MCP server {name}: cannot start `{command}`: {source}")]
    Spawn {
        name: String,
        command: String,
        source: std::io::Error,
    },
    #[error("MCP server {name}: {doing} failed: {reason}{}", stderr_tail(.stderr))]
    Protocol {
        name: String,
        doing: &'static str,
        reason: String,
        stderr: Option<String>,
    },
    #[error("MCP server {name}: not ready after {after:?} (startup_timeout_sec){}", stderr_tail(.stderr))]
    Timeout {
        name: String,
        after: Duration,
        stderr: Option<String>,
    },
}

fn stderr_tail(stderr: &Option<String>) -> String {
    match stderr {
        Some(line) => format!("; it said: {line}"),
        None => String::new(),
    }
}

/// What a tool answered: its content blocks and structured content as the
/// protocol carries them (the shapes Codex's `mcpToolCall` result holds),
/// and whether the tool says it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    pub content: Vec<serde_json::Value>,
    pub structured_content: Option<serde_json::Value>,
    pub is_error: bool,
}

/// Why a tool call has no result.
#[derive(Debug, thiserror::Error)]
pub enum McpCallError {
    #[error("MCP tool {server}/{tool}: no answer within {after:?} (tool_timeout_sec)")]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },
    #[error("MCP tool {server}/{tool}: {reason}")]
    Failed {
        server: String,
        tool: String,
        reason: String,
    },
}

/// A started server, initialized, with the tools it offers (those its
/// section lets through).
pub struct McpConnection {
    name: String,
    service: RunningService<RoleClient, ()>,
    tools: Vec<McpTool>,
    /// Dropped last: kills what the session's end did not.
    _group: Group,
}

/// What a server gets of spool's environment: what a program needs to run
/// (as Codex passes on), never the rest, which holds API keys and tokens a
/// third-party server has no business seeing. Its section's `env` adds to
/// it.
const PASSED_ON: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];

fn passed_on() -> impl Iterator<Item = (&'static str, std::ffi::OsString)> {
    PASSED_ON
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
}

/// The process group of a server (its leader's pid): killed, whole, when
/// dropped. Killing only the leader would leave what the server started
/// (`npx` starts `node`), and under the helper, the server itself. (A
/// group whose every process ended long before could in principle see
/// its id reused by a new group; sessions end promptly on close, which is
/// when this runs in practice.)
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        let Some(pid) = self.0.and_then(|pid| i32::try_from(pid).ok()) else {
            return;
        };
        // Gone already (it exited, and was reaped) is fine.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// Starts the server `name` of `config`, initializes it and lists its
    /// tools, all within its startup timeout. The server, and whatever it
    /// started, is killed when the connection is dropped.
    ///
    /// With a `launcher` (spool's own `sandbox-exec` helper, unconfined),
    /// the server runs under the helper, in a process group of its own:
    /// the helper kills the group when spool dies, however it dies, so no
    /// server outlives spool. Without one it is spool's direct child.
    pub async fn start(
        name: &str,
        config: &McpServerConfig,
        launcher: Option<&Launcher>,
    ) -> Result<McpConnection, McpError> {
        let timeout = config.startup_timeout(name)?;
        let command = match config.transport(name)? {
            Transport::Stdio { command } => command,
            Transport::Http { url } => {
                return Err(McpError::HttpNotBuilt {
                    name: name.to_owned(),
                    url: url.to_owned(),
                });
            }
        };
        let argv: Vec<String> = std::iter::once(command.to_owned())
            .chain(config.args.iter().cloned())
            .collect();
        let argv = match launcher {
            Some(launcher) => launcher.wrap_unconfined(&argv),
            None => argv,
        };
        let mut child = tokio::process::Command::new(&argv[0]);
        child
            .args(&argv[1..])
            .env_clear()
            .envs(passed_on())
            .envs(&config.env)
            .kill_on_drop(true)
            .process_group(0);
        if let Some(cwd) = &config.cwd {
            child.current_dir(cwd);
        }
        let (transport, stderr) = TokioChildProcess::builder(child)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| McpError::Spawn {
                name: name.to_owned(),
                command: command.to_owned(),
                source,
            })?;
        // From here on, dropping `group` kills the server's whole group.
        let group = Group(transport.id());
        // What the server writes on stderr goes to the log; its last line
        // explains a failure.
        let last_line = Arc::new(Mutex::new(None::<String>));
        let reader = stderr.map(|stderr| {
            let (server, last_line) = (name.to_owned(), last_line.clone());
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %server, "{line}");
                    if !line.trim().is_empty() {
                        *last_line.lock().unwrap_or_else(PoisonError::into_inner) = Some(line);
                    }
                }
            })
        });
        let started = tokio::time::timeout(timeout, async {
            let service = ().serve(transport).await.map_err(|e| ("initialize", e.to_string()))?;
            let listed = service
                .list_all_tools()
                .await
                .map_err(|e| ("tools/list", e.to_string()))?;
            Ok::<_, (&'static str, String)>((service, listed))
        })
        .await;
        let (service, listed) = match started {
            Ok(Ok(started)) => started,
            failed => {
                // The child's last words: what it wrote before its stderr
                // closed, or within a moment.
                if let Some(reader) = reader {
                    let _ = tokio::time::timeout(Duration::from_millis(200), reader).await;
                }
                let stderr = last_line
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let name = name.to_owned();
                return Err(match failed {
                    Ok(Err((doing, reason))) => McpError::Protocol {
                        name,
                        doing,
                        reason,
                        stderr,
                    },
                    _ => McpError::Timeout {
                        name,
                        after: timeout,
                        stderr,
                    },
                });
            }
        };
        let tools = listed
            .into_iter()
            .filter(|tool| config.offers(&tool.name))
            .map(|tool| McpTool {
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()),
                input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
                read_only: tool.annotations.as_ref().and_then(|a| a.read_only_hint),
                destructive: tool.annotations.as_ref().and_then(|a| a.destructive_hint),
            })
            .collect();
        Ok(McpConnection {
            name: name.to_owned(),
            service,
            tools,
            _group: group,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools offered, in the server's order.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// Calls `tool` (as the server names it) with `arguments`, waiting at
    /// most `timeout`; past it, the request is cancelled (the server is
    /// told) and the connection stays usable.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        timeout: Duration,
    ) -> Result<McpCallResult, McpCallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let called = tokio::time::timeout(timeout, self.service.call_tool(params)).await;
        let result = match called {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                return Err(McpCallError::Failed {
                    server: self.name.clone(),
                    tool: tool.to_owned(),
                    reason: error.to_string(),
                });
            }
            Err(_) => {
                return Err(McpCallError::Timeout {
                    server: self.name.clone(),
                    tool: tool.to_owned(),
                    after: timeout,
                });
            }
        };
        let content = result
            .content
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| McpCallError::Failed {
                server: self.name.clone(),
                tool: tool.to_owned(),
                reason: format!("cannot read its content: {error}"),
            })?;
        Ok(McpCallResult {
            content,
            structured_content: result.structured_content,
            is_error: result.is_error.unwrap_or(false),
        })
    }

    /// Ends the session and the child.
    pub async fn close(self) {
        if let Err(error) = self.service.cancel().await {
            tracing::debug!(server = %self.name, %error, "closing an MCP session");
        }
    }
}
