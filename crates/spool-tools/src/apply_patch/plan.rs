//! Computing a patch's effect in memory. Operations run in order against
//! an overlay of the files they touch (loaded from disk on first touch), so
//! a later operation sees an earlier one's result and every check happens
//! before anything is written. The outcome is the list of changes to report
//! and the final state of each touched file, for `apply` to write.

use std::fs::{self, Permissions};
use std::io;
use std::path::{Path, PathBuf};

use spool_protocol::{FileUpdateChange, PatchChangeKind};

use super::diff::unified_diff;
use super::matching::apply_chunks;
use super::{FileOp, Patch, PatchError, resolve_in_workspace};

pub(crate) struct Plan {
    pub changes: Vec<FileUpdateChange>,
    pub writes: Vec<FileWrite>,
}

/// The final state of one touched path, when it differs from the disk.
#[derive(Debug)]
pub(crate) struct FileWrite {
    /// Where the entry lives; what a delete removes.
    pub path: PathBuf,
    /// Where new contents go: `path`, or the file a symlink at `path`
    /// points to (inside the workspace), so editing through a link keeps
    /// the link.
    pub target: PathBuf,
    /// The file as it is on disk, if it exists: what a rollback restores.
    pub original: Option<Original>,
    /// New contents, or `None` to delete.
    pub contents: Option<Vec<u8>>,
    /// Permissions for the written file: the file's own on update, the
    /// source's on a move, the process default on add.
    pub permissions: Option<Permissions>,
}

#[derive(Debug)]
pub(crate) struct Original {
    pub bytes: Vec<u8>,
    pub permissions: Permissions,
}

/// One touched path in the overlay.
struct Entry {
    path: PathBuf,
    target: PathBuf,
    original: Option<Original>,
    current: Option<Vec<u8>>,
    permissions: Option<Permissions>,
}

struct Overlay<'r> {
    root: &'r Path,
    canon_root: PathBuf,
    /// In order of first touch, which is the order files are written in.
    /// A patch touches few files, so a linear lookup is fine.
    entries: Vec<Entry>,
}

pub(crate) fn plan(patch: &Patch, root: &Path) -> Result<Plan, PatchError> {
    let canon_root = root
        .canonicalize()
        .map_err(|e| PatchError::io("resolve the workspace root", root, e))?;
    let mut overlay = Overlay {
        root,
        canon_root,
        entries: Vec::new(),
    };
    let mut changes = Vec::with_capacity(patch.ops.len());
    for op in &patch.ops {
        changes.push(overlay.run(op)?);
    }
    let writes = overlay
        .entries
        .into_iter()
        .filter(|e| e.original.as_ref().map(|o| &o.bytes) != e.current.as_ref())
        .map(|e| FileWrite {
            path: e.path,
            target: e.target,
            original: e.original,
            contents: e.current,
            permissions: e.permissions,
        })
        .collect();
    Ok(Plan { changes, writes })
}

