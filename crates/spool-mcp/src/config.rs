//! `[mcp_servers.NAME]` in `spool.toml`: the keys Codex's `config.toml`
//! uses, so that a section can be copied over as it is.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use spool_tools::mcp::McpApproval;

/// How long a server may take to start and list its tools, unless its
/// section says (`startup_timeout_sec`).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one tool call may take, unless the section says
/// (`tool_timeout_sec`).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One MCP server, as configured.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct McpServerConfig {
    /// A child process speaking MCP on its stdin and stdout.
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Set in the child's environment, beside what spool passes on.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    /// A streamable-HTTP server instead of a child.
    pub url: Option<String>,
    /// The environment variable holding the bearer token for `url`.
    pub bearer_token_env_var: Option<String>,
    /// Only these tools are offered (all when absent).
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    pub startup_timeout_sec: Option<f64>,
    pub tool_timeout_sec: Option<f64>,
    /// A server that fails to start is an error, not a warning.
    #[serde(default)]
    pub required: bool,
    /// `false` keeps the section but starts nothing.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Ask a person before every call of this server's tools
    /// (`"always"`), or never (`"never"`), whatever the thread's policy.
    pub approval: Option<McpApproval>,
    /// Settings of single tools (`[mcp_servers.NAME.tools.TOOL]`).
    #[serde(default)]
    pub tools: BTreeMap<String, McpToolConfig>,
}

/// `[mcp_servers.NAME.tools.TOOL]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct McpToolConfig {
    /// Over the server's `approval`, for this tool.
    pub approval: Option<McpApproval>,
}

fn enabled() -> bool {
    true
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport<'a> {
    Stdio { command: &'a str },
    Http { url: &'a str },
}

/// A section that names no way to reach its server, or two.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("MCP server {name}: set `command` (a child process) or `url`, not both")]
    Both { name: String },
    #[error("MCP server {name}: set `command` (a child process) or `url`")]
    Neither { name: String },
    #[error("MCP server {name}: {key} must be a number of seconds above 0, not {value}")]
    Timeout {
        name: String,
        key: &'static str,
        value: f64,
    },
}

impl McpServerConfig {
    pub fn transport(&self, name: &str) -> Result<Transport<'_>, ConfigError> {
        match (&self.command, &self.url) {
            (Some(command), None) => Ok(Transport::Stdio { command }),
            (None, Some(url)) => Ok(Transport::Http { url }),
            (Some(_), Some(_)) => Err(ConfigError::Both {
                name: name.to_owned(),
            }),
            (None, None) => Err(ConfigError::Neither {
                name: name.to_owned(),
            }),
        }
    }

    pub fn startup_timeout(&self, name: &str) -> Result<Duration, ConfigError> {
        seconds(name, "startup_timeout_sec", self.startup_timeout_sec)
            .map(|d| d.unwrap_or(DEFAULT_STARTUP_TIMEOUT))
    }

    pub fn tool_timeout(&self, name: &str) -> Result<Duration, ConfigError> {
        seconds(name, "tool_timeout_sec", self.tool_timeout_sec)
            .map(|d| d.unwrap_or(DEFAULT_TOOL_TIMEOUT))
    }

    /// What the configuration says about asking before `tool` runs.
    pub fn approval_of(&self, tool: &str) -> Option<McpApproval> {
        self.tools
            .get(tool)
            .and_then(|t| t.approval)
            .or(self.approval)
    }

    /// Whether the tool named `tool` (as the server names it) is offered.
    pub fn offers(&self, tool: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == tool));
        enabled && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

fn seconds(
    name: &str,
    key: &'static str,
    value: Option<f64>,
) -> Result<Option<Duration>, ConfigError> {
    match value {
        None => Ok(None),
        Some(value) if value.is_finite() && value > 0.0 && value <= 86_400.0 => {
            Ok(Some(Duration::from_secs_f64(value)))
        }
        Some(value) => Err(ConfigError::Timeout {
            name: name.to_owned(),
            key,
            value,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> McpServerConfig {
        serde_json::from_value(toml_to_json(toml_text)).unwrap()
    }

    /// The tests read TOML-shaped sections through serde_json, so this
    /// crate needs no TOML parser of its own (the CLI parses spool.toml).
    fn toml_to_json(text: &str) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (key, value) = line.split_once('=').unwrap();
            map.insert(
                key.trim().to_owned(),
                serde_json::from_str(value.trim()).unwrap(),
            );
        }
        serde_json::Value::Object(map)
    }

    #[test]
    fn a_section_names_one_way_to_reach_its_server() {
        let stdio = parse(
            r#"command = "npx"
            args = ["-y", "server"]"#,
        );
        assert_eq!(
            stdio.transport("fs"),
            Ok(Transport::Stdio { command: "npx" })
        );
        assert!(stdio.enabled && !stdio.required);
        let http = parse(r#"url = "https://example.invalid/mcp""#);
        assert_eq!(
            http.transport("web"),
            Ok(Transport::Http {
                url: "https://example.invalid/mcp"
            })
        );
        let both = parse(
            r#"command = "x"
            url = "https://example.invalid""#,
        );
        assert!(matches!(both.transport("b"), Err(ConfigError::Both { .. })));
        let neither = parse(r#"required = true"#);
        assert!(matches!(
            neither.transport("n"),
            Err(ConfigError::Neither { .. })
        ));
    }

    #[test]
    fn tools_are_filtered_and_timeouts_checked() {
        let config = parse(
            r#"command = "x"
            enabled_tools = ["echo", "fail"]
            disabled_tools = ["fail"]
            startup_timeout_sec = 2.5
            tool_timeout_sec = -1"#,
        );
        assert!(config.offers("echo"));
        assert!(!config.offers("fail"), "disabled wins");
        assert!(!config.offers("other"), "not enabled");
        assert_eq!(config.startup_timeout("s"), Ok(Duration::from_millis(2500)));
        assert!(matches!(
            config.tool_timeout("s"),
            Err(ConfigError::Timeout {
                key: "tool_timeout_sec",
                ..
            })
        ));
        assert_eq!(
            McpServerConfig::default().startup_timeout("s"),
            Ok(DEFAULT_STARTUP_TIMEOUT)
        );
    }
}
