//! Running agents: the [`Runner`] takes user input (or a review) into a
//! turn, streams each model response as item lifecycle events, runs tools
//! under the approval policy and the sandbox, and keeps every event durable
//! in the store before (lifecycle) or while (deltas) it is streamed. A run
//! paused on a person resumes from its stored state.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
mod output_items;
pub mod output_mapper;
pub mod runner;
mod session;
mod usage;

pub use agent::{
    Agent, AgentSet, Confinement, DynamicTool, ModelSettings, SandboxOptions, ShellTool, Tool,
};
pub use runner::{
    COMPACTION_INSTRUCTIONS, ClientRequests, CompactionPolicy, REVIEWER_INSTRUCTIONS, Review,
    RunError, RunResult, RunStatus, Runner, reviewer,
};
pub use session::CompactingSession;

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
