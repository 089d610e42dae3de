//! RunState: the versioned snapshot of a paused run
//! (`docs/internals/run-state.md`).
//!
//! A run that stops to wait for a person (an approval request) or is
//! interrupted serializes to a [`RunState`]. Another process, possibly a
//! newer build, reads it back and continues the run *without changing its
//! behaviour*: the same agent, the same tools, the same decisions, and no
//! tool call executed twice.
//!
//! # Shape
//!
//! ```json
//! {
//!   "$schemaVersion": "1.2",
//!   "threadId": "...", "turnId": "...",
//!   "currentAgent": { "name": "coder", "occurrence": 1 },
//!   "step": 1, "maxTurns": 10, "lastResponseId": "resp_..." | null,
//!   "acknowledgedInputCount": 4, "input": [ {...Responses input item...} ],
//!   "calls": [ { "callId", "tool": { "agent", "name" }, "itemId",
//!                "arguments", "executed", "completed", "output" } ],
//!   "approvals": [ { "requestId", "callId", "tool", "decision" } ],
//!   "interruptions": [ { "requestId", "callId", "tool", "itemId",
//!                        "kind", "summary" } ],
//!   "reasoningIds": "preserve" | "omit",
//!   "history": null | { "mode": "previousResponseId" | "conversationId",
//!                       "cursor": { "previousResponseId", "throughOrdinal",
//!                                   "unsent": [ { "itemId", "part" } ],
//!                                   "heldCalls": [ "call_..." ] },
//!                       "conversationId": "conv_..." | null }
//! }
//! ```
//!
//! # Identity
//!
//! - An agent is an [`AgentKey`]: its name and its *occurrence* (0 for the
//!   first agent of that name in graph declaration order, 1 for the
//!   next...), so two agents both called `coder` stay apart.
//! - A tool is a [`ToolKey`]: its agent's key and the name it was
//!   registered under (the runtime's lookup key).
//! - Provider call ids are kept exactly as given; they go back to the
//!   provider with the outputs.
//!
//! # Invariants
//!
//! Checked by [`RunState::validate`], which [`RunState::from_json`] runs:
//! - `acknowledgedInputCount <= input.len()`: the first
//!   `acknowledgedInputCount` items were seen by the model; when the
//!   provider owns history, resume sends only the rest.
//! - The ledger (`calls`) has at most one entry per call id.
//!   `completed` implies `executed`; `output` is set only when `completed`.
//! - A side effect cannot be recorded atomically with its completion, so
//!   the runtime sets `executed` and persists *before* starting a tool, and
//!   sets `completed` + `output` after. A resumed run never starts a call
//!   with `executed: true` ([`RunState::needs_execution`] is false); one
//!   with `executed && !completed` (crashed mid-call) is reported via
//!   [`RunState::unfinished_calls`], never re-run.
//! - A decision binds to the exact tool key *and* call id it was given for
//!   ([`RunState::decision_for`]): a decision for call X of tool A never
//!   approves call X of tool B, nor of a same-named tool of another agent.
//!   At most one decision per (tool, call); request ids are unique; an
//!   approval whose call is in the ledger has that entry's tool.
//! - `interruptions` hold only requests still waiting: none is already
//!   answered, none names a call the ledger says started, each matches its
//!   ledger entry's tool, and no two wait on the same (tool, call).
//! - Before resuming, [`RunState::check_against`] confirms that the
//!   current agent and every agent and tool the snapshot names exist in the
//!   [`AgentGraph`] (fail closed: a renamed or reordered graph could
//!   otherwise route an approved call to another tool).
//!
//! # Versions
//!
//! `$schemaVersion` is `"MAJOR.MINOR"` and is read before anything else.
//! [`SCHEMA_VERSIONS`] lists every version this build reads, each with a
//! one-line summary; [`CURRENT_SCHEMA_VERSION`] is the one it writes.
//! Versions compare numerically (`1.10` > `1.9`). A snapshot with no
//! version, a malformed one, or a version not in the table (newer or never
//! shipped) is rejected with a typed [`RunStateError`] that lists the
//! supported versions, oldest first. Errors never quote the snapshot's
//! values (they hold prompts, tool output, maybe secrets): they give field
//! paths, JSON type names and line/column only; a version string is
//! repeated only once it parsed as a short `MAJOR.MINOR`.
//!
//! This reader rejects unknown *versions*, not unknown *fields*: within a
//! supported version, keys it does not know are skipped.
//!
//! **Bump MINOR** for additive changes whose absence has a default that
//! reproduces the old behaviour: a new optional field, a new field with a
//! default. Old snapshots still read (the old version's decoder fills the
//! default); a writer of the new MINOR is still rejected by older builds,
//! deliberately, because they cannot know whether the new field matters for
//! safety (e.g. it could record that a call already ran).
//!
//! **Bump MAJOR** when the meaning of an existing field changes, a field
//! is removed or renamed, or a new field has no safe default. An old
//! MAJOR is read only through an explicit migration, or not at all.
//!
//! # Adding a version
//!
//! 1. Add its row (version and one-line summary) to [`SCHEMA_VERSIONS`]
//!    and move [`CURRENT_SCHEMA_VERSION`] to it.
//! 2. Change the current struct and its `Serialize` impl (`types.rs`).
//! 3. Add a decoder module (`v1_1.rs`) and its arm in `decode.rs`. Keep
//!    every older decoder: each now migrates its shape to the new struct
//!    (fill new fields with their defaults). Old decoders are frozen — never
//!    teach `v1_0` to read 1.1 fields.
//! 4. Add `tests/fixtures/run_state/v<version>/` with at least
//!    `minimal.json`, and keep the older directories: they prove old
//!    snapshots still read. The fixture tests fail if a table entry has no
//!    directory or a directory has no table entry.

mod decode;
mod error;
mod graph;
mod reader;
mod types;
mod v1_0;
mod v1_1;
mod v1_2;
mod validate;
mod version;

pub use error::{FieldProblem, JsonErrorKind, RunStateError};
pub use graph::{AgentGraph, StaticAgentGraph};
pub use types::{
    AgentKey, ApprovalRecord, CallRecord, CallStatus, Interruption, InterruptionKind, RunHistory,
    RunState, ToolKey,
};
pub use version::{
    CURRENT_SCHEMA_VERSION, SCHEMA_VERSIONS, SchemaVersion, compare_versions, sorted_versions,
    supported_versions,
};
