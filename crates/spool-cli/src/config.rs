//! `spool.toml`: provider definitions, defaults, and `spool serve`'s
//! `[requirements]` (the ceilings on what clients may ask for).
//!
//! Read from `$SPOOL_HOME/spool.toml` and then `./spool.toml`; the latter
//! wins key by key (providers merge by name). A file that cannot be read
//! as a config is an error naming the file, the line and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use spool_protocol::{AskForApproval, SandboxMode};

/// Which OpenAI wire API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WireApi {
    Responses,
    Chat,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    pub base_url: String,
    #[serde(default = "default_wire_api")]
    pub wire_api: WireApi,
    /// Name of the environment variable that holds the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The model used when none is given on the command line.
    #[serde(default)]
    pub model: Option<String>,
    /// System instructions sent when `--instructions` is not given.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Sampling temperature (the provider's default when unset).
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The model's context window, in tokens: with it, threads are
    /// compacted before a turn once their history passes `compact_at` of
    /// it (over the top-level `context_window`).
    #[serde(default)]
    pub context_window: Option<usize>,
}

fn default_wire_api() -> WireApi {
    WireApi::Responses
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The provider used when `--provider` is not given.
    #[serde(default)]
    pub provider: Option<String>,
    /// The model used when `--model` is not given.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderEntry>,
    /// The model's context window when its provider entry names none.
    #[serde(default)]
    pub context_window: Option<usize>,
    /// The share of the context window (0 < share <= 1; 0.8 when unset)
    /// past which a thread's history is compacted before the next turn.
    #[serde(default)]
    pub compact_at: Option<f64>,
    /// `[requirements]`: the most a client of `spool serve` may ask for
    /// (its `--max-approval-policy`, `--max-sandbox`, `--allowed-root`
    /// win over these).
    #[serde(default)]
    pub requirements: Requirements,
    /// `[mcp_servers.NAME]`: MCP servers, with the keys of Codex's
    /// `config.toml`. Read from `$SPOOL_HOME/spool.toml` only: a server is
    /// a command spool starts, and a working directory's `spool.toml`
    /// (a repository one cloned) must not start commands.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, spool_mcp::McpServerConfig>,
}

/// A setting and the file it was read from, so that a refusal can say
/// which file set the ceiling.
#[derive(Debug, Clone, PartialEq)]
pub struct FromFile<T> {
    pub value: T,
    pub file: PathBuf,
}

impl<T> FromFile<T> {
    fn unplaced(value: T) -> Self {
        FromFile {
            value,
            file: PathBuf::new(),
        }
    }
}

/// `[requirements]`, each key with the file that set it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "RequirementsTable")]
pub struct Requirements {
    pub max_approval_policy: Option<FromFile<AskForApproval>>,
    pub max_sandbox: Option<FromFile<SandboxMode>>,
    /// Relative roots are read as relative to the file's directory.
    pub allowed_roots: Option<FromFile<Vec<PathBuf>>>,
}

/// `[requirements]` as written in one file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequirementsTable {
    #[serde(default)]
    max_approval_policy: Option<AskForApproval>,
    #[serde(default)]
    max_sandbox: Option<SandboxMode>,
    #[serde(default)]
    allowed_roots: Option<Vec<PathBuf>>,
}

impl From<RequirementsTable> for Requirements {
    /// The file is filled in by [`Requirements::read_from`].
    fn from(table: RequirementsTable) -> Self {
        Requirements {
            max_approval_policy: table.max_approval_policy.map(FromFile::unplaced),
            max_sandbox: table.max_sandbox.map(FromFile::unplaced),
            allowed_roots: table.allowed_roots.map(FromFile::unplaced),
        }
    }
}

