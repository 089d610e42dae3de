//! The MCP servers of one spool process: started on first use, shared by
//! every thread, restarted after a crash, and reported by status.
//!
//! A server starts the first time its tools are listed (a turn's model
//! call lists them) and then serves every thread. Concurrent callers wait
//! for one start, never start two. A server whose session ended (it
//! crashed, or exited) is started again on the next use. A start that
//! fails, or a server that crashes again before any call got an answer,
//! waits for its backoff: 0.5 s after the first such failure, doubling up
//! to 30 s, so a server that dies at once is not restarted in a loop. A
//! call that meets a dead server fails with an error saying so; the model
//! and the person see it on the item.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use spool_tools::mcp::{BoxFuture, McpElicit, McpOutcome, McpProgress, McpToolInfo, McpToolbox};
use spool_tools::sandbox::Launcher;
use tokio::sync::broadcast;

use crate::client::{McpCallError, McpConnection, McpTool};
use crate::config::McpServerConfig;

/// The first wait before a failed server is started again.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where a server is, as `mcpServerStatus/list` and `spool mcp list` say.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerState {
    /// `enabled = false`.
    Disabled,
    /// Not used yet: it starts on first use.
    NotStarted,
    Starting,
    Ready,
    /// Its last start failed, or its session ended; `error` says why.
    Failed {
        error: String,
    },
}

impl ServerState {
    pub fn as_str(&self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::NotStarted => "not started",
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Failed { .. } => "failed",
        }
    }
}

/// One server's status.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// The tools it offers (empty unless ready).
    pub tools: Vec<McpTool>,
    pub required: bool,
}

/// A server's start began or ended (for `mcpServer/startupStatus/updated`).
#[derive(Debug, Clone, PartialEq)]
pub struct StartupUpdate {
    pub name: String,
    pub state: ServerState,
}

/// Every configured server of the process.
pub struct McpServers {
    launcher: Option<Launcher>,
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
    updates: broadcast::Sender<StartupUpdate>,
}

struct Slot {
    name: String,
    config: McpServerConfig,
    /// Held across a start, so concurrent users wait for the one start.
    state: tokio::sync::Mutex<SlotState>,
    /// Sessions that ended under a call since a call last got an answer.
    crashes: AtomicU32,
}

