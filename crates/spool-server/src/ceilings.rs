//! The operator's ceilings: the most permissive approval policy and sandbox
//! mode a client may ask for, and the directories its working directory
//! must lie within (`spool serve --max-approval-policy`, `--max-sandbox`,
//! `--allowed-root`, or `[requirements]` in `spool.toml`).
//!
//! Every method that sets what a thread runs with (`thread/start`,
//! `thread/resume`, `thread/fork`, `turn/start`, `review/start`, and the
//! HTTP routes that call them) passes the settings through
//! [`Ceilings::check_thread_settings`] *before* anything is created or
//! started, so a refused request leaves no thread, no turn and nothing in
//! the store. The checks live here, in one place, so that a new method
//! cannot loosen one of them by forgetting it.
//!
//! Permissiveness, least first: approval policy `untrusted` <
//! `on-failure` < `on-request` < `never` (never asking lets the most
//! through); sandbox `read-only` < `workspace-write` <
//! `danger-full-access`. A full `sandboxPolicy` counts as the mode whose
//! limits it matches: network access is what only `danger-full-access`
//! grants, and an external sandbox is one spool does not enforce, so both
//! count as `danger-full-access`.
//!
//! Paths are compared after resolving `..` and symlinks (canonicalized),
//! so neither a `..` nor a symlink inside a root that points out of it
//! gets past; a path that does not exist cannot be resolved and is
//! refused. With roots set, the thread runs in the resolved path: what was
//! checked is what is used.

use std::io;
use std::path::{Path, PathBuf};

use spool_protocol::{AskForApproval, SandboxMode, SandboxPolicy};

use crate::hub::ThreadSettings;

/// One ceiling and what set it (a flag or a file's key), for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling<T> {
    pub value: T,
    /// E.g. `--max-sandbox` or `max_sandbox in /etc/spool/spool.toml`.
    pub set_by: String,
}

/// What a server lets clients ask for. The default limits nothing (a
/// trusted stdio client, as before ceilings existed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ceilings {
    approval_policy: Option<Ceiling<AskForApproval>>,
    sandbox: Option<Ceiling<SandboxMode>>,
    /// Canonical paths.
    roots: Option<Ceiling<Vec<PathBuf>>>,
}

/// How the fields being checked are named in errors: the wire names for a
/// client's request, the flags for the server's own defaults.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub approval_policy: &'static str,
    pub sandbox: &'static str,
    pub cwd: &'static str,
}

impl Fields {
    /// A client's `thread/*` or `turn/start` params.
    pub const CLIENT: Fields = Fields {
        approval_policy: "approvalPolicy",
        sandbox: "sandbox",
        cwd: "cwd",
    };
    /// `spool serve`'s defaults for threads that set nothing.
    pub const SERVER_DEFAULTS: Fields = Fields {
        approval_policy: "--approval-policy",
        sandbox: "--sandbox",
        cwd: "the server's working directory",
    };
}

