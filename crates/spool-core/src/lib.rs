//! spool's pure core: the one reducer that turns log events into items,
//! the views over a thread's items, and token budgets. No I/O.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod llm;
pub mod record;
pub mod reducer;
pub mod run_state;
pub mod tokens;
pub mod views;

pub use record::{ItemRecord, TurnRecord};
pub use reducer::{Closed, ReduceError, ThreadReducer};
pub use views::View;
