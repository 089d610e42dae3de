//! The envelope stored with every item: lifecycle status, timestamps,
//! provenance, audience, cached token count and the provider's raw payload.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// spool's lifecycle status of an item, common to every kind.
/// `inProgress` is the only non-terminal status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ItemStatus {
    InProgress,
    Completed,
    /// The item stopped before it was finished (a crash, a dropped stream,
    /// an interrupt); it holds what was committed.
    Incomplete,
    Failed,
    Declined,
}

impl ItemStatus {
    pub fn is_terminal(self) -> bool {
        match self {
            ItemStatus::InProgress => false,
            ItemStatus::Completed
            | ItemStatus::Incomplete
            | ItemStatus::Failed
            | ItemStatus::Declined => true,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ItemStatus::InProgress => "inProgress",
            ItemStatus::Completed => "completed",
            ItemStatus::Incomplete => "incomplete",
            ItemStatus::Failed => "failed",
            ItemStatus::Declined => "declined",
        }
    }
}

/// Whether the agent's main line of work or supporting work produced the item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WorkPhase {
    #[default]
    Main,
    Work,
}

/// Who produced an item and under what.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// Name of the agent that produced the item ("user" for user input).
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_item_id: Option<String>,
    #[serde(default)]
    pub phase: WorkPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
}

/// Who sees an item: a client UI, the model, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Audience {
    pub client: bool,
    pub llm: bool,
}

impl Audience {
    pub const BOTH: Audience = Audience {
        client: true,
        llm: true,
    };
    pub const CLIENT_ONLY: Audience = Audience {
        client: true,
        llm: false,
    };
    pub const LLM_ONLY: Audience = Audience {
        client: false,
        llm: true,
    };
}

/// Metadata stored with every item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemEnvelope {
    pub status: ItemStatus,
    pub started_at_ms: i64,
    #[serde(default)]
    pub completed_at_ms: Option<i64>,
    #[serde(default)]
    pub provenance: Provenance,
    pub audience: Audience,
    /// Provider-owned payload and ids (response item id, call id, encrypted
    /// reasoning; a Session API item's raw input item). Kept for providers
    /// that accept it back.
    // Shared, not owned: it can be most of an item, and every copy of the
    // envelope (the store's record of the item, the event it returns, each
    // subscriber's notification) then holds the same value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<Arc<Value>>,
}

impl ItemEnvelope {
    /// A fresh in-progress envelope.
    pub fn started(agent: impl Into<String>, audience: Audience, now_ms: i64) -> Self {
        ItemEnvelope {
            status: ItemStatus::InProgress,
            started_at_ms: now_ms,
            completed_at_ms: None,
            provenance: Provenance {
                agent: agent.into(),
                ..Provenance::default()
            },
            audience,
            provider_data: None,
        }
    }
}
