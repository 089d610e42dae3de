//! What a Codex client asks before its first turn (the TUI's bootstrap),
//! answered with spool's true state: `account/read`, `config/read`,
//! `model/list`, `skills/list`, `plugin/list`, `hooks/list`,
//! `collaborationMode/list`, `thread/loaded/list` and
//! `thread/unsubscribe`.
//!
//! spool has no accounts, skills, plugins, hooks or collaboration modes:
//! those lists are empty, in Codex's shapes. Lists a client pages
//! (`model/list`, `thread/loaded/list`) come whole, with no next cursor.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approvals::{AskForApproval, SandboxMode};

/// `account/read` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetAccountParams {
    /// Ignored: spool holds no login to refresh.
    #[serde(default)]
    pub refresh_token: bool,
}

/// `account/read` result. spool never needs a login: provider keys come
/// from its configuration, so `requiresOpenaiAuth` is `false` and the
/// account is `apiKey` when the provider is called with a key, else
/// `null` (a local model server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetAccountResponse {
    pub account: Option<Account>,
    pub requires_openai_auth: bool,
}

/// The kinds of Codex account spool can report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Account {
    /// Calls go out with an API key from spool's configuration.
    ApiKey,
}

/// `config/read` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReadParams {
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub include_layers: bool,
}

/// `config/read` result: the settings new threads get, and where each
/// came from. Keys are Codex's `config.toml` names (snake_case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReadResponse {
    pub config: EffectiveConfig,
    /// Setting → the layer that set it; settings spool chose itself (no
    /// flag, no spool.toml) are absent.
    pub origins: BTreeMap<String, ConfigLayerMetadata>,
    /// spool does not list layers (Codex: only with `includeLayers`).
    pub layers: Option<Vec<Value>>,
}

/// The effective settings (Codex `Config`, the fields spool has).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EffectiveConfig {
    pub model: Option<String>,
    pub model_provider: Option<String>,
    pub approval_policy: Option<AskForApproval>,
    pub sandbox_mode: Option<SandboxMode>,
    pub developer_instructions: Option<String>,
}

/// Where a setting came from (Codex `ConfigLayerMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigLayerMetadata {
    pub name: ConfigLayerSource,
    /// A digest of the layer's content in Codex; spool writes the layer's
    /// own name, since it never writes config back.
    pub version: String,
}

/// The layers spool reads settings from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ConfigLayerSource {
    /// `spool serve` flags and `-c` overrides.
    SessionFlags,
    /// A `spool.toml` (the home one, or the project's).
    User { file: String },
}

/// `model/list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub include_hidden: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelListResponse {
    pub data: Vec<Model>,
    pub next_cursor: Option<String>,
}

/// A model a thread may run (Codex `Model`, its required fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub model: String,
    pub display_name: String,
    pub description: String,
    pub hidden: bool,
    pub is_default: bool,
    /// spool sends no reasoning effort: `none`.
    pub default_reasoning_effort: String,
    pub supported_reasoning_efforts: Vec<ReasoningEffortOption>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEffortOption {
    pub reasoning_effort: String,
    pub description: String,
}

/// `skills/list` and `hooks/list` params: the folders to look in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CwdsParams {
    #[serde(default)]
    pub cwds: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillsListResponse {
    pub data: Vec<SkillsListEntry>,
}

/// One folder's skills: spool has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillsListEntry {
    pub cwd: String,
    pub skills: Vec<Value>,
    pub errors: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HooksListResponse {
    pub data: Vec<HooksListEntry>,
}

/// One folder's hooks: spool has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HooksListEntry {
    pub cwd: String,
    pub hooks: Vec<Value>,
    pub errors: Vec<Value>,
    pub warnings: Vec<String>,
}

/// `plugin/list` params (ignored: spool has no plugins).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginListParams {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginListResponse {
    pub marketplaces: Vec<Value>,
    pub marketplace_load_errors: Vec<Value>,
    pub featured_plugin_ids: Vec<String>,
}

/// `collaborationMode/list` params (an experimental Codex method, not in
/// its published schema).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationModeListParams {}

/// spool has no collaboration modes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationModeListResponse {
    pub data: Vec<Value>,
}

/// `thread/loaded/list` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadLoadedListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The threads this server has in memory: running, or watched by a client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLoadedListResponse {
    pub data: Vec<String>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribeParams {
    pub thread_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadUnsubscribeResponse {
    pub status: ThreadUnsubscribeStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadUnsubscribeStatus {
    /// The thread is not loaded in this server.
    NotLoaded,
    /// This connection was not watching it.
    NotSubscribed,
    Unsubscribed,
}