impl Requirements {
    /// Records `file` as where every key was read, and makes relative
    /// roots relative to its directory (not to wherever `spool` runs).
    fn read_from(&mut self, file: &Path) {
        if let Some(policy) = &mut self.max_approval_policy {
            policy.file = file.to_owned();
        }
        if let Some(mode) = &mut self.max_sandbox {
            mode.file = file.to_owned();
        }
        if let Some(roots) = &mut self.allowed_roots {
            roots.file = file.to_owned();
            let dir = file.parent().unwrap_or(Path::new(""));
            for root in &mut roots.value {
                if root.is_relative() {
                    *root = dir.join(&*root);
                }
            }
        }
    }

    /// `other` over `self`, key by key.
    fn merge(mut self, other: Requirements) -> Requirements {
        if other.max_approval_policy.is_some() {
            self.max_approval_policy = other.max_approval_policy;
        }
        if other.max_sandbox.is_some() {
            self.max_sandbox = other.max_sandbox;
        }
        if other.allowed_roots.is_some() {
            self.allowed_roots = other.allowed_roots;
        }
        self
    }
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {} {message}", path.display(), key.as_deref().map(|k| format!("key `{k}`:")).unwrap_or_default())]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        key: Option<String>,
        message: String,
    },
}

impl ConfigFile {
    /// Parses one file's text; `path` is only used in errors.
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
        let mut config: ConfigFile = toml::from_str(text).map_err(|e| {
            let (line, column, key) = match e.span() {
                Some(span) => locate(text, span.start),
                None => (1, 1, None),
            };
            ConfigError::Invalid {
                path: path.to_owned(),
                line,
                column,
                key,
                message: e.message().trim().to_owned(),
            }
        })?;
        config.requirements.read_from(path);
        Ok(config)
    }

    /// Reads `path` if it exists.
    pub fn load(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// `other` over `self`, key by key.
    pub fn merge(mut self, other: ConfigFile) -> ConfigFile {
        if other.provider.is_some() {
            self.provider = other.provider;
        }
        if other.model.is_some() {
            self.model = other.model;
        }
        self.providers.extend(other.providers);
        self.requirements = self.requirements.merge(other.requirements);
        self.mcp_servers.extend(other.mcp_servers);
        self
    }

    /// `$SPOOL_HOME/spool.toml`, then `./spool.toml`.
    pub fn load_layered(home: &Path, cwd: &Path) -> Result<ConfigFile, ConfigError> {
        let mut config = ConfigFile::default();
        for (layer, file) in Self::layer_files(home, cwd).into_iter().enumerate() {
            if let Some(mut c) = Self::load(&file)? {
                if layer > 0 && !c.mcp_servers.is_empty() {
                    tracing::warn!(file = %file.display(),
                        "[mcp_servers] ignored: MCP servers are commands spool starts, so only \
                         $SPOOL_HOME/spool.toml may declare them");
                    c.mcp_servers.clear();
                }
                config = config.merge(c);
            }
        }
        Ok(config)
    }

    /// The `spool.toml` files layered, lowest first: the home's, then the
    /// working directory's (once, when they are the same file).
    pub fn layer_files(home: &Path, cwd: &Path) -> Vec<PathBuf> {
        let home_file = home.join("spool.toml");
        let local_file = cwd.join("spool.toml");
        if local_file == home_file {
            vec![home_file]
        } else {
            vec![home_file, local_file]
        }
    }
}