impl Overlay<'_> {
    fn run(&mut self, op: &FileOp) -> Result<FileUpdateChange, PatchError> {
        match op {
            FileOp::Add { path, contents } => {
                let (i, resolved) = self.load(path)?;
                if self.entries[i].current.is_some() {
                    return Err(PatchError::AlreadyExists { path: path.clone() });
                }
                check_parent(&resolved, path)?;
                self.entries[i].current = Some(contents.clone().into_bytes());
                Ok(FileUpdateChange {
                    path: resolved.display().to_string(),
                    kind: PatchChangeKind::Add,
                    diff: unified_diff("", contents, "/dev/null", &self.label("b", &resolved)),
                })
            }
            FileOp::Delete { path } => {
                let (i, resolved) = self.load(path)?;
                let Some(old) = self.entries[i].current.take() else {
                    return Err(not_found(path, "delete"));
                };
                let old = String::from_utf8_lossy(&old);
                Ok(FileUpdateChange {
                    path: resolved.display().to_string(),
                    kind: PatchChangeKind::Delete,
                    diff: unified_diff(&old, "", &self.label("a", &resolved), "/dev/null"),
                })
            }
            FileOp::Update {
                path,
                move_to,
                chunks,
            } => {
                let (i, resolved) = self.load(path)?;
                let Some(old) = &self.entries[i].current else {
                    return Err(not_found(path, "update"));
                };
                let old = String::from_utf8(old.clone())
                    .map_err(|_| PatchError::NotUtf8 { path: path.clone() })?;
                let new = apply_chunks(path, &old, chunks)?;
                let mut dest = resolved.clone();
                let mut move_path = None;
                match move_to {
                    Some(to) if resolve_in_workspace(self.root, to)? != resolved => {
                        let (j, to_resolved) = self.load(to)?;
                        if self.entries[j].current.is_some() {
                            return Err(PatchError::MoveTargetExists {
                                from: path.clone(),
                                path: to.clone(),
                            });
                        }
                        check_parent(&to_resolved, to)?;
                        let permissions = self.entries[i].permissions.clone();
                        self.entries[i].current = None;
                        self.entries[j].current = Some(new.clone().into_bytes());
                        self.entries[j].permissions = permissions;
                        move_path = Some(to_resolved.display().to_string());
                        dest = to_resolved;
                    }
                    _ => self.entries[i].current = Some(new.clone().into_bytes()),
                }
                Ok(FileUpdateChange {
                    path: resolved.display().to_string(),
                    kind: PatchChangeKind::Update { move_path },
                    diff: unified_diff(
                        &old,
                        &new,
                        &self.label("a", &resolved),
                        &self.label("b", &dest),
                    ),
                })
            }
        }
    }

    /// Resolves `path` and returns its overlay index, reading the file from
    /// disk the first time it is touched.
    fn load(&mut self, path: &str) -> Result<(usize, PathBuf), PatchError> {
        let resolved = resolve_in_workspace(self.root, path)?;
        if let Some(i) = self.entries.iter().position(|e| e.path == resolved) {
            return Ok((i, resolved));
        }
        let mut entry = Entry {
            path: resolved.clone(),
            target: resolved.clone(),
            original: None,
            current: None,
            permissions: None,
        };
        match fs::symlink_metadata(&resolved) {
            // Absent; with NotADirectory a file sits where a parent
            // directory should be, which `check_parent` reports for an add.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(PatchError::io("inspect", &resolved, e)),
            Ok(link_meta) => {
                // Follows a symlink; `resolve_in_workspace` has checked
                // that its target is inside the workspace.
                let meta =
                    fs::metadata(&resolved).map_err(|e| PatchError::io("inspect", &resolved, e))?;
                if !meta.is_file() {
                    return Err(PatchError::NotAFile {
                        path: path.to_string(),
                    });
                }
                if link_meta.file_type().is_symlink() {
                    entry.target = resolved
                        .canonicalize()
                        .map_err(|e| PatchError::io("resolve", &resolved, e))?;
                }
                let bytes =
                    fs::read(&resolved).map_err(|e| PatchError::io("read", &resolved, e))?;
                entry.current = Some(bytes.clone());
                entry.permissions = Some(meta.permissions());
                entry.original = Some(Original {
                    bytes,
                    permissions: meta.permissions(),
                });
            }
        }
        self.entries.push(entry);
        Ok((self.entries.len() - 1, resolved))
    }

    /// `a/src/lib.rs`: the root-relative path git-style, for diff headers.
    fn label(&self, side: &str, resolved: &Path) -> String {
        let rel = resolved.strip_prefix(&self.canon_root).unwrap_or(resolved);
        format!("{side}/{}", rel.display())
    }
}

fn not_found(path: &str, action: &'static str) -> PatchError {
    PatchError::NotFound {
        path: path.to_string(),
        action,
    }
}

/// A file about to be created needs its nearest existing ancestor to be a
/// directory (missing ones are created); catching a file in the way here
/// keeps the failure out of the write phase.
fn check_parent(resolved: &Path, path: &str) -> Result<(), PatchError> {
    for ancestor in resolved.ancestors().skip(1) {
        match fs::metadata(ancestor) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(PatchError::ParentNotADirectory {
                    path: path.to_string(),
                    blocker: ancestor.display().to_string(),
                });
            }
            Err(_) => continue,
        }
    }
    Ok(())
}
