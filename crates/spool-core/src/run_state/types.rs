//! The snapshot's data and the questions a resuming runtime asks of it.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::version::CURRENT_SCHEMA_VERSION;
use crate::llm::{HistoryCursor, ReasoningIdPolicy};
use spool_protocol::HistoryMode;

/// One agent of the graph. Two agents may share a name (two `coder`s with
/// different tools); `occurrence` tells them apart: 0 for the first agent
/// of that name in graph declaration order, 1 for the second, and so on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentKey {
    pub name: String,
    pub occurrence: u32,
}

impl AgentKey {
    pub fn new(name: impl Into<String>, occurrence: u32) -> Self {
        AgentKey {
            name: name.into(),
            occurrence,
        }
    }
}

/// A tool as the runtime looks it up: the agent that owns it and the name
/// it was registered under (not the name the model may have been shown).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolKey {
    pub agent: AgentKey,
    pub name: String,
}

impl ToolKey {
    pub fn new(agent: AgentKey, name: impl Into<String>) -> Self {
        ToolKey {
            agent,
            name: name.into(),
        }
    }
}

/// One tool call of the run: the ledger entry that keeps it from running
/// twice.
///
/// A side effect and a durable write cannot be made atomic, so the
/// runtime cannot record "ran" at the exact moment the tool finishes.
/// Instead it sets `executed` (and persists the snapshot) *before* it
/// starts the tool, and sets `completed` with the `output` once the tool
/// returns. After a crash, a call with `executed && !completed` may or may
/// not have had its effect: it is reported (see
/// [`RunState::unfinished_calls`]), never run again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// The provider's call id exactly as given (never normalized: it is
    /// echoed back to the provider with the output).
    pub call_id: String,
    pub tool: ToolKey,
    /// The spool item that shows this call.
    pub item_id: String,
    /// The arguments as the model sent them (a JSON text, kept verbatim).
    pub arguments: String,
    pub executed: bool,
    pub completed: bool,
    pub output: Option<String>,
}

/// A decision a person (or policy) already made on an approval request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    pub request_id: String,
    pub call_id: String,
    /// The exact tool the request was about: the decision binds to this
    /// key and `call_id` together (see [`RunState::decision_for`]).
    pub tool: ToolKey,
    /// The decision as it came over the wire; opaque to the core.
    pub decision: Value,
}

/// What kind of request is waiting for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum InterruptionKind {
    CommandExecution,
    FileChange,
    DynamicToolCall,
    Network,
    /// An MCP tool waiting for a person's approval.
    McpToolCall,
}

/// A request still waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interruption {
    pub request_id: String,
    pub call_id: String,
    pub tool: ToolKey,
    pub item_id: String,
    pub kind: InterruptionKind,
    /// What the person is shown: the command, or a summary of the diff.
    pub summary: String,
}

/// A run paused on approval (or interrupted), ready to resume in another
/// process or after an upgrade. See the module docs for the invariants.
///
/// Serializing writes `$schemaVersion` (always [`CURRENT_SCHEMA_VERSION`])
/// first; deserializing goes through the same version dispatch and checks
/// as [`RunState::from_json`], so embedding a `RunState` in another serde
/// type cannot bypass them.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    pub thread_id: String,
    pub turn_id: String,
    pub current_agent: AgentKey,
    /// Model calls made in this run so far.
    pub step: u32,
    pub max_turns: u32,
    pub last_response_id: Option<String>,
    /// How many leading entries of `input` the model has already seen.
    /// When the provider owns history, resume sends only the rest.
    pub acknowledged_input_count: usize,
    /// The run's Responses-API input items so far, tool outputs not yet
    /// sent included: a replay-ready history of this run.
    pub input: Vec<Value>,
    pub calls: Vec<CallRecord>,
    pub approvals: Vec<ApprovalRecord>,
    pub interruptions: Vec<Interruption>,
    /// What happens to the provider ids of reasoning items the run sends
    /// back (since 1.1; a 1.0 snapshot preserved them).
    pub reasoning_ids: ReasoningIdPolicy,
    /// Who holds the conversation when the provider does, and what it
    /// holds (since 1.1). `None`: spool replays its own log.
    pub history: Option<RunHistory>,
}

/// A provider-held history as a paused run left it: the thread's mode, the
/// tracker's cursor, and the conversation when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHistory {
    /// `previousResponseId` or `conversationId` (a `replay` run has no
    /// `RunHistory`; the decoder reads no other value).
    pub mode: HistoryMode,
    pub cursor: HistoryCursor,
    pub conversation_id: Option<String>,
}

