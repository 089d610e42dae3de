//! Why a command could not be run at all (as opposed to running and
//! failing, which is a [`super::ShellOutcome`]).

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("empty command: argv has no program to run")]
    EmptyCommand,
    #[error("working directory {} does not exist", .path.display())]
    CwdMissing { path: PathBuf },
    #[error("working directory {} is not a directory", .path.display())]
    CwdNotDirectory { path: PathBuf },
    #[error("working directory {} is not accessible: {source}", .path.display())]
    CwdInaccessible { path: PathBuf, source: io::Error },
    #[error("failed to start {program:?}: {}", spawn_reason(.program, .source))]
    Spawn { program: String, source: io::Error },
    #[error("I/O error while running the command: {0}")]
    Io(#[source] io::Error),
    /// The command could not be placed in its sandbox; it did not run.
    #[error("{0}")]
    Sandbox(String),
}

fn spawn_reason(program: &str, err: &io::Error) -> String {
    match err.kind() {
        // execvp reports a missing #! interpreter as ENOENT for the script.
        io::ErrorKind::NotFound if program.contains('/') => {
            "no such file (or its #! interpreter is missing)".to_owned()
        }
        io::ErrorKind::NotFound => "no such program on PATH".to_owned(),
        io::ErrorKind::PermissionDenied => format!("permission denied (is it executable?): {err}"),
        _ => err.to_string(),
    }
}
