//! Keeping a patch inside its workspace. A model may write any path; the
//! sandbox promise ("workspace-write") only holds if every path is checked
//! both lexically (`..`, absolute paths) and against symlinks on disk.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::PatchError;

/// Resolves a path from a patch to an absolute path under `root`, or
/// refuses it with [`PatchError::OutsideWorkspace`].
///
/// - A relative path is joined to the root; `.` is dropped and `..` is
///   resolved lexically, refused if it would climb above the root.
/// - An absolute path is accepted only if it lies under the root (as given
///   or canonicalized).
/// - The nearest part of the result that exists on disk (the file itself or
///   its closest existing ancestor) is canonicalized and must still be under
///   the canonical root, so a symlink pointing outside is refused, as is a
///   dangling symlink whose target cannot be checked.
///
/// The result is built on the canonical root and contains no `.`/`..`.
/// The check is made when called: a symlink swapped in afterwards by
/// another process is not detected.
pub fn resolve_in_workspace(root: &Path, path: &str) -> Result<PathBuf, PatchError> {
    let outside = || PatchError::OutsideWorkspace {
        path: path.to_string(),
    };
    if path.trim().is_empty() || path.contains('\0') {
        return Err(PatchError::InvalidPath {
            path: path.to_string(),
            reason: "it is empty or contains a NUL byte",
        });
    }
    let canon_root = root
        .canonicalize()
        .map_err(|e| PatchError::io("resolve the workspace root", root, e))?;

    let given = Path::new(path);
    let relative = if given.is_absolute() {
        let given = normalize_absolute(given).ok_or_else(outside)?;
        let root_abs = std::path::absolute(root)
            .ok()
            .and_then(|r| normalize_absolute(&r));
        let under_given_root =
            root_abs.and_then(|r| given.strip_prefix(r).ok().map(Path::to_path_buf));
        match under_given_root
            .or_else(|| given.strip_prefix(&canon_root).ok().map(Path::to_path_buf))
        {
            Some(rest) => rest,
            None => return Err(outside()),
        }
    } else {
        given.to_path_buf()
    };

    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in relative.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop().ok_or_else(outside)?;
            }
            Component::Normal(p) => parts.push(p),
            Component::RootDir | Component::Prefix(_) => return Err(outside()),
        }
    }
    if parts.is_empty() {
        return Err(PatchError::InvalidPath {
            path: path.to_string(),
            reason: "it names the workspace root itself, not a file",
        });
    }
    let resolved: PathBuf = parts.iter().fold(canon_root.clone(), |p, c| p.join(c));

    for candidate in resolved.ancestors() {
        if candidate == canon_root {
            break;
        }
        match candidate.symlink_metadata() {
            Ok(_) => {
                // Canonicalizing the nearest existing entry resolves every
                // symlink on the way to it, including the entry itself.
                let real = candidate.canonicalize().map_err(|_| outside())?;
                if !real.starts_with(&canon_root) {
                    return Err(outside());
                }
                break;
            }
            // Not there (yet): a path that will be created. Look higher.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::NotADirectory => {}
            Err(e) => return Err(PatchError::io("inspect", candidate, e)),
        }
    }
    Ok(resolved)
}

/// Removes `.` and resolves `..` in an absolute path without touching the
/// disk; `None` if `..` would climb above `/`.
fn normalize_absolute(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_resolution() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ok = |p: &str| resolve_in_workspace(&root, p).unwrap();
        assert_eq!(ok("a/b.txt"), root.join("a/b.txt"));
        assert_eq!(ok("./a/../b.txt"), root.join("b.txt"));
        assert_eq!(ok(root.join("x/y").to_str().unwrap()), root.join("x/y"));
        assert_eq!(ok(root.join("x/../y").to_str().unwrap()), root.join("y"));

        for bad in ["../x", "a/../../x", "/etc/passwd", "/"] {
            let e = resolve_in_workspace(&root, bad).unwrap_err();
            assert!(
                matches!(&e, PatchError::OutsideWorkspace { path } if path == bad),
                "{bad}: {e}"
            );
        }
        let outside_via_dots = format!("{}/../escape", root.display());
        assert!(matches!(
            resolve_in_workspace(&root, &outside_via_dots),
            Err(PatchError::OutsideWorkspace { .. })
        ));
        assert!(matches!(
            resolve_in_workspace(&root, "."),
            Err(PatchError::InvalidPath { .. })
        ));
        assert!(matches!(
            resolve_in_workspace(&root, ""),
            Err(PatchError::InvalidPath { .. })
        ));
    }

    #[test]
    fn normalize_absolute_refuses_climbing_above_root() {
        assert_eq!(
            normalize_absolute(Path::new("/a/./b/../c")),
            Some(PathBuf::from("/a/c"))
        );
        assert_eq!(normalize_absolute(Path::new("/..")), None);
        assert_eq!(normalize_absolute(Path::new("/a/../..")), None);
    }
}
