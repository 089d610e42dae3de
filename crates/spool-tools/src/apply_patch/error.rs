//! Everything that can go wrong, worded for the model that wrote the patch:
//! parse errors name the line (1-based, counted in the text as received)
//! and what was expected; apply errors quote the path as the patch wrote it.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("line {line}: expected {expected}, found '{found}'")]
    Unexpected {
        line: usize,
        expected: String,
        found: String,
    },
    #[error("line {line}: expected {expected}, but the patch ended")]
    UnexpectedEnd { line: usize, expected: String },
    #[error("line {line}: '{marker}' must be followed by a path")]
    MissingPath { line: usize, marker: &'static str },
    #[error(
        "line {line}: update chunk for '{path}' is empty (expected lines starting with ' ', '-' or '+' after '@@')"
    )]
    EmptyChunk { line: usize, path: String },
    #[error(
        "line {line}: '*** Update File: {path}' has no changes (expected '@@' and lines starting with ' ', '-' or '+')"
    )]
    EmptyUpdate { line: usize, path: String },
    #[error("the patch contains no file operations")]
    EmptyPatch,

    #[error("path '{path}' is outside the workspace")]
    OutsideWorkspace { path: String },
    #[error("path '{path}' cannot be used: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error("cannot {action} '{path}': the file does not exist")]
    NotFound { path: String, action: &'static str },
    #[error(
        "cannot add '{path}': it already exists (use '*** Update File:' to change an existing file)"
    )]
    AlreadyExists { path: String },
    #[error("cannot move '{from}' to '{path}': the destination already exists")]
    MoveTargetExists { from: String, path: String },
    #[error("'{path}' is not a regular file")]
    NotAFile { path: String },
    #[error("cannot create '{path}': '{blocker}' is not a directory")]
    ParentNotADirectory { path: String, blocker: String },
    #[error("'{path}' is not UTF-8 text, so it cannot be patched")]
    NotUtf8 { path: String },
    #[error(
        "'{path}': the chunk at patch line {line} names '@@ {header}', but no such line was found{after}"
    )]
    HeaderNotFound {
        path: String,
        line: usize,
        header: String,
        /// Empty, or " after the previous chunk" when the search started
        /// past the start of the file.
        after: &'static str,
    },
    #[error(
        "'{path}': the chunk at patch line {line} does not match the file{where_}; first context line not found: '{expected}'"
    )]
    ContextNotFound {
        path: String,
        line: usize,
        expected: String,
        /// Where the chunk was looked for: " after the previous chunk",
        /// " at the end of the file", or empty.
        where_: &'static str,
    },

    #[error("could not {action} '{}': {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{error}; rolling back also failed for: {}", failed.join(", "))]
    RollbackFailed {
        error: Box<PatchError>,
        failed: Vec<String>,
    },
}

impl PatchError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        PatchError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