enum SlotState {
    Idle,
    Ready(Arc<McpConnection>),
    Failed {
        error: String,
        at: Instant,
        failures: u32,
    },
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.slots().keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl McpServers {
    /// The servers of `configs`, none started. With a `launcher` each runs
    /// under spool's helper (see [`McpConnection::start`]).
    pub fn new(configs: BTreeMap<String, McpServerConfig>, launcher: Option<Launcher>) -> Self {
        let (updates, _) = broadcast::channel(64);
        let servers = McpServers {
            launcher,
            slots: Mutex::new(BTreeMap::new()),
            updates,
        };
        servers.reload(configs);
        servers
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every server's section, by name.
    pub fn configs(&self) -> BTreeMap<String, McpServerConfig> {
        self.slots()
            .iter()
            .map(|(name, slot)| (name.clone(), slot.config.clone()))
            .collect()
    }

    /// Whether any server is configured (enabled or not).
    pub fn is_empty(&self) -> bool {
        self.slots().is_empty()
    }

    /// Start and failure news of every server.
    pub fn subscribe(&self) -> broadcast::Receiver<StartupUpdate> {
        self.updates.subscribe()
    }

    /// Takes a new configuration: a server whose section changed, or that
    /// is gone, is stopped (its connection dropped kills it); a new or
    /// changed one starts on its next use. Unchanged servers go on.
    pub fn reload(&self, configs: BTreeMap<String, McpServerConfig>) {
        let mut slots = self.slots();
        slots.retain(|name, slot| configs.get(name) == Some(&slot.config));
        for (name, config) in configs {
            slots.entry(name.clone()).or_insert_with(|| {
                Arc::new(Slot {
                    name,
                    config,
                    state: tokio::sync::Mutex::new(SlotState::Idle),
                    crashes: AtomicU32::new(0),
                })
            });
        }
    }

    /// Starts every enabled server that is not running (each within its
    /// startup timeout, all at once) and reports them all.
    pub async fn start_all(&self) -> Vec<ServerStatus> {
        let slots: Vec<Arc<Slot>> = self.slots().values().cloned().collect();
        let starts = slots
            .iter()
            .filter(|slot| slot.config.enabled)
            .map(|slot| self.connection(slot));
        futures_util::future::join_all(starts).await;
        self.status().await
    }

    /// Every server's status, without starting any.
    pub async fn status(&self) -> Vec<ServerStatus> {
        let slots: Vec<Arc<Slot>> = self.slots().values().cloned().collect();
        let mut out = Vec::with_capacity(slots.len());
        for slot in slots {
            let (state, tools) = match slot.state.try_lock() {
                _ if !slot.config.enabled => (ServerState::Disabled, Vec::new()),
                Err(_) => (ServerState::Starting, Vec::new()),
                Ok(state) => match &*state {
                    SlotState::Idle => (ServerState::NotStarted, Vec::new()),
                    SlotState::Ready(connection) if connection.is_closed() => (
                        ServerState::Failed {
                            error: format!("MCP server {}: its session ended", slot.name),
                        },
                        Vec::new(),
                    ),
                    SlotState::Ready(connection) => (ServerState::Ready, connection.tools()),
                    SlotState::Failed { error, .. } => (
                        ServerState::Failed {
                            error: error.clone(),
                        },
                        Vec::new(),
                    ),
                },
            };
            out.push(ServerStatus {
                name: slot.name.clone(),
                state,
                tools,
                required: slot.config.required,
            });
        }
        out
    }

    /// The running connection of `slot`, starting it when it is not
    /// running and its backoff has passed.
    async fn connection(&self, slot: &Slot) -> Result<Arc<McpConnection>, String> {
        let mut state = slot.state.lock().await;
        let failures = match &*state {
            SlotState::Ready(connection) if !connection.is_closed() => {
                return Ok(connection.clone());
            }
            // It ended since its last use: a first failure.
            SlotState::Ready(_) => 0,
            SlotState::Idle => 0,
            SlotState::Failed {
                error,
                at,
                failures,
            } => {
                let wait = backoff(*failures);
                if at.elapsed() < wait {
                    let left = wait.saturating_sub(at.elapsed());
                    return Err(format!(
                        "{error} (started again in {:.1} s)",
                        left.as_secs_f64()
                    ));
                }
                *failures
            }
        };
        let _ = self.updates.send(StartupUpdate {
            name: slot.name.clone(),
            state: ServerState::Starting,
        });
        match McpConnection::start(&slot.name, &slot.config, self.launcher.as_ref()).await {
            Ok(connection) => {
                let connection = Arc::new(connection);
                *state = SlotState::Ready(connection.clone());
                let _ = self.updates.send(StartupUpdate {
                    name: slot.name.clone(),
                    state: ServerState::Ready,
                });
                Ok(connection)
            }
            Err(error) => {
                let error = error.to_string();
                tracing::warn!(server = %slot.name, %error, "an MCP server did not start");
                *state = SlotState::Failed {
                    error: error.clone(),
                    at: Instant::now(),
                    failures: failures + 1,
                };
                let _ = self.updates.send(StartupUpdate {
                    name: slot.name.clone(),
                    state: ServerState::Failed {
                        error: error.clone(),
                    },
                });
                Err(error)
            }
        }
    }

    /// Marks `slot` failed after its session ended under a call, so the
    /// next use starts it again: at once after a first crash, after the
    /// backoff when it crashed again before any call got an answer.
    async fn ended(&self, slot: &Slot, error: &str) {
        let mut state = slot.state.lock().await;
        if let SlotState::Ready(connection) = &*state
            && connection.is_closed()
        {
            let crashes = slot.crashes.fetch_add(1, Ordering::Relaxed) + 1;
            *state = SlotState::Failed {
                error: error.to_owned(),
                at: Instant::now(),
                failures: crashes - 1,
            };
            let _ = self.updates.send(StartupUpdate {
                name: slot.name.clone(),
                state: ServerState::Failed {
                    error: error.to_owned(),
                },
            });
        }
    }

    async fn list(&self) -> Result<Vec<McpToolInfo>, String> {
        let slots: Vec<Arc<Slot>> = self
            .slots()
            .values()
            .filter(|slot| slot.config.enabled)
            .cloned()
            .collect();
        let listing =
            slots.iter().map(|slot| async move {
                let connection = self.connection(slot).await?;
                // Asked again each time: rmcp answers from its cache unless the
                // server said its tools changed.
                let timeout = slot.config.startup_timeout(&slot.name).unwrap_or_default();
                Ok::<_, String>(connection.list_tools(timeout).await.unwrap_or_else(|error| {
                tracing::warn!(server = %slot.name, %error, "listing tools again failed");
                connection.tools()
            }))
            });
        let listed = futures_util::future::join_all(listing).await;
        let mut tools = Vec::new();
        for (slot, listed) in slots.iter().zip(listed) {
            match listed {
                Ok(offered) => tools.extend(offered.iter().map(|tool| McpToolInfo {
                    server: slot.name.clone(),
                    tool: tool.name.clone(),
                    description: tool.description.clone(),
                    input_schema: tool.input_schema.clone(),
                    read_only: tool.read_only,
                    destructive: tool.destructive,
                    approval: slot.config.approval_of(&tool.name),
                })),
                Err(error) if slot.config.required => return Err(error),
                // Left out; its status says why.
                Err(_) => {}
            }
        }
        Ok(tools)
    }

    async fn call_one(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        progress: &(dyn Fn(McpProgress) + Send + Sync),
        elicit: Option<McpElicit>,
    ) -> Result<McpOutcome, String> {
        let slot = self.slots().get(server).cloned();
        let Some(slot) = slot.filter(|slot| slot.config.enabled) else {
            return Err(format!("no MCP server named {server} is configured"));
        };
        let timeout = slot
            .config
            .tool_timeout(server)
            .map_err(|e| e.to_string())?;
        let connection = self.connection(&slot).await?;
        match connection
            .call_tool_asking(tool, arguments, timeout, progress, elicit)
            .await
        {
            Ok(result) => {
                // It answered: a crash after this one is a first again.
                slot.crashes.store(0, Ordering::Relaxed);
                Ok(McpOutcome {
                    content: result.content,
                    structured_content: result.structured_content,
                    is_error: result.is_error,
                })
            }
            Err(error @ McpCallError::Closed { .. }) => {
                let message = format!("{error}; the server is started again on the next call");
                self.ended(&slot, &error.to_string()).await;
                Err(message)
            }
            Err(error) => Err(error.to_string()),
        }
    }
}

/// How long after its `failures`-th failure in a row a server may start
/// again (none after no failure: a first crash).
fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

impl McpToolbox for McpServers {
    fn tools(&self) -> BoxFuture<'_, Result<Vec<McpToolInfo>, String>> {
        Box::pin(self.list())
    }

    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Option<Map<String, Value>>,
        progress: &'a (dyn Fn(McpProgress) + Send + Sync),
        elicit: Option<McpElicit>,
    ) -> BoxFuture<'a, Result<McpOutcome, String>> {
        Box::pin(self.call_one(server, tool, arguments, progress, elicit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_half_a_second_to_thirty() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(4));
        assert_eq!(backoff(7), Duration::from_secs(30));
        assert_eq!(backoff(1000), Duration::from_secs(30));
    }
}
