//! spool's pure core: the one reducer that turns log events into items,
//! the views over a thread's items, and token budgets. No I/O.

pub mod llm;
pub mod record;
pub mod reducer;
pub mod run_state;
pub mod tokens;
pub mod views;

pub use record::{ItemRecord, TurnRecord};
pub use reducer::{ReduceError, ThreadReducer};
pub use views::View;
