//! The turn loop: user input in, a model response streamed as item
//! lifecycle events, every event durable in the store before (lifecycle)
//! or while (deltas) it is streamed.

pub mod agent;
pub mod output_mapper;
pub mod runner;
pub mod turn;
mod usage;

pub use agent::{
    Agent, AgentSet, Confinement, DynamicTool, ModelSettings, SandboxOptions, ShellTool, Tool,
};
pub use runner::{
    ClientRequests, REVIEWER_INSTRUCTIONS, Review, RunError, RunResult, RunStatus, Runner, reviewer,
};
pub use turn::{InterruptSignal, TurnOptions, TurnOutcome, run_turn};

/// Failures of the runtime itself (a model failure is a failed turn, not one of these).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Store(#[from] spool_store::StoreError),
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
