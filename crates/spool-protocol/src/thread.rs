//! Threads and turns (Codex app-server v2 shapes plus spool's opt-in fields).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::items::ThreadItem;

/// Who owns the conversation history sent to the model: one owner per thread,
/// chosen when it starts and never changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HistoryMode {
    /// spool owns history and sends the `llm` view.
    #[default]
    Replay,
    /// The Responses API owns it through `previous_response_id`.
    PreviousResponseId,
    /// An OpenAI Conversations id owns it.
    ConversationId,
}

impl HistoryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryMode::Replay => "replay",
            HistoryMode::PreviousResponseId => "previousResponseId",
            HistoryMode::ConversationId => "conversationId",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadActiveFlag {
    WaitingOnApproval,
    WaitingOnUserInput,
}

/// Codex `ThreadStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadStatus {
    NotLoaded,
    Idle,
    SystemError,
    #[serde(rename_all = "camelCase")]
    Active {
        active_flags: Vec<ThreadActiveFlag>,
    },
}

impl ThreadStatus {
    /// Running a turn, waiting on no one.
    pub fn active() -> ThreadStatus {
        ThreadStatus::Active {
            active_flags: Vec::new(),
        }
    }
}

/// Codex's `ThreadHistoryMode`: how a client pages through turns. Not to
/// be confused with who owns the model's history ([`HistoryMode`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThreadHistoryMode {
    #[default]
    Legacy,
    Paginated,
}

