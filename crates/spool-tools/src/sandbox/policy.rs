//! What one sandboxed command may write, and whether it may use the
//! network: the resolved form of a thread's sandbox mode and settings.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Names that stay read-only at the top of every writable root: `.git`
/// (its config and hooks name programs git runs, so writing them is
/// running code later), and spool's own project config, which names the
/// model server spool sends its API key to.
pub const PROTECTED_NAMES: [&str; 2] = [".git", "spool.toml"];

/// A confined command's limits. `writable` empty means read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Absolute, symlink-free directories the command may write beneath.
    pub writable: Vec<PathBuf>,
    /// Existing paths beneath a writable root that stay read-only.
    pub protected: Vec<PathBuf>,
    /// Whether the command may open network sockets.
    pub network: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxPolicyError {
    #[error("the writable root {path} cannot be used: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the writable root {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("the path {0} is not valid UTF-8, which the sandbox helper's arguments need")]
    NotUtf8(PathBuf),
}

impl SandboxPolicy {
    /// Reads everything, writes nothing.
    pub fn read_only(network: bool) -> SandboxPolicy {
        SandboxPolicy {
            writable: Vec::new(),
            protected: Vec::new(),
            network,
        }
    }

    /// Writes beneath `roots` (the workspace first, then the extra roots
    /// and temp dirs the thread allows), each resolved to its real path so
    /// the kernel rule and the checks spool makes itself name the same
    /// directory. Roots that do not exist are an error: a rule on a
    /// missing path would silently allow nothing.
    pub fn writable_roots(
        roots: impl IntoIterator<Item = PathBuf>,
        network: bool,
    ) -> Result<SandboxPolicy, SandboxPolicyError> {
        let mut writable: Vec<PathBuf> = Vec::new();
        for root in roots {
            let real = std::fs::canonicalize(&root).map_err(|source| SandboxPolicyError::Root {
                path: root.clone(),
                source,
            })?;
            if !real.is_dir() {
                return Err(SandboxPolicyError::NotADirectory(root));
            }
            if real.to_str().is_none() {
                return Err(SandboxPolicyError::NotUtf8(real));
            }
            if !writable.contains(&real) {
                writable.push(real);
            }
        }
        let mut protected = Vec::new();
        for root in &writable {
            for name in PROTECTED_NAMES {
                let path = root.join(name);
                if path.symlink_metadata().is_ok() && !protected.contains(&path) {
                    protected.push(path);
                }
            }
        }
        Ok(SandboxPolicy {
            writable,
            protected,
            network,
        })
    }

    /// The helper's arguments that describe this policy (before `--`).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for root in &self.writable {
            args.push("--writable".to_owned());
            args.push(root.to_string_lossy().into_owned());
        }
        for path in &self.protected {
            args.push("--protect".to_owned());
            args.push(path.to_string_lossy().into_owned());
        }
        if self.network {
            args.push("--network".to_owned());
        }
        args
    }

    /// Whether the sandbox lets a file at `path` be written: beneath a
    /// writable root once symlinks are resolved, and not in a protected
    /// place (a `.git` folder at any depth, or a protected name at a
    /// root's top). `apply_patch` writes in-process, so it asks this
    /// instead of the kernel.
    pub fn allows_write(&self, path: &Path) -> bool {
        let Some(real) = resolve_existing_prefix(path) else {
            return false;
        };
        let Some(root) = self.writable.iter().find(|root| real.starts_with(root)) else {
            return false;
        };
        let rest = real.strip_prefix(root).unwrap_or(&real);
        let mut components = rest.components();
        if let Some(Component::Normal(first)) = components.clone().next()
            && PROTECTED_NAMES.iter().any(|name| first == *name)
        {
            return false;
        }
        !components.any(|c| c == Component::Normal(".git".as_ref()))
    }
}

/// `path` with its longest existing prefix resolved to its real path and
/// the rest (not yet created) appended; `None` for a relative path or one
/// with `..` in the part that does not exist yet.
fn resolve_existing_prefix(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut existing = path.to_path_buf();
    let mut missing = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(real) => {
                let mut out = real;
                for part in missing.iter().rev() {
                    out.push(part);
                }
                return Some(out);
            }
            Err(_) => {
                let name = existing.file_name()?.to_owned();
                if name == ".." {
                    return None;
                }
                missing.push(name);
                if !existing.pop() {
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_allowed_beneath_roots_but_not_into_protected_places() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("src/vendor/.git")).unwrap();
        std::fs::write(ws.join("spool.toml"), "").unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();
        let policy = SandboxPolicy::writable_roots([ws.clone()], false).unwrap();
        let real_ws = std::fs::canonicalize(&ws).unwrap();
        assert_eq!(
            policy.protected,
            vec![real_ws.join(".git"), real_ws.join("spool.toml")]
        );

        assert!(policy.allows_write(&ws.join("notes.txt")));
        assert!(policy.allows_write(&ws.join("new/dir/file.rs")));
        assert!(!policy.allows_write(&ws.join(".git/config")));
        assert!(!policy.allows_write(&ws.join(".git/hooks/pre-commit")));
        assert!(!policy.allows_write(&ws.join("src/vendor/.git/config")));
        assert!(!policy.allows_write(&ws.join("spool.toml")));
        assert!(policy.allows_write(&ws.join("src/spool.toml")));
        // Through a symlink that leads out of the workspace.
        assert!(!policy.allows_write(&ws.join("out/file")));
        assert!(!policy.allows_write(&outside.join("file")));
        assert!(!policy.allows_write(&ws.join("missing/../../outside/file")));
        assert!(!policy.allows_write(Path::new("relative/file")));
        assert!(!SandboxPolicy::read_only(false).allows_write(&ws.join("notes.txt")));
    }

    #[test]
    fn a_missing_root_is_an_error_not_a_rule_that_allows_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let error = SandboxPolicy::writable_roots([dir.path().join("nope")], false).unwrap_err();
        assert!(error.to_string().contains("nope"), "{error}");
    }

    #[test]
    fn the_helper_arguments_name_every_root_and_protected_path() {
        let policy = SandboxPolicy {
            writable: vec!["/ws".into(), "/tmp".into()],
            protected: vec!["/ws/.git".into()],
            network: true,
        };
        assert_eq!(
            policy.to_args(),
            [
                "--writable",
                "/ws",
                "--writable",
                "/tmp",
                "--protect",
                "/ws/.git",
                "--network"
            ]
        );
    }
}