impl Serialize for RunHistory {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("RunHistory", 3)?;
        out.serialize_field("mode", &self.mode)?;
        out.serialize_field("cursor", &self.cursor)?;
        out.serialize_field("conversationId", &self.conversation_id)?;
        out.end()
    }
}

/// Where a call stands, as far as the ledger knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// No ledger entry: the call was never started.
    Unknown,
    /// In the ledger, not started.
    NotStarted,
    /// Started but not recorded as finished: after a crash its effect is
    /// unknown. Report it; never run it again.
    Unfinished,
    Completed,
}

impl RunState {
    /// The ledger entry for a provider call id.
    pub fn call(&self, call_id: &str) -> Option<&CallRecord> {
        self.calls.iter().find(|call| call.call_id == call_id)
    }

    pub fn call_status(&self, call_id: &str) -> CallStatus {
        match self.call(call_id) {
            None => CallStatus::Unknown,
            Some(call) if !call.executed => CallStatus::NotStarted,
            Some(call) if !call.completed => CallStatus::Unfinished,
            Some(_) => CallStatus::Completed,
        }
    }

    /// Whether resuming may start this call. False as soon as the ledger
    /// says it was started, whether or not it finished: a tool never runs
    /// twice. True for a call with no entry (it never started); the runtime
    /// adds the entry with `executed: true` before starting it.
    pub fn needs_execution(&self, call_id: &str) -> bool {
        !self.call(call_id).is_some_and(|call| call.executed)
    }

    /// Calls started but never recorded as finished: to be reported after a
    /// crash, not re-run.
    pub fn unfinished_calls(&self) -> impl Iterator<Item = &CallRecord> {
        self.calls
            .iter()
            .filter(|call| call.executed && !call.completed)
    }

    /// The decision recorded for this exact tool and call. Both must match:
    /// a decision for call X of tool A never approves call X of tool B (nor
    /// of a same-named tool of another agent), even if ids collide.
    pub fn decision_for(&self, tool: &ToolKey, call_id: &str) -> Option<&Value> {
        self.approvals
            .iter()
            .find(|approval| approval.call_id == call_id && approval.tool == *tool)
            .map(|approval| &approval.decision)
    }

    /// Requests still waiting for a person: interruptions with no decision
    /// bound to their tool and call.
    pub fn pending_interruptions(&self) -> Vec<&Interruption> {
        self.interruptions
            .iter()
            .filter(|interruption| {
                self.decision_for(&interruption.tool, &interruption.call_id)
                    .is_none()
            })
            .collect()
    }

    /// The input items the model has not seen yet.
    pub fn unacknowledged_input(&self) -> &[Value] {
        self.input
            .get(self.acknowledged_input_count..)
            .unwrap_or_default()
    }

    /// The snapshot as pretty JSON, `$schemaVersion` first.
    #[allow(clippy::expect_used)] // invariant named below
    pub fn to_json(&self) -> String {
        // Cannot fail: every map this writes has string keys and every
        // value is a string, number, bool or an already-valid `Value`.
        serde_json::to_string_pretty(self).expect("a RunState always serializes")
    }
}

impl Serialize for RunState {
    // Written by hand so `$schemaVersion` comes first and is always the
    // current version: the struct has no version field that could drift.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("RunState", 14)?;
        out.serialize_field("$schemaVersion", CURRENT_SCHEMA_VERSION)?;
        out.serialize_field("threadId", &self.thread_id)?;
        out.serialize_field("turnId", &self.turn_id)?;
        out.serialize_field("currentAgent", &self.current_agent)?;
        out.serialize_field("step", &self.step)?;
        out.serialize_field("maxTurns", &self.max_turns)?;
        out.serialize_field("lastResponseId", &self.last_response_id)?;
        out.serialize_field("acknowledgedInputCount", &self.acknowledged_input_count)?;
        out.serialize_field("input", &self.input)?;
        out.serialize_field("calls", &self.calls)?;
        out.serialize_field("approvals", &self.approvals)?;
        out.serialize_field("interruptions", &self.interruptions)?;
        out.serialize_field("reasoningIds", &self.reasoning_ids)?;
        out.serialize_field("history", &self.history)?;
        out.end()
    }
}

impl<'de> Deserialize<'de> for RunState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        super::decode::from_value(value).map_err(serde::de::Error::custom)
    }
}
