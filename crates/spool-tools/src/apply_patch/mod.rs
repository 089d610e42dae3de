//! The `apply_patch` tool: the patch format OpenAI models emit to add,
//! delete, move and edit files, parsed and applied inside a workspace root.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path/new.txt
//! +line one
//! *** Update File: src/lib.rs
//! *** Move to: src/renamed.rs
//! @@ fn context_header
//!  context line
//! -removed line
//! +added line
//! *** End of File
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! The pieces, in the order a caller uses them:
//!
//! - [`parse_patch`] turns the model's text into a [`Patch`]. It tolerates
//!   what models really send (surrounding whitespace, a heredoc wrapper,
//!   CRLF, no trailing newline) and reports anything else as a
//!   [`PatchError`] naming the line and what was expected there.
//! - [`affected_paths`] lists every path a patch would touch, move targets
//!   included, so an approval policy can decide before anything is read.
//! - [`preview`] computes every file's new contents in memory and returns
//!   one [`FileUpdateChange`] (with a unified diff) per operation, without
//!   writing anything. This is what an approval request shows.
//! - [`apply`] does the same validation and then writes, atomically: if
//!   any operation fails to validate nothing is written, and if an I/O
//!   error happens midway what was already written is rolled back.
//!
//! Every path goes through [`resolve_in_workspace`], which refuses paths
//! that escape the root lexically (`..`, foreign absolute paths) or through
//! a symlink.

mod apply;
mod diff;
mod error;
mod matching;
mod parse;
mod paths;
mod plan;

use std::path::{Path, PathBuf};

use spool_protocol::FileUpdateChange;

pub use diff::unified_diff;
pub use error::PatchError;
pub use parse::parse_patch;
pub use paths::resolve_in_workspace;

/// Internals exposed for the fuzz targets in `fuzz/` (not a stable API).
#[doc(hidden)]
pub mod fuzzing {
    use super::{PatchError, UpdateChunk};

    /// An update's chunks applied to a file's text in memory, as
    /// [`preview`](super::preview) and [`apply`](super::apply) do (`path`
    /// only names the file in errors).
    pub fn apply_chunks(
        path: &str,
        content: &str,
        chunks: &[UpdateChunk],
    ) -> Result<String, PatchError> {
        super::matching::apply_chunks(path, content, chunks)
    }
}

/// A parsed patch: file operations in the order they appear. Operations
/// are applied in this order, so a later one sees the result of an earlier
/// one on the same path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub ops: Vec<FileOp>,
}

/// One `*** … File:` section of a patch. Paths are kept exactly as the
/// model wrote them; they are resolved against a root only when previewed
/// or applied, so errors can quote them back verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// Create a new file. `contents` is the `+` lines joined with `\n`,
    /// ending with a newline unless empty. Refused if the path exists.
    Add { path: String, contents: String },
    /// Remove an existing file.
    Delete { path: String },
    /// Edit an existing file by chunks, optionally moving it.
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<UpdateChunk>,
    },
}

impl FileOp {
    /// The path the operation reads or creates (not the move target).
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One `@@` section of an update: `old_lines` (context and `-` lines) are
/// located in the file and replaced by `new_lines` (context and `+` lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateChunk {
    /// Text after `@@`: the chunk is searched for only after the first
    /// line (at or after the previous chunk) that matches it.
    pub header: Option<String>,
    pub old_lines: Vec<String>,
    pub new_lines: Vec<String>,
    /// `*** End of File` followed the chunk: `old_lines` must match the
    /// last lines of the file.
    pub end_of_file: bool,
    /// 1-based line of the patch text where the chunk starts, for errors.
    pub line: usize,
}

/// Every path the patch touches, as written, move targets included, each
/// once, in order of first appearance. For approval decisions; nothing is
/// resolved or read.
pub fn affected_paths(patch: &Patch) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: &str| {
        let p = PathBuf::from(p);
        if !out.contains(&p) {
            out.push(p);
        }
    };
    for op in &patch.ops {
        push(op.path());
        if let FileOp::Update {
            move_to: Some(dest),
            ..
        } = op
        {
            push(dest);
        }
    }
    out
}

/// Validates the patch against the files under `root` and returns the
/// change each operation would make, with diffs. Writes nothing.
pub fn preview(patch: &Patch, root: &Path) -> Result<Vec<FileUpdateChange>, PatchError> {
    Ok(plan::plan(patch, root)?.changes)
}

/// Applies the patch under `root`, all or nothing: everything is validated
/// and computed before the first write; files are replaced via a temporary
/// file and a rename; deletions come last; an I/O error midway restores
/// what was already written. Returns the same changes as [`preview`].
pub fn apply(patch: &Patch, root: &Path) -> Result<Vec<FileUpdateChange>, PatchError> {
    let plan = plan::plan(patch, root)?;
    apply::write_all(&plan.writes)?;
    Ok(plan.changes)
}
