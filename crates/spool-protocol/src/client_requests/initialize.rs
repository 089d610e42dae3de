//! `initialize`: the handshake, and where a client opts into spool's
//! additions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::serde_helpers::is_false;

/// `initialize` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    /// Omitted when unset (Codex skips it rather than writing `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<InitializeCapabilities>,
}

impl InitializeParams {
    /// spool's opt-ins, if the client asked for any.
    pub fn spool_capabilities(&self) -> SpoolCapabilities {
        self.capabilities
            .as_ref()
            .and_then(|c| c.spool)
            .unwrap_or_default()
    }
}

/// Who the client is. Codex writes `title` as `null` when unset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    pub version: String,
}

/// What the client opts into.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    /// Codex: receive experimental methods and fields. Always written.
    #[serde(default)]
    pub experimental_api: bool,
    /// Codex: accept `attestation/generate` requests. Always written;
    /// spool never sends them.
    #[serde(default)]
    pub request_attestation: bool,
    /// Codex: let MCP servers ask for OpenAI form elicitations. Written
    /// only when `true`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mcp_server_open_ai_form_elicitation: bool,
    /// Codex: exact notification methods not to send on this connection.
    /// Written as `null` when unset.
    #[serde(default)]
    pub opt_out_notification_methods: Option<Vec<String>>,
    /// spool only: its opt-in additions. Omitted when unset; a client that
    /// does not send it sees only what Codex would send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spool: Option<SpoolCapabilities>,
}

/// spool's additions to the protocol, each off unless the client asks.
/// Every flag may be omitted (false) when read; all are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpoolCapabilities {
    /// A `seq` cursor on every thread notification, and `afterSeq` on
    /// `thread/resume`.
    #[serde(default)]
    pub seq: bool,
    /// `view` and `tokens` on `thread/turns/list` and `thread/items/list`.
    #[serde(default)]
    pub views: bool,
    /// spool's application item kinds (component, container, status,
    /// stateChange, resourceChange, stepError, error, context).
    #[serde(default)]
    pub application_items: bool,
    /// Status, provenance and audience on items (the `envelope` field).
    #[serde(default)]
    pub provenance: bool,
}

impl SpoolCapabilities {
    pub const ALL: SpoolCapabilities = SpoolCapabilities {
        seq: true,
        views: true,
        application_items: true,
        provenance: true,
    };

    pub const NONE: SpoolCapabilities = SpoolCapabilities {
        seq: false,
        views: false,
        application_items: false,
        provenance: false,
    };

    /// What both sides support.
    pub fn intersect(self, other: SpoolCapabilities) -> SpoolCapabilities {
        SpoolCapabilities {
            seq: self.seq && other.seq,
            views: self.views && other.views,
            application_items: self.application_items && other.application_items,
            provenance: self.provenance && other.provenance,
        }
    }
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// `name/version (os; arch) ...`, as Codex reports it.
    pub user_agent: String,
    /// Codex: absolute path of `$CODEX_HOME`. spool reports `SPOOL_HOME`.
    pub codex_home: String,
    /// `"unix"` or `"windows"`.
    pub platform_family: String,
    /// `"linux"`, `"macos"` or `"windows"`.
    pub platform_os: String,
    /// spool only: the additions granted on this connection (what the
    /// client asked for and the server supports). Omitted when the client
    /// asked for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spool: Option<SpoolCapabilities>,
}