/// 1-based line and column of byte `offset`, and the key written on that
/// line (the text before `=`, or the table name of a `[header]`).
fn locate(text: &str, offset: usize) -> (usize, usize, Option<String>) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    let line_text = text[line_start..].lines().next().unwrap_or("");
    let trimmed = line_text.trim();
    let key = if let Some((k, _)) = trimmed.split_once('=') {
        Some(k.trim().trim_matches('"').to_owned())
    } else if trimmed.starts_with('[') {
        Some(
            trimmed
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned(),
        )
    } else {
        None
    };
    (line, column, key.filter(|k| !k.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        ConfigFile::parse(Path::new("/x/spool.toml"), text)
    }

    #[test]
    fn reads_providers() {
        let c = parse(
            "provider = \"lab\"\n[providers.lab]\nbase_url = \"http://h/v1\"\nwire_api = \"chat\"\napi_key_env = \"LAB_KEY\"\n",
        )
        .unwrap();
        assert_eq!(c.provider.as_deref(), Some("lab"));
        let lab = &c.providers["lab"];
        assert_eq!(lab.wire_api, WireApi::Chat);
        assert_eq!(lab.api_key_env.as_deref(), Some("LAB_KEY"));
    }

    #[test]
    fn bad_value_names_file_line_and_key() {
        let err =
            parse("[providers.lab]\nbase_url = \"http://h\"\nwire_api = \"grpc\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("/x/spool.toml:3:"), "{msg}");
        assert!(msg.contains("key `wire_api`"), "{msg}");
    }

    #[test]
    fn unknown_key_is_an_error() {
        let err =
            parse("[providers.lab]\nbase_url = \"http://h\"\nbase_ulr = \"x\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(":3:") && msg.contains("base_ulr"), "{msg}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let err = parse("provider = \n").unwrap_err();
        assert!(err.to_string().contains("spool.toml:1:"), "{err}");
    }

    #[test]
    fn reads_requirements_with_the_file_that_set_them() {
        let c = parse(
            "[requirements]\nmax_approval_policy = \"on-request\"\nmax_sandbox = \"workspace-write\"\nallowed_roots = [\"/srv/work\", \"rel\"]\n",
        )
        .unwrap();
        let r = &c.requirements;
        let policy = r.max_approval_policy.as_ref().unwrap();
        assert_eq!(policy.value, AskForApproval::OnRequest);
        assert_eq!(policy.file, Path::new("/x/spool.toml"));
        assert_eq!(
            r.max_sandbox.as_ref().unwrap().value,
            SandboxMode::WorkspaceWrite
        );
        // A relative root is relative to the file's directory.
        assert_eq!(
            r.allowed_roots.as_ref().unwrap().value,
            vec![PathBuf::from("/srv/work"), PathBuf::from("/x/rel")]
        );
        assert_eq!(parse("").unwrap().requirements, Requirements::default());
    }

    #[test]
    fn bad_requirements_name_file_line_and_key() {
        let err = parse("[requirements]\nmax_sandbox = \"full\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("/x/spool.toml:2:"), "{msg}");
        assert!(msg.contains("key `max_sandbox`"), "{msg}");
        assert!(msg.contains("danger-full-access"), "{msg}");
        let err = parse("[requirements]\nmax_sandboxes = \"read-only\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(":2:") && msg.contains("max_sandboxes"),
            "{msg}"
        );
    }

    #[test]
    fn later_requirements_win_key_by_key() {
        let home = ConfigFile::parse(
            Path::new("/home/u/.spool/spool.toml"),
            "[requirements]\nmax_approval_policy = \"untrusted\"\nmax_sandbox = \"read-only\"\n",
        )
        .unwrap();
        let local = ConfigFile::parse(
            Path::new("/proj/spool.toml"),
            "[requirements]\nmax_sandbox = \"workspace-write\"\n",
        )
        .unwrap();
        let r = home.merge(local).requirements;
        let policy = r.max_approval_policy.unwrap();
        assert_eq!(policy.value, AskForApproval::Untrusted);
        assert_eq!(policy.file, Path::new("/home/u/.spool/spool.toml"));
        let sandbox = r.max_sandbox.unwrap();
        assert_eq!(sandbox.value, SandboxMode::WorkspaceWrite);
        assert_eq!(sandbox.file, Path::new("/proj/spool.toml"));
    }

    #[test]
    fn later_file_wins() {
        let a =
            parse("provider = \"a\"\nmodel = \"m1\"\n[providers.a]\nbase_url = \"u1\"\n").unwrap();
        let b = parse("model = \"m2\"\n[providers.a]\nbase_url = \"u2\"\n").unwrap();
        let c = a.merge(b);
        assert_eq!(c.provider.as_deref(), Some("a"));
        assert_eq!(c.model.as_deref(), Some("m2"));
        assert_eq!(c.providers["a"].base_url, "u2");
    }
}
