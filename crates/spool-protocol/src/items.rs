//! Items: one unit of work in a turn, tagged by `type`.
//!
//! The kinds shared with Codex app-server protocol v2 keep Codex's field
//! names, types and enum values; `Option` fields serialize as explicit
//! `null`, as Codex does. The remaining kinds are spool's own.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::Audience;
use crate::user_input::UserInput;

mod fields;
pub use fields::*;

/// Every kind of item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadItem {
    // --- conversation (Codex) ---
    #[serde(rename_all = "camelCase")]
    UserMessage {
        id: String,
        /// The id the client gave the message, if any.
        #[serde(default)]
        client_id: Option<String>,
        content: Vec<UserInput>,
    },
    #[serde(rename_all = "camelCase")]
    AgentMessage {
        id: String,
        text: String,
        #[serde(default)]
        phase: Option<MessagePhase>,
        #[serde(default)]
        memory_citation: Option<Box<MemoryCitation>>,
        #[serde(default)]
        delivery: Option<AgentMessageDelivery>,
        #[serde(default)]
        questions: Option<Vec<AsyncUserInputQuestion>>,
    },
    #[serde(rename_all = "camelCase")]
    Reasoning {
        id: String,
        #[serde(default)]
        summary: Vec<String>,
        #[serde(default)]
        content: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    Plan { id: String, text: String },

    // --- tools (Codex) ---
    #[serde(rename_all = "camelCase")]
    CommandExecution {
        id: String,
        #[serde(default)]
        plugin_id: Option<String>,
        #[serde(default)]
        script_path: Option<String>,
        command: String,
        cwd: String,
        #[serde(default)]
        process_id: Option<String>,
        #[serde(default)]
        source: CommandExecutionSource,
        status: CommandExecutionStatus,
        #[serde(default)]
        command_actions: Vec<CommandAction>,
        #[serde(default)]
        aggregated_output: Option<String>,
        #[serde(default)]
        exit_code: Option<i32>,
        #[serde(default)]
        duration_ms: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    FileChange {
        id: String,
        changes: Vec<FileUpdateChange>,
        status: PatchApplyStatus,
    },
    #[serde(rename_all = "camelCase")]
    McpToolCall {
        id: String,
        server: String,
        tool: String,
        status: McpToolCallStatus,
        arguments: Value,
        #[serde(default)]
        app_context: Option<Box<McpToolCallAppContext>>,
        /// Legacy form of `mcpAppUi.resourceUri`, written only when set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp_app_resource_uri: Option<String>,
        #[serde(default)]
        mcp_app_ui: Option<Box<McpAppUi>>,
        #[serde(default)]
        plugin_id: Option<String>,
        #[serde(default)]
        read_only_hint: Option<bool>,
        #[serde(default)]
        result: Option<Box<McpToolCallResult>>,
        #[serde(default)]
        error: Option<McpToolCallError>,
        #[serde(default)]
        duration_ms: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    DynamicToolCall {
        id: String,
        #[serde(default)]
        namespace: Option<String>,
        tool: String,
        arguments: Value,
        status: DynamicToolCallStatus,
        #[serde(default)]
        content_items: Option<Vec<DynamicToolCallOutputContentItem>>,
        #[serde(default)]
        success: Option<bool>,
        #[serde(default)]
        duration_ms: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    WebSearch {
        id: String,
        query: String,
        #[serde(default)]
        action: Option<WebSearchAction>,
        #[serde(default)]
        results: Option<Vec<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    ImageView { id: String, path: String },

    // --- housekeeping (Codex) ---
    #[serde(rename_all = "camelCase")]
    EnteredReviewMode { id: String, review: String },
    #[serde(rename_all = "camelCase")]
    ExitedReviewMode { id: String, review: String },
    #[serde(rename_all = "camelCase")]
    ContextCompaction {
        id: String,
        /// spool: the summary that replaces the compacted turns for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// spool: the seqs of the first and last events it replaces (every
        /// item that started before it); `None` while it runs, or when it
        /// replaced nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<SeqRange>,
    },

    // --- spool's own kinds ---
    /// A tool executed in-process by the runtime (a Rust closure).
    #[serde(rename_all = "camelCase")]
    FunctionCall {
        id: String,
        name: String,
        /// The provider's call id, as given.
        call_id: String,
        /// The arguments as the model wrote them (a JSON string).
        arguments: String,
        status: FunctionCallStatus,
        #[serde(default)]
        output: Option<String>,
        #[serde(default)]
        duration_ms: Option<i64>,
    },
    /// Control passes from one agent to another.
    #[serde(rename_all = "camelCase")]
    Handoff {
        id: String,
        from_agent: String,
        to_agent: String,
        #[serde(default)]
        call_id: Option<String>,
    },
    /// A named UI component with JSON props.
    #[serde(rename_all = "camelCase")]
    Component {
        id: String,
        name: String,
        props: Value,
    },
    /// Groups other items by id.
    #[serde(rename_all = "camelCase")]
    Container {
        id: String,
        #[serde(default)]
        title: Option<String>,
        children: Vec<String>,
    },
    /// Transient progress. Streamed, never persisted.
    #[serde(rename_all = "camelCase")]
    Status { id: String, text: String },
    /// A change of application state (persisted only in dev mode).
    #[serde(rename_all = "camelCase")]
    StateChange {
        id: String,
        key: String,
        value: Value,
    },
    /// A change to an external resource (persisted only in dev mode).
    #[serde(rename_all = "camelCase")]
    ResourceChange {
        id: String,
        uri: String,
        change: String,
    },
    /// A step failed but the turn goes on.
    #[serde(rename_all = "camelCase")]
    StepError { id: String, message: String },
    /// A terminal error of the turn.
    #[serde(rename_all = "camelCase")]
    Error { id: String, message: String },
    /// Hidden context for the model only.
    #[serde(rename_all = "camelCase")]
    Context { id: String, text: String },
}

/// The `type` tag of an item, without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ItemKind {
    UserMessage,
    AgentMessage,
    Reasoning,
    Plan,
    CommandExecution,
    FileChange,
    McpToolCall,
    DynamicToolCall,
    WebSearch,
    ImageView,
    EnteredReviewMode,
    ExitedReviewMode,
    ContextCompaction,
    FunctionCall,
    Handoff,
    Component,
    Container,
    Status,
    StateChange,
    ResourceChange,
    StepError,
    Error,
    Context,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::UserMessage => "userMessage",
            ItemKind::AgentMessage => "agentMessage",
            ItemKind::Reasoning => "reasoning",
            ItemKind::Plan => "plan",
            ItemKind::CommandExecution => "commandExecution",
            ItemKind::FileChange => "fileChange",
            ItemKind::McpToolCall => "mcpToolCall",
            ItemKind::DynamicToolCall => "dynamicToolCall",
            ItemKind::WebSearch => "webSearch",
            ItemKind::ImageView => "imageView",
            ItemKind::EnteredReviewMode => "enteredReviewMode",
            ItemKind::ExitedReviewMode => "exitedReviewMode",
            ItemKind::ContextCompaction => "contextCompaction",
            ItemKind::FunctionCall => "functionCall",
            ItemKind::Handoff => "handoff",
            ItemKind::Component => "component",
            ItemKind::Container => "container",
            ItemKind::Status => "status",
            ItemKind::StateChange => "stateChange",
            ItemKind::ResourceChange => "resourceChange",
            ItemKind::StepError => "stepError",
            ItemKind::Error => "error",
            ItemKind::Context => "context",
        }
    }

    /// Who sees an item of this kind unless its producer says otherwise
    /// (`docs/internals/views-and-providers.md`).
    pub fn default_audience(self) -> Audience {
        match self {
            ItemKind::Context => Audience::LLM_ONLY,
            ItemKind::Status
            | ItemKind::Component
            | ItemKind::Container
            | ItemKind::StateChange
            | ItemKind::ResourceChange
            | ItemKind::StepError
            | ItemKind::Error
            | ItemKind::EnteredReviewMode => Audience::CLIENT_ONLY,
            // A review's findings reach later turns (its other items do
            // not: see spool-runtime's `review`).
            ItemKind::ExitedReviewMode
            | ItemKind::UserMessage
            | ItemKind::AgentMessage
            | ItemKind::Reasoning
            | ItemKind::Plan
            | ItemKind::CommandExecution
            | ItemKind::FileChange
            | ItemKind::McpToolCall
            | ItemKind::DynamicToolCall
            | ItemKind::WebSearch
            | ItemKind::ImageView
            | ItemKind::ContextCompaction
            | ItemKind::FunctionCall
            | ItemKind::Handoff => Audience::BOTH,
        }
    }

    /// Whether items of this kind are stored: `status` never is (it is
    /// transient progress); `stateChange`/`resourceChange` only in dev mode.
    pub fn is_persisted(self, dev_mode: bool) -> bool {
        match self {
            ItemKind::Status => false,
            ItemKind::StateChange | ItemKind::ResourceChange => dev_mode,
            ItemKind::UserMessage
            | ItemKind::AgentMessage
            | ItemKind::Reasoning
            | ItemKind::Plan
            | ItemKind::CommandExecution
            | ItemKind::FileChange
            | ItemKind::McpToolCall
            | ItemKind::DynamicToolCall
            | ItemKind::WebSearch
            | ItemKind::ImageView
            | ItemKind::EnteredReviewMode
            | ItemKind::ExitedReviewMode
            | ItemKind::ContextCompaction
            | ItemKind::FunctionCall
            | ItemKind::Handoff
            | ItemKind::Component
            | ItemKind::Container
            | ItemKind::StepError
            | ItemKind::Error
            | ItemKind::Context => true,
        }
    }

    /// Whether this kind is one Codex app-server v2 clients know.
    pub fn is_codex_kind(self) -> bool {
        match self {
            ItemKind::UserMessage
            | ItemKind::AgentMessage
            | ItemKind::Reasoning
            | ItemKind::Plan
            | ItemKind::CommandExecution
            | ItemKind::FileChange
            | ItemKind::McpToolCall
            | ItemKind::DynamicToolCall
            | ItemKind::WebSearch
            | ItemKind::ImageView
            | ItemKind::EnteredReviewMode
            | ItemKind::ExitedReviewMode
            | ItemKind::ContextCompaction => true,
            ItemKind::FunctionCall
            | ItemKind::Handoff
            | ItemKind::Component
            | ItemKind::Container
            | ItemKind::Status
            | ItemKind::StateChange
            | ItemKind::ResourceChange
            | ItemKind::StepError
            | ItemKind::Error
            | ItemKind::Context => false,
        }
    }
}

impl ThreadItem {
    /// A user message with every optional Codex field empty.
    pub fn user_message(id: impl Into<String>, content: Vec<UserInput>) -> Self {
        ThreadItem::UserMessage {
            id: id.into(),
            client_id: None,
            content,
        }
    }

    /// An agent message with every optional Codex field empty.
    pub fn agent_message(id: impl Into<String>, text: impl Into<String>) -> Self {
        ThreadItem::AgentMessage {
            id: id.into(),
            text: text.into(),
            phase: None,
            memory_citation: None,
            delivery: None,
            questions: None,
        }
    }

    pub fn id(&self) -> &str {
        match self {
            ThreadItem::UserMessage { id, .. }
            | ThreadItem::AgentMessage { id, .. }
            | ThreadItem::Reasoning { id, .. }
            | ThreadItem::Plan { id, .. }
            | ThreadItem::CommandExecution { id, .. }
            | ThreadItem::FileChange { id, .. }
            | ThreadItem::McpToolCall { id, .. }
            | ThreadItem::DynamicToolCall { id, .. }
            | ThreadItem::WebSearch { id, .. }
            | ThreadItem::ImageView { id, .. }
            | ThreadItem::EnteredReviewMode { id, .. }
            | ThreadItem::ExitedReviewMode { id, .. }
            | ThreadItem::ContextCompaction { id, .. }
            | ThreadItem::FunctionCall { id, .. }
            | ThreadItem::Handoff { id, .. }
            | ThreadItem::Component { id, .. }
            | ThreadItem::Container { id, .. }
            | ThreadItem::Status { id, .. }
            | ThreadItem::StateChange { id, .. }
            | ThreadItem::ResourceChange { id, .. }
            | ThreadItem::StepError { id, .. }
            | ThreadItem::Error { id, .. }
            | ThreadItem::Context { id, .. } => id,
        }
    }

    pub fn kind(&self) -> ItemKind {
        match self {
            ThreadItem::UserMessage { .. } => ItemKind::UserMessage,
            ThreadItem::AgentMessage { .. } => ItemKind::AgentMessage,
            ThreadItem::Reasoning { .. } => ItemKind::Reasoning,
            ThreadItem::Plan { .. } => ItemKind::Plan,
            ThreadItem::CommandExecution { .. } => ItemKind::CommandExecution,
            ThreadItem::FileChange { .. } => ItemKind::FileChange,
            ThreadItem::McpToolCall { .. } => ItemKind::McpToolCall,
            ThreadItem::DynamicToolCall { .. } => ItemKind::DynamicToolCall,
            ThreadItem::WebSearch { .. } => ItemKind::WebSearch,
            ThreadItem::ImageView { .. } => ItemKind::ImageView,
            ThreadItem::EnteredReviewMode { .. } => ItemKind::EnteredReviewMode,
            ThreadItem::ExitedReviewMode { .. } => ItemKind::ExitedReviewMode,
            ThreadItem::ContextCompaction { .. } => ItemKind::ContextCompaction,
            ThreadItem::FunctionCall { .. } => ItemKind::FunctionCall,
            ThreadItem::Handoff { .. } => ItemKind::Handoff,
            ThreadItem::Component { .. } => ItemKind::Component,
            ThreadItem::Container { .. } => ItemKind::Container,
            ThreadItem::Status { .. } => ItemKind::Status,
            ThreadItem::StateChange { .. } => ItemKind::StateChange,
            ThreadItem::ResourceChange { .. } => ItemKind::ResourceChange,
            ThreadItem::StepError { .. } => ItemKind::StepError,
            ThreadItem::Error { .. } => ItemKind::Error,
            ThreadItem::Context { .. } => ItemKind::Context,
        }
    }
}