/// What started a thread (Codex `SessionSource`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SessionSource {
    Cli,
    #[serde(rename = "vscode")]
    VsCode,
    Exec,
    #[default]
    AppServer,
    Custom(String),
    SubAgent(serde_json::Value),
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitInfo {
    pub sha: Option<String>,
    pub branch: Option<String>,
    pub origin_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSection {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub appearance: Option<ThreadSectionAppearance>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSectionAppearance {
    pub icon: Option<String>,
    pub color: Option<String>,
}

/// A conversation. Every Codex field is always written (`null` when empty);
/// spool's own additions are written only when set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    pub id: String,
    /// Codex's session id; spool uses the thread id.
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub forked_from_id: Option<String>,
    #[serde(default)]
    pub parent_thread_id: Option<String>,
    /// The first user text of the thread.
    pub preview: String,
    #[serde(default)]
    pub ephemeral: bool,
    #[serde(default)]
    pub section: Option<ThreadSection>,
    #[serde(default)]
    pub section_entered_at: Option<i64>,
    #[serde(default)]
    pub project_id: Option<String>,
    #[serde(default)]
    pub history_mode: ThreadHistoryMode,
    pub model_provider: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
    #[serde(default)]
    pub recency_at: Option<i64>,
    pub status: ThreadStatus,
    pub path: Option<String>,
    pub cwd: String,
    pub cli_version: String,
    #[serde(default)]
    pub originator: Option<String>,
    #[serde(default)]
    pub source: SessionSource,
    #[serde(default)]
    pub thread_source: Option<String>,
    #[serde(default)]
    pub agent_nickname: Option<String>,
    #[serde(default)]
    pub agent_role: Option<String>,
    #[serde(default)]
    pub git_info: Option<GitInfo>,
    pub name: Option<String>,
    /// Filled only when asked for (`includeTurns`).
    #[serde(default)]
    pub turns: Vec<Turn>,
    // --- spool's opt-in additions ---
    /// Who owns the model's history; set when the thread starts, never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_owner: Option<HistoryMode>,
}

impl Thread {
    /// A thread with the required fields and every optional one empty.
    pub fn new(
        id: impl Into<String>,
        model_provider: impl Into<String>,
        cwd: impl Into<String>,
        created_at: i64,
    ) -> Self {
        let id = id.into();
        Thread {
            session_id: id.clone(),
            id,
            forked_from_id: None,
            parent_thread_id: None,
            preview: String::new(),
            ephemeral: false,
            section: None,
            section_entered_at: None,
            project_id: None,
            history_mode: ThreadHistoryMode::Legacy,
            model_provider: model_provider.into(),
            model: None,
            reasoning_effort: None,
            created_at,
            updated_at: created_at,
            recency_at: None,
            status: ThreadStatus::NotLoaded,
            path: None,
            cwd: cwd.into(),
            cli_version: env!("CARGO_PKG_VERSION").to_owned(),
            originator: None,
            source: SessionSource::AppServer,
            thread_source: None,
            agent_nickname: None,
            agent_role: None,
            git_info: None,
            name: None,
            turns: Vec::new(),
            history_owner: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    InProgress,
    Completed,
    Interrupted,
    Failed,
}

impl Turn {
    /// A turn with no items loaded and nothing but an id and a status.
    pub fn new(id: impl Into<String>, status: TurnStatus) -> Self {
        Turn {
            id: id.into(),
            items: Vec::new(),
            items_view: TurnItemsView::NotLoaded,
            status,
            error: None,
            started_at: None,
            completed_at: None,
            duration_ms: None,
            token_usage: None,
        }
    }
}

impl TurnStatus {
    pub fn is_terminal(self) -> bool {
        match self {
            TurnStatus::InProgress => false,
            TurnStatus::Completed | TurnStatus::Interrupted | TurnStatus::Failed => true,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::InProgress => "inProgress",
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
        }
    }
}

/// Machine-readable class of a turn error (Codex `CodexErrorInfo`, subset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CodexErrorInfo {
    ContextWindowExceeded,
    SessionBudgetExceeded,
    UsageLimitExceeded,
    RateLimitExceeded,
    FlexUnavailable,
    ServerOverloaded,
    CyberPolicy,
    MisalignmentPolicyViolation,
    TooManyDenials,
    #[serde(rename_all = "camelCase")]
    HttpConnectionFailed {
        http_status_code: Option<u16>,
    },
    #[serde(rename_all = "camelCase")]
    ResponseStreamConnectionFailed {
        http_status_code: Option<u16>,
    },
    InternalServerError,
    Unauthorized,
    BadRequest,
    ThreadRollbackFailed,
    SandboxError,
    #[serde(rename_all = "camelCase")]
    ResponseStreamDisconnected {
        http_status_code: Option<u16>,
    },
    #[serde(rename_all = "camelCase")]
    ResponseTooManyFailedAttempts {
        http_status_code: Option<u16>,
    },
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    pub message: String,
    pub codex_error_info: Option<CodexErrorInfo>,
    #[serde(default)]
    pub additional_details: Option<String>,
    #[serde(default)]
    pub misalignment: Option<MisalignmentErrorDetails>,
}

impl TurnError {
    pub fn new(message: impl Into<String>, codex_error_info: Option<CodexErrorInfo>) -> Self {
        TurnError {
            message: message.into(),
            codex_error_info,
            additional_details: None,
            misalignment: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MisalignmentErrorDetails {
    pub error_type: Option<String>,
    pub detailed_explanation: Option<String>,
    pub steer: Option<MisalignmentSteer>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MisalignmentSteer {
    pub message: String,
}

/// Token counts of one request or a running total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageBreakdown {
    pub total_tokens: i64,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    #[serde(default)]
    pub cache_write_input_tokens: i64,
    pub output_tokens: i64,
    pub reasoning_output_tokens: i64,
}

impl TokenUsageBreakdown {
    /// Adds `other`, saturating: the counts come from a model server, which
    /// may send anything, and a sum must not overflow.
    pub fn add(&mut self, other: &TokenUsageBreakdown) {
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.cache_write_input_tokens = self
            .cache_write_input_tokens
            .saturating_add(other.cache_write_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_output_tokens = self
            .reasoning_output_tokens
            .saturating_add(other.reasoning_output_tokens);
    }
}

#[cfg(test)]
mod usage_tests {
    use super::*;

    #[test]
    fn usage_sums_saturate_instead_of_overflowing() {
        let mut total = TokenUsageBreakdown {
            total_tokens: i64::MAX - 1,
            output_tokens: i64::MAX,
            ..TokenUsageBreakdown::default()
        };
        let huge = TokenUsageBreakdown {
            total_tokens: 10,
            output_tokens: 1,
            input_tokens: 5,
            ..TokenUsageBreakdown::default()
        };
        total.add(&huge);
        assert_eq!(total.total_tokens, i64::MAX);
        assert_eq!(total.output_tokens, i64::MAX);
        assert_eq!(total.input_tokens, 5);
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsage {
    pub total: TokenUsageBreakdown,
    pub last: TokenUsageBreakdown,
    pub model_context_window: Option<i64>,
}

/// How much of a turn's items a message carries (Codex `TurnItemsView`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnItemsView {
    NotLoaded,
    Summary,
    #[default]
    Full,
}

/// One user request and everything the agent did for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub id: String,
    /// Filled only where the method says so (Codex sends them on
    /// `thread/read` with `includeTurns`, and empty on `turn/started`).
    #[serde(default)]
    pub items: Vec<ThreadItem>,
    #[serde(default)]
    pub items_view: TurnItemsView,
    pub status: TurnStatus,
    pub error: Option<TurnError>,
    /// Unix seconds.
    #[serde(default)]
    pub started_at: Option<i64>,
    /// Unix seconds.
    #[serde(default)]
    pub completed_at: Option<i64>,
    #[serde(default)]
    pub duration_ms: Option<i64>,
    // --- spool's opt-in additions ---
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<TokenUsageBreakdown>,
}
