//! Starting an MCP server, asking for its tools and calling them.

mod elicit;
mod failure;
mod http;
mod session;
mod stdio;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError};
use rmcp::transport::Transport as RmcpTransport;

use spool_tools::sandbox::Launcher;

use self::failure::{Failure, describe, failure};
use self::session::{Session, Tap};
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
    /// `bearer_token_env_var` names a variable that is not set (its value
    /// is never part of an error).
    #[error("MCP server {name}: bearer_token_env_var names {var}, which is not set (or is empty)")]
    TokenUnset { name: String, var: String },
    #[error("MCP server {name}: cannot make an HTTP client: {reason}")]
    Http { name: String, reason: String },
    /// The server answered 401 or 403: no token, or not one it accepts.
    #[error("MCP server {name}: refused with HTTP {status}; {}", token_hint(.token_var))]
    Unauthorized {
        name: String,
        status: u16,
        /// `bearer_token_env_var`, when the section names one.
        token_var: Option<String>,
    },
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

fn token_hint(token_var: &Option<String>) -> String {
    match token_var {
        Some(var) => format!("the token in {var} was not accepted"),
        None => {
            "no token was sent (bearer_token_env_var names the variable holding one)".to_owned()
        }
    }
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
    /// The connection ended during the call: the server exited or
    /// crashed. Over stdio no later call on the connection will have an
    /// answer either ([`McpConnection::is_closed`]); over HTTP it is the
    /// call's response stream that broke off (and could not be resumed),
    /// and a later call reaches whatever answers at the URL then.
    #[error("MCP tool {server}/{tool}: the connection to the server closed: {reason}")]
    Closed {
        server: String,
        tool: String,
        reason: String,
    },
}

/// A progress notification of a call in flight, as the server sent it
/// (the runtime's own type: it goes to the item unchanged).
pub use spool_tools::mcp::McpProgress;

