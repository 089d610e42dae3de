//! Shell commands: running one as a child process, and reading a command
//! line well enough to label it and to tell whether it only reads.
//!
//! [`run_command`] runs an argv (no shell unless the argv names one) in its
//! own process group, streams its output, enforces a timeout and honours
//! cancellation by killing the whole group, so that nothing the command
//! started outlives a kill. [`command_actions`] and [`is_known_safe`] look
//! inside `bash -lc "…"` scripts with a small conservative reader; they
//! never run anything.

mod actions;
mod args;
mod env;
mod error;
mod format;
mod guard;
mod output;
mod parse;
mod run;
mod safe;

pub use actions::command_actions;
pub use env::{is_secret_name, names_to_remove};
pub use error::ShellError;
pub use format::format_command;
pub use guard::{GIT_ENV, neutralize_git};
pub use output::OutputStream;
pub use run::{
    DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, ShellCommand, ShellEnd, ShellOutcome, run_command,
    run_command_with,
};
pub use safe::is_known_safe;
