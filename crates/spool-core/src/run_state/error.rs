//! Why a snapshot was refused.
//!
//! A snapshot holds prompts, tool arguments and tool outputs: anything a
//! user or a tool ever typed, secrets included. Errors end up in logs and
//! in client-facing messages, so no variant carries text taken from the
//! snapshot's values. They carry only:
//! - field paths built from this module's own field names and array
//!   indices (`calls[2].executed`), never from the snapshot's keys;
//! - JSON type names (`a string`), line and column numbers;
//! - a `$schemaVersion` only once it has parsed as a short `MAJOR.MINOR`;
//! - agent and tool names in graph errors, which are identifiers the
//!   embedding program registered, not content.
//!
//! Every error raised while reading a snapshot ends with the versions this
//! build supports, oldest first, so the reader knows what it could read.

use super::version::supported_list;

/// What went wrong reading a snapshot or checking it against a graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunStateError {
    /// The text is not JSON at all (or is truncated).
    #[error(
        "RunState snapshot is not valid JSON ({kind} at line {line}, column {column}); \
         supported RunState versions: {}",
        supported_list()
    )]
    NotJson {
        kind: JsonErrorKind,
        line: usize,
        column: usize,
    },
    /// JSON, but not an object (`found` is a JSON type name).
    #[error(
        "RunState snapshot is {found}, not a JSON object; supported RunState versions: {}",
        supported_list()
    )]
    NotAnObject { found: &'static str },
    /// No `$schemaVersion` key at the top level.
    #[error(
        "RunState snapshot has no `$schemaVersion`; supported RunState versions: {}",
        supported_list()
    )]
    MissingVersion,
    /// `$schemaVersion` is not a `MAJOR.MINOR` string. Its value is not
    /// repeated: a malformed value could be anything.
    #[error(
        "RunState `$schemaVersion` must be a string of the form MAJOR.MINOR, found {found}; \
         supported RunState versions: {}",
        supported_list()
    )]
    BadVersionFormat { found: &'static str },
    /// A well-formed version this build cannot read: newer than it, or one
    /// that never shipped. Never guessed at: reading a newer shape with an
    /// older decoder could drop the field that says a call already ran.
    #[error(
        "RunState version {version} is not supported by this build{}; \
         supported RunState versions: {}",
        if *newer { " (it is newer)" } else { "" },
        supported_list()
    )]
    UnsupportedVersion { version: String, newer: bool },
    /// A field of a supported version has the wrong shape.
    #[error(
        "RunState {version} field `{path}` {problem}; supported RunState versions: {}",
        supported_list()
    )]
    Field {
        version: &'static str,
        path: String,
        problem: FieldProblem,
    },
    /// Every field has the right shape but the snapshot breaks an invariant
    /// (a call twice in the ledger, a pending request already decided...).
    #[error(
        "RunState snapshot is inconsistent: `{path}` {rule}; supported RunState versions: {}",
        supported_list()
    )]
    Inconsistent { path: String, rule: &'static str },
    /// The snapshot names an agent the graph does not have (fail closed:
    /// resuming under a different graph could route a call elsewhere).
    #[error(
        "RunState `{path}` names agent `{name}` (occurrence {occurrence}), which is not in the agent graph"
    )]
    MissingAgent {
        path: String,
        name: String,
        occurrence: u32,
    },
    /// The snapshot names a tool its agent does not have in the graph.
    #[error(
        "RunState `{path}` names tool `{tool}` of agent `{agent}` (occurrence {occurrence}), which is not in the agent graph"
    )]
    MissingTool {
        path: String,
        agent: String,
        occurrence: u32,
        tool: String,
    },
}

/// What is wrong with one field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("is missing")]
    Missing,
    /// `expected` and `found` are descriptions (`a boolean`, `a string`),
    /// never values.
    #[error("has the wrong type (expected {expected}, found {found})")]
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
    /// A number of the right type outside the field's range.
    #[error("is out of range (expected {expected})")]
    OutOfRange { expected: &'static str },
    /// A string that is not one of the enum's wire names.
    #[error("is not one of {expected}")]
    UnknownVariant { expected: &'static str },
}

/// serde_json's error category, without its message (which can quote the
/// input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JsonErrorKind {
    #[error("syntax error")]
    Syntax,
    #[error("unexpected end of input")]
    Eof,
    #[error("unreadable input")]
    Other,
}

impl RunStateError {
    /// Keeps only the category and position of a parse error: serde_json's
    /// own message can quote the input.
    pub(crate) fn not_json(error: &serde_json::Error) -> Self {
        let kind = match error.classify() {
            serde_json::error::Category::Syntax => JsonErrorKind::Syntax,
            serde_json::error::Category::Eof => JsonErrorKind::Eof,
            serde_json::error::Category::Io | serde_json::error::Category::Data => {
                JsonErrorKind::Other
            }
        };
        RunStateError::NotJson {
            kind,
            line: error.line(),
            column: error.column(),
        }
    }
}

/// `a string`, `an array`...: how errors describe a value without showing it.
pub(crate) fn json_type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
