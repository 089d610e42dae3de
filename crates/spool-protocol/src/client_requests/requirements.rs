//! `configRequirements/read`: the limits the server's operator set on what
//! a client may ask for (Codex `ConfigRequirementsReadResponse`).
//!
//! Codex reads its requirements from `requirements.toml` or MDM; spool's
//! come from `spool serve`'s ceilings (`--max-approval-policy`,
//! `--max-sandbox`, `--allowed-root`, or `[requirements]` in `spool.toml`).
//! Of Codex's many requirement fields spool sets only the two it enforces;
//! the others are absent (the schema has them all optional).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::approvals::{AskForApproval, SandboxMode};

/// `configRequirements/read` params: none. Codex sends no `params` at all;
/// an absent `params` is read as `{}`, and unknown fields are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigRequirementsReadParams {}

/// `configRequirements/read` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRequirementsReadResponse {
    /// `null` when the operator set no ceiling: a client may ask for
    /// anything.
    pub requirements: Option<ConfigRequirements>,
}

/// What a client may ask for. A list names every allowed value; `null`
/// means that setting is not limited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRequirements {
    /// The `approvalPolicy` values allowed, least permissive first.
    /// `on-failure` is listed only to clients that opted in to spool's
    /// additions: Codex's `AskForApproval` no longer has it.
    #[serde(default)]
    pub allowed_approval_policies: Option<Vec<AskForApproval>>,
    /// The `sandbox` modes allowed, least permissive first.
    #[serde(default)]
    pub allowed_sandbox_modes: Option<Vec<SandboxMode>>,
    // --- spool's opt-in additions ---
    /// spool only (any `capabilities.spool` opt-in): the directories a
    /// `cwd` (and a `workspaceWrite` policy's `writableRoots`) must lie
    /// within, as the server resolved them. Omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_roots: Option<Vec<String>>,
}
