//! The two per-thread (or per-turn) settings, spelled as Codex app-server v2
//! spells them on the wire so clients written for Codex work unchanged.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// When to ask a person before running a tool call (Codex: `AskForApproval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Only known-safe read-only commands run without asking.
    Untrusted,
    /// Codex asks after a sandboxed run fails; spool has no OS sandbox and
    /// behaves like `on-request` (see the module docs).
    OnFailure,
    /// Calls within the sandbox run; the rest, and escalations, ask.
    #[default]
    OnRequest,
    /// Never ask: calls within the sandbox run, the rest are refused.
    Never,
}

/// What calls may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Known-safe read-only commands only; no patches.
    ReadOnly,
    /// Known-safe commands and patches inside the workspace root.
    #[default]
    WorkspaceWrite,
    /// Everything.
    DangerFullAccess,
}

impl ApprovalPolicy {
    pub const ALL: [ApprovalPolicy; 4] = [
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnFailure,
        ApprovalPolicy::OnRequest,
        ApprovalPolicy::Never,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Untrusted => "untrusted",
            ApprovalPolicy::OnFailure => "on-failure",
            ApprovalPolicy::OnRequest => "on-request",
            ApprovalPolicy::Never => "never",
        }
    }
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// A CLI flag or config value that is not one of the known spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}; expected one of: {}", valid.join(", "))]
pub struct ParseModeError {
    /// "approval policy" or "sandbox mode".
    pub what: &'static str,
    pub value: String,
    pub valid: Vec<&'static str>,
}

impl FromStr for ApprovalPolicy {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ParseModeError {
                what: "approval policy",
                value: s.to_owned(),
                valid: Self::ALL.iter().map(|p| p.as_str()).collect(),
            })
    }
}

impl FromStr for SandboxMode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ParseModeError {
                what: "sandbox mode",
                value: s.to_owned(),
                valid: Self::ALL.iter().map(|m| m.as_str()).collect(),
            })
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