/// Why settings were refused. Every variant but `BadRoot` is the client's
/// to fix (JSON-RPC -32602, HTTP 400); `BadRoot` stops the server from
/// starting.
#[derive(Debug, thiserror::Error)]
pub enum CeilingError {
    #[error("{field} \"{asked}\" is above this server's ceiling \"{ceiling}\" (set by {set_by})")]
    ApprovalPolicy {
        field: &'static str,
        asked: AskForApproval,
        ceiling: AskForApproval,
        set_by: String,
    },
    #[error("{field} \"{asked}\" is above this server's ceiling \"{ceiling}\" (set by {set_by})")]
    SandboxMode {
        field: &'static str,
        asked: SandboxMode,
        ceiling: SandboxMode,
        set_by: String,
    },
    #[error(
        "sandboxPolicy {policy} counts as \"{counts_as}\", which is above this server's ceiling \"{ceiling}\" (set by {set_by})"
    )]
    SandboxPolicy {
        /// How the policy was asked for, e.g. `workspaceWrite with networkAccess`.
        policy: &'static str,
        counts_as: SandboxMode,
        ceiling: SandboxMode,
        set_by: String,
    },
    #[error(
        "{field} {} is outside this server's allowed roots ({}) (set by {set_by})",
        shown(.path, .resolved),
        joined(.roots)
    )]
    OutsideRoots {
        field: &'static str,
        path: String,
        resolved: PathBuf,
        roots: Vec<PathBuf>,
        set_by: String,
    },
    #[error(
        "{field} {path:?} is outside the working directory {cwd:?}, and this server's sandbox \
         ceiling \"{ceiling}\" (set by {set_by}) lets threads write only there"
    )]
    OutsideWorkspace {
        field: &'static str,
        path: String,
        cwd: String,
        ceiling: SandboxMode,
        set_by: String,
    },
    #[error("{field} {path:?} does not exist")]
    Missing { field: &'static str, path: String },
    #[error("{field} {path:?} is not a directory")]
    NotADirectory { field: &'static str, path: String },
    #[error("{field} {path:?} cannot be resolved: {source}")]
    Unresolvable {
        field: &'static str,
        path: String,
        source: io::Error,
    },
    #[error("allowed root {} (set by {set_by}) cannot be used: {source}", .root.display())]
    BadRoot {
        root: PathBuf,
        set_by: String,
        source: io::Error,
    },
}

fn shown(path: &str, resolved: &Path) -> String {
    if Path::new(path) == resolved {
        format!("{path:?}")
    } else {
        format!("{path:?} (resolved: {:?})", resolved.display().to_string())
    }
}

fn joined(roots: &[PathBuf]) -> String {
    if roots.is_empty() {
        return "none".to_owned();
    }
    roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Position in the order of permissiveness (higher lets more through).
fn approval_rank(policy: AskForApproval) -> u8 {
    match policy {
        AskForApproval::Untrusted => 0,
        AskForApproval::OnFailure => 1,
        AskForApproval::OnRequest => 2,
        AskForApproval::Never => 3,
    }
}

fn sandbox_rank(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::ReadOnly => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::DangerFullAccess => 2,
    }
}

/// The mode a full policy counts as for the ceiling, and how to name it.
fn policy_mode(policy: &SandboxPolicy) -> (SandboxMode, &'static str) {
    match policy {
        SandboxPolicy::DangerFullAccess => (SandboxMode::DangerFullAccess, "dangerFullAccess"),
        SandboxPolicy::ExternalSandbox { .. } => (SandboxMode::DangerFullAccess, "externalSandbox"),
        SandboxPolicy::ReadOnly {
            network_access: true,
        } => (SandboxMode::DangerFullAccess, "readOnly with networkAccess"),
        SandboxPolicy::ReadOnly { .. } => (SandboxMode::ReadOnly, "readOnly"),
        SandboxPolicy::WorkspaceWrite {
            network_access: true,
            ..
        } => (
            SandboxMode::DangerFullAccess,
            "workspaceWrite with networkAccess",
        ),
        SandboxPolicy::WorkspaceWrite { .. } => (SandboxMode::WorkspaceWrite, "workspaceWrite"),
    }
}

impl Ceilings {
    /// No ceiling at all.
    pub fn none() -> Ceilings {
        Ceilings::default()
    }

    pub fn with_max_approval_policy(
        mut self,
        policy: AskForApproval,
        set_by: impl Into<String>,
    ) -> Ceilings {
        self.approval_policy = Some(Ceiling {
            value: policy,
            set_by: set_by.into(),
        });
        self
    }

    pub fn with_max_sandbox(mut self, mode: SandboxMode, set_by: impl Into<String>) -> Ceilings {
        self.sandbox = Some(Ceiling {
            value: mode,
            set_by: set_by.into(),
        });
        self
    }

    /// Limits working directories to `roots`, each resolved now (relative
    /// ones against the process's directory). A root that cannot be
    /// resolved, or is not a directory, is an error: a ceiling that
    /// silently allowed nothing (or something else) would surprise.
    pub fn with_allowed_roots(
        mut self,
        roots: impl IntoIterator<Item = PathBuf>,
        set_by: impl Into<String>,
    ) -> Result<Ceilings, CeilingError> {
        let set_by = set_by.into();
        let mut resolved = Vec::new();
        for root in roots {
            let bad = |source| CeilingError::BadRoot {
                root: root.clone(),
                set_by: set_by.clone(),
                source,
            };
            let canonical = std::fs::canonicalize(&root).map_err(bad)?;
            if !canonical.is_dir() {
                return Err(bad(io::Error::other("not a directory")));
            }
            resolved.push(canonical);
        }
        self.roots = Some(Ceiling {
            value: resolved,
            set_by,
        });
        Ok(self)
    }

    /// Whether any ceiling is set.
    pub fn is_set(&self) -> bool {
        self.approval_policy.is_some() || self.sandbox.is_some() || self.roots.is_some()
    }

    /// Every approval policy at or below the ceiling, least permissive
    /// first (`None`: not limited). `on-failure` only `with_on_failure`:
    /// Codex clients no longer know it.
    pub fn allowed_approval_policies(&self, with_on_failure: bool) -> Option<Vec<AskForApproval>> {
        let ceiling = self.approval_policy.as_ref()?.value;
        Some(
            AskForApproval::ALL
                .into_iter()
                .filter(|p| approval_rank(*p) <= approval_rank(ceiling))
                .filter(|p| with_on_failure || *p != AskForApproval::OnFailure)
                .collect(),
        )
    }

    /// Every sandbox mode at or below the ceiling, least permissive first
    /// (`None`: not limited).
    pub fn allowed_sandbox_modes(&self) -> Option<Vec<SandboxMode>> {
        let ceiling = self.sandbox.as_ref()?.value;
        Some(
            SandboxMode::ALL
                .into_iter()
                .filter(|m| sandbox_rank(*m) <= sandbox_rank(ceiling))
                .collect(),
        )
    }

    /// The allowed roots, resolved (`None`: not limited).
    pub fn allowed_roots(&self) -> Option<&[PathBuf]> {
        self.roots.as_ref().map(|r| r.value.as_slice())
    }

    pub fn check_approval_policy(
        &self,
        policy: AskForApproval,
        field: &'static str,
    ) -> Result<(), CeilingError> {
        match &self.approval_policy {
            Some(ceiling) if approval_rank(policy) > approval_rank(ceiling.value) => {
                Err(CeilingError::ApprovalPolicy {
                    field,
                    asked: policy,
                    ceiling: ceiling.value,
                    set_by: ceiling.set_by.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    pub fn check_sandbox_mode(
        &self,
        mode: SandboxMode,
        field: &'static str,
    ) -> Result<(), CeilingError> {
        match &self.sandbox {
            Some(ceiling) if sandbox_rank(mode) > sandbox_rank(ceiling.value) => {
                Err(CeilingError::SandboxMode {
                    field,
                    asked: mode,
                    ceiling: ceiling.value,
                    set_by: ceiling.set_by.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// A `turn/start` `sandboxPolicy`: the mode it counts as, and its
    /// `writableRoots` (relative ones taken from `cwd`) within the roots.
    pub fn check_sandbox_policy(
        &self,
        policy: &SandboxPolicy,
        cwd: Option<&str>,
    ) -> Result<(), CeilingError> {
        let (mode, named) = policy_mode(policy);
        if let Some(ceiling) = &self.sandbox
            && sandbox_rank(mode) > sandbox_rank(ceiling.value)
        {
            return Err(CeilingError::SandboxPolicy {
                policy: named,
                counts_as: mode,
                ceiling: ceiling.value,
                set_by: ceiling.set_by.clone(),
            });
        }
        let SandboxPolicy::WorkspaceWrite { writable_roots, .. } = policy else {
            return Ok(());
        };
        const FIELD: &str = "sandboxPolicy.writableRoots";
        for root in writable_roots {
            let path = match (Path::new(root).is_relative(), cwd) {
                (true, Some(cwd)) => Path::new(cwd).join(root).display().to_string(),
                _ => root.clone(),
            };
            if self.roots.is_some() {
                self.check_directory(&path, FIELD)?;
            } else if let Some(ceiling) = &self.sandbox {
                // A sandbox ceiling with no allowed roots bounds writes to
                // the working directory: an extra root elsewhere would
                // lift it.
                let within = |dir: &str| std::fs::canonicalize(dir).ok();
                let inside = match (within(&path), cwd.and_then(within)) {
                    (Some(root), Some(cwd)) => root.starts_with(cwd),
                    _ => false,
                };
                if !inside {
                    return Err(CeilingError::OutsideWorkspace {
                        field: FIELD,
                        path,
                        cwd: cwd.unwrap_or_default().to_owned(),
                        ceiling: ceiling.value,
                        set_by: ceiling.set_by.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// A working directory: it must be a directory and, with roots set,
    /// lie within one. Returns the path the thread should run in: the
    /// resolved one when roots are set, else the path as given.
    pub fn check_cwd(&self, cwd: &str, field: &'static str) -> Result<String, CeilingError> {
        if self.roots.is_none() {
            return match std::fs::metadata(cwd) {
                Ok(meta) if meta.is_dir() => Ok(cwd.to_owned()),
                Ok(_) => Err(CeilingError::NotADirectory {
                    field,
                    path: cwd.to_owned(),
                }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CeilingError::Missing {
                    field,
                    path: cwd.to_owned(),
                }),
                Err(source) => Err(CeilingError::Unresolvable {
                    field,
                    path: cwd.to_owned(),
                    source,
                }),
            };
        }
        let resolved = self.check_directory(cwd, field)?;
        resolved
            .into_os_string()
            .into_string()
            .map_err(|_| CeilingError::Unresolvable {
                field,
                path: cwd.to_owned(),
                source: io::Error::other("the resolved path is not UTF-8"),
            })
    }

    /// Resolves `path` and checks that it is a directory within the roots
    /// (when set); returns the resolved path.
    fn check_directory(&self, path: &str, field: &'static str) -> Result<PathBuf, CeilingError> {
        let resolved = std::fs::canonicalize(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => CeilingError::Missing {
                field,
                path: path.to_owned(),
            },
            _ => CeilingError::Unresolvable {
                field,
                path: path.to_owned(),
                source,
            },
        })?;
        if let Some(roots) = &self.roots
            && !roots.value.iter().any(|root| resolved.starts_with(root))
        {
            return Err(CeilingError::OutsideRoots {
                field,
                path: path.to_owned(),
                resolved,
                roots: roots.value.clone(),
                set_by: roots.set_by.clone(),
            });
        }
        if !resolved.is_dir() {
            return Err(CeilingError::NotADirectory {
                field,
                path: path.to_owned(),
            });
        }
        Ok(resolved)
    }

    /// The settings a thread would run with, checked against every
    /// ceiling; returns them as they will run (the cwd resolved when roots
    /// are set).
    pub fn check_thread_settings(
        &self,
        mut settings: ThreadSettings,
        fields: &Fields,
    ) -> Result<ThreadSettings, CeilingError> {
        if let Some(policy) = settings.approval_policy {
            self.check_approval_policy(policy, fields.approval_policy)?;
        }
        if let Some(policy) = &settings.sandbox {
            self.check_sandbox_mode(policy_mode(policy).0, fields.sandbox)?;
        }
        if let Some(cwd) = &settings.cwd {
            settings.cwd = Some(self.check_cwd(cwd, fields.cwd)?);
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests;
