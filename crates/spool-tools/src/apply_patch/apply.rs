//! Writing a plan to disk, all or nothing.
//!
//! Each file is written to a temporary file in its own directory and
//! renamed over the target, so a reader never sees a half-written file.
//! Deletions come last and are renames to a hidden backup name, removed
//! only once everything succeeded. Every step records how to undo it; on an
//! I/O error the steps already taken are undone in reverse order, which
//! restores overwritten files (contents and permissions, kept in memory),
//! removes created files and directories, and renames deleted files back.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::PatchError;
use super::plan::FileWrite;

enum Undo {
    RemoveDir(PathBuf),
    RemoveFile(PathBuf),
    Restore {
        path: PathBuf,
        bytes: Vec<u8>,
        permissions: Permissions,
    },
    RenameBack {
        backup: PathBuf,
        path: PathBuf,
    },
}

pub(crate) fn write_all(writes: &[FileWrite]) -> Result<(), PatchError> {
    let mut undo = Vec::new();
    match run(writes, &mut undo) {
        Ok(()) => {
            // The patch is applied; a backup that cannot be removed is only
            // a stray hidden file, not a reason to undo the patch.
            for step in undo {
                if let Undo::RenameBack { backup, .. } = step {
                    let _ = fs::remove_file(backup);
                }
            }
            Ok(())
        }
        Err(error) => {
            let failed = rollback(undo);
            if failed.is_empty() {
                Err(error)
            } else {
                Err(PatchError::RollbackFailed {
                    error: Box::new(error),
                    failed,
                })
            }
        }
    }
}

fn run(writes: &[FileWrite], undo: &mut Vec<Undo>) -> Result<(), PatchError> {
    for w in writes {
        let Some(contents) = &w.contents else {
            continue;
        };
        if w.original.is_none()
            && let Some(parent) = w.target.parent()
        {
            create_dirs(parent, undo)?;
        }
        replace_file(&w.target, contents, w.permissions.as_ref())?;
        undo.push(match &w.original {
            Some(original) => Undo::Restore {
                path: w.target.clone(),
                bytes: original.bytes.clone(),
                permissions: original.permissions.clone(),
            },
            None => Undo::RemoveFile(w.target.clone()),
        });
    }
    for w in writes.iter().filter(|w| w.contents.is_none()) {
        let backup = sibling(&w.path, "bak");
        fs::rename(&w.path, &backup).map_err(|e| PatchError::io("delete", &w.path, e))?;
        undo.push(Undo::RenameBack {
            backup,
            path: w.path.clone(),
        });
    }
    Ok(())
}

/// Undoes `steps` newest first and returns a description of each step that
/// could not be undone (empty when the disk is back as it was).
fn rollback(steps: Vec<Undo>) -> Vec<String> {
    let mut failed = Vec::new();
    for step in steps.into_iter().rev() {
        let (path, result) = match step {
            Undo::RemoveDir(path) => {
                let r = fs::remove_dir(&path);
                (path, r)
            }
            Undo::RemoveFile(path) => {
                let r = fs::remove_file(&path);
                (path, r)
            }
            Undo::Restore {
                path,
                bytes,
                permissions,
            } => {
                let r = replace_file(&path, &bytes, Some(&permissions)).map_err(|e| match e {
                    PatchError::Io { source, .. } => source,
                    other => io::Error::other(other.to_string()),
                });
                (path, r)
            }
            Undo::RenameBack { backup, path } => {
                let r = fs::rename(&backup, &path);
                (path, r)
            }
        };
        if let Err(e) = result {
            failed.push(format!("'{}' ({e})", path.display()));
        }
    }
    failed
}

/// Creates `dir` and its missing ancestors, recording each one created so
/// a rollback removes exactly those.
fn create_dirs(dir: &Path, undo: &mut Vec<Undo>) -> Result<(), PatchError> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    for d in missing.into_iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => undo.push(Undo::RemoveDir(d.to_path_buf())),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(PatchError::io("create directory", d, e)),
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
fn replace_file(
    path: &Path,
    bytes: &[u8],
    permissions: Option<&Permissions>,
) -> Result<(), PatchError> {
    let tmp = sibling(path, "tmp");
    let result = write_new(&tmp, bytes, permissions)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| PatchError::io("write", path, e));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_new(path: &Path, bytes: &[u8], permissions: Option<&Permissions>) -> io::Result<()> {
    let mut file: File = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    if let Some(p) = permissions {
        file.set_permissions(p.clone())?;
    }
    // Durable before it replaces the original: a crash right after the
    // rename must not leave an empty file behind.
    file.sync_all()
}

/// A hidden, unused name next to `path`: `.name.spool-<pid>-<n>.<ext>`.
/// Same directory so the rename stays on one filesystem (and is atomic).
fn sibling(path: &Path, ext: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let candidate =
            path.with_file_name(format!(".{name}.spool-{}-{n}.{ext}", std::process::id()));
        if candidate.symlink_metadata().is_err() {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::Original;
    use super::*;

    fn original(path: &Path) -> Option<Original> {
        Some(Original {
            bytes: fs::read(path).unwrap(),
            permissions: fs::metadata(path).unwrap().permissions(),
        })
    }

    fn write(path: &Path, contents: Option<&str>) -> FileWrite {
        FileWrite {
            path: path.to_path_buf(),
            target: path.to_path_buf(),
            original: path.exists().then(|| original(path)).flatten(),
            contents: contents.map(|c| c.as_bytes().to_vec()),
            permissions: None,
        }
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn an_io_error_midway_rolls_back_writes_and_created_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        fs::write(&a, "old a\n").unwrap();
        let blocker = dir.path().join("blocker");
        fs::write(&blocker, "a file, not a dir\n").unwrap();
        let writes = [
            write(&a, Some("new a\n")),
            write(&dir.path().join("new/dir/b.txt"), Some("b\n")),
            // Fails: `blocker` is a file, so no directory can go under it.
            write(&blocker.join("c.txt"), Some("c\n")),
        ];
        let err = write_all(&writes).unwrap_err();
        assert!(matches!(err, PatchError::Io { .. }), "{err}");
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a\n");
        assert_eq!(listing(dir.path()), ["a.txt", "blocker"]);
    }

    #[test]
    fn a_failed_delete_restores_earlier_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        fs::write(&a, "a\n").unwrap();
        let b = dir.path().join("b.txt");
        fs::write(&b, "b\n").unwrap();
        let writes = [
            write(&b, Some("b2\n")),
            write(&a, None),
            // Not there: the rename fails.
            write(&dir.path().join("missing.txt"), None),
        ];
        write_all(&writes).unwrap_err();
        assert_eq!(fs::read_to_string(&a).unwrap(), "a\n");
        assert_eq!(fs::read_to_string(&b).unwrap(), "b\n");
        assert_eq!(listing(dir.path()), ["a.txt", "b.txt"]);
    }

    #[test]
    fn success_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        fs::write(&a, "a\n").unwrap();
        let writes = [
            write(&a, None),
            write(&dir.path().join("b.txt"), Some("b\n")),
        ];
        write_all(&writes).unwrap();
        assert_eq!(listing(dir.path()), ["b.txt"]);
    }
}