/// A started server, initialized, with the tools it offers (those its
/// section lets through).
pub struct McpConnection {
    name: String,
    service: RunningService<RoleClient, elicit::Handler>,
    /// Who answers the questions of the calls running now.
    askers: Arc<elicit::Askers>,
    /// As last listed; listed again by `list_tools`.
    tools: Mutex<Vec<McpTool>>,
    /// Which tools the section lets through (`enabled_tools`,
    /// `disabled_tools`).
    filter: McpServerConfig,
    session: Arc<Session>,
    /// A child's stderr (none for a server reached over HTTP).
    stderr: Option<stdio::StderrTail>,
    /// Dropped last: kills what the session's end did not.
    _group: Option<stdio::Group>,
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.name)
            .field("tools", &self.tools().len())
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
        match config.transport(name)? {
            Transport::Stdio { command } => {
                let child = stdio::spawn(name, command, config, launcher)?;
                let started = Started {
                    stderr: Some(child.stderr),
                    group: Some(child.group),
                };
                started
                    .initialize(name, config, timeout, child.transport)
                    .await
            }
            Transport::Http { url } => {
                let transport = http::transport(name, url, config)?;
                let started = Started {
                    stderr: None,
                    group: None,
                };
                started.initialize(name, config, timeout, transport).await
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools offered, in the server's order, as last listed (at
    /// start, or by [`McpConnection::list_tools`]).
    pub fn tools(&self) -> Vec<McpTool> {
        self.tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Lists the tools again (every page, filtered by the section) within
    /// `timeout`, and keeps the list. Cheap when nothing changed: rmcp
    /// answers from its cache, which a server's
    /// `notifications/tools/list_changed` empties, so a server that says
    /// its tools changed is asked again.
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<McpTool>, McpCallError> {
        let failed = |reason: String| McpCallError::Failed {
            server: self.name.clone(),
            tool: "tools/list".to_owned(),
            reason,
        };
        let listed = tokio::time::timeout(timeout, self.service.list_all_tools())
            .await
            .map_err(|_| failed(format!("no answer within {timeout:?}")))?
            .map_err(|e| failed(e.to_string()))?;
        let tools = offered(listed, &self.filter);
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = tools.clone();
        Ok(tools)
    }

    /// Whether the server said its tools changed since they were listed
    /// (`notifications/tools/list_changed`).
    pub fn tools_changed(&self) -> bool {
        self.session.tools_changed()
    }

    /// Whether the connection ended (a child that exited or crashed, an
    /// HTTP transport that gave up): every call from now on is
    /// [`McpCallError::Closed`].
    pub fn is_closed(&self) -> bool {
        self.session.is_closed() || self.service.is_transport_closed()
    }

    /// Calls `tool` (as the server names it) with `arguments`, waiting at
    /// most `timeout`; past it, the request is cancelled (the server is
    /// told) and the connection stays usable. The server's progress
    /// notifications for the call go to `progress`, in the order it sent
    /// them, each before the call returns. A call dropped before its answer
    /// is cancelled too.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        timeout: Duration,
        progress: &(dyn Fn(McpProgress) + Send + Sync),
    ) -> Result<McpCallResult, McpCallError> {
        self.call_tool_asking(tool, arguments, timeout, progress, None)
            .await
    }

    /// As [`McpConnection::call_tool`], with `elicit` answering the
    /// questions the server asks while the call runs (declined without
    /// one).
    pub async fn call_tool_asking(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        timeout: Duration,
        progress: &(dyn Fn(McpProgress) + Send + Sync),
        elicit: Option<spool_tools::mcp::McpElicit>,
    ) -> Result<McpCallResult, McpCallError> {
        let _asking = elicit.map(|asker| self.askers.register(asker));
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // rmcp's own timeout: past it, it tells the server the request is
        // cancelled and forgets it.
        let options = PeerRequestOptions::with_timeout(timeout);
        let handle = match self
            .service
            .send_request_with_option(request, options)
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.call_error(tool, error).await),
        };
        let mut subscription = self.session.subscribe(handle.progress_token.clone());
        let mut abandoned = Abandoned {
            peer: self.service.peer(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response();
        tokio::pin!(answer);
        let answer = loop {
            tokio::select! {
                // Progress first: what the server sent before its answer
                // reaches the caller before the answer does.
                biased;
                Some(update) = subscription.receiver.recv() => progress(update),
                answer = &mut answer => break answer,
            }
        };
        abandoned.id = None;
        // Routed before the answer arrived (the tap routes as it reads),
        // not yet handed on.
        while let Ok(update) = subscription.receiver.try_recv() {
            progress(update);
        }
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            // A tool may answer with nothing at all.
            Ok(ServerResult::EmptyResult(_)) => Default::default(),
            Ok(_) => {
                return Err(self
                    .call_error(tool, ServiceError::UnexpectedResponse)
                    .await);
            }
            Err(error) => return Err(self.call_error(tool, error).await),
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

    /// Why a call has no result: a timeout, the connection's end, or what
    /// the server or the transport said.
    async fn call_error(&self, tool: &str, error: ServiceError) -> McpCallError {
        let (server, tool) = (self.name.clone(), tool.to_owned());
        // A message that could not be written once the transport ended
        // failed for the same reason.
        let closed = match &error {
            ServiceError::TransportClosed => true,
            ServiceError::TransportSend(_) => self.is_closed(),
            _ => false,
        };
        match error {
            ServiceError::Timeout { timeout } => McpCallError::Timeout {
                server,
                tool,
                after: timeout,
            },
            _ if closed => {
                let mut reason = "the server hung up (it exited?)".to_owned();
                if let Some(stderr) = &self.stderr
                    && let Some(line) = stderr.last_words().await
                {
                    reason.push_str("; it said: ");
                    reason.push_str(&line);
                }
                McpCallError::Closed {
                    server,
                    tool,
                    reason,
                }
            }
            error => McpCallError::Failed {
                server,
                tool,
                reason: describe(&error),
            },
        }
    }

    /// Ends the session and the child.
    pub async fn close(self) {
        if let Err(error) = self.service.cancel().await {
            tracing::debug!(server = %self.name, %error, "closing an MCP session");
        }
    }
}

/// A transport on its way to being a connection, and what the connection
/// keeps of how it was started.
struct Started {
    stderr: Option<stdio::StderrTail>,
    group: Option<stdio::Group>,
}

impl Started {
    /// Initializes the session over `transport` and lists the tools, within
    /// `timeout`.
    async fn initialize<T>(
        self,
        name: &str,
        config: &McpServerConfig,
        timeout: Duration,
        transport: T,
    ) -> Result<McpConnection, McpError>
    where
        T: RmcpTransport<RoleClient> + 'static,
    {
        let session = Arc::new(Session::default());
        let askers = Arc::new(elicit::Askers::default());
        let tap = Tap {
            inner: transport,
            session: session.clone(),
        };
        let started = tokio::time::timeout(timeout, async {
            let handler = elicit::Handler {
                askers: askers.clone(),
            };
            let service = handler
                .serve(tap)
                .await
                .map_err(|e| failure("initialize", &e))?;
            let listed = service
                .list_all_tools()
                .await
                .map_err(|e| failure("tools/list", &e))?;
            Ok::<_, Failure>((service, listed))
        })
        .await;
        let (service, listed) = match started {
            Ok(Ok(started)) => started,
            failed => {
                let stderr = match &self.stderr {
                    Some(stderr) => stderr.last_words().await,
                    None => None,
                };
                let name = name.to_owned();
                return Err(match failed {
                    Ok(Err(Failure {
                        refused: Some(status),
                        ..
                    })) => McpError::Unauthorized {
                        name,
                        status,
                        token_var: config.bearer_token_env_var.clone(),
                    },
                    Ok(Err(Failure { doing, reason, .. })) => McpError::Protocol {
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
        let tools = offered(listed, config);
        Ok(McpConnection {
            name: name.to_owned(),
            service,
            askers,
            tools: Mutex::new(tools),
            filter: McpServerConfig {
                enabled_tools: config.enabled_tools.clone(),
                disabled_tools: config.disabled_tools.clone(),
                ..McpServerConfig::default()
            },
            session,
            stderr: self.stderr,
            _group: self.group,
        })
    }
}

/// The listed tools the section lets through, as spool describes them.
fn offered(listed: Vec<rmcp::model::Tool>, config: &McpServerConfig) -> Vec<McpTool> {
    listed
        .into_iter()
        .filter(|tool| config.offers(&tool.name))
        .map(|tool| McpTool {
            name: tool.name.to_string(),
            description: tool.description.map(|d| d.to_string()),
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            read_only: tool.annotations.as_ref().and_then(|a| a.read_only_hint),
            destructive: tool.annotations.as_ref().and_then(|a| a.destructive_hint),
        })
        .collect()
}

/// Tells the server a call is cancelled when the caller drops it before
/// its answer (a turn interrupted): the server can stop working on it.
struct Abandoned<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let reason = "the caller abandoned the call".to_owned();
            let cancelled = CancelledNotificationParam::new(Some(id), Some(reason));
            let _ = peer.notify_cancelled(cancelled).await;
        });
    }
}
