//! The command sandbox: what a command the model runs may touch, enforced
//! by the kernel.
//!
//! A sandboxed command is not started directly. spool starts a helper —
//! its own binary again, `spool sandbox-exec POLICY -- ARGV` (see
//! [`Launcher`]) — which, while it is still a single-threaded fresh
//! process, confines itself and then `exec`s the command, so the command
//! and everything it starts inherit the confinement and cannot undo it:
//!
//! - **File system (Landlock).** Everything may be read and executed;
//!   writing is allowed only beneath the writable roots (none under
//!   `read-only`), plus `/dev/null` and the like.
//! - **Protected paths (a private mount namespace).** Landlock can only
//!   add permissions beneath a root, never take them away for a subfolder,
//!   so `.git` (whose config and hooks name programs that git runs) and a
//!   project's `spool.toml` inside a writable root are bind-mounted
//!   read-only over themselves in a mount namespace of the command's own.
//!   An unprivileged user gets that namespace through a user namespace that
//!   maps its own uid and gid (it stays who it is).
//! - **Network (seccomp and Landlock).** Unless the policy allows the
//!   network, `socket(2)` for any family but `AF_UNIX` fails with `EPERM`,
//!   `io_uring` (which could open sockets without `socket(2)`) is refused,
//!   and where the kernel's Landlock has network rules, TCP `bind` and
//!   `connect` are denied too.
//! - **Scopes (Landlock ABI 6).** Where available, the command cannot signal
//!   processes outside its sandbox (spool itself, say) or connect to their
//!   abstract Unix sockets.
//!
//! `danger-full-access` has no sandbox. What is *not* covered is listed in
//! `docs/internals/sandbox.md`.

#[cfg(target_os = "linux")]
mod enter;
mod launcher;
mod policy;

#[cfg(target_os = "linux")]
pub use enter::{EnterError, enter, probe};
pub use launcher::Launcher;
pub use policy::{PROTECTED_NAMES, SandboxPolicy, SandboxPolicyError};

/// How the helper's own failure to confine itself starts its message on
/// stderr, so that a command that never ran is not mistaken for one the
/// sandbox denied something.
pub const SETUP_FAILED: &str = "spool sandbox: cannot confine the command";

/// The helper's exit code when it could not confine itself (the command
/// did not run).
pub const SETUP_FAILED_CODE: u8 = 125;

/// Why the sandbox cannot run on this machine (from [`probe`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// The operator's answer to "the kernel cannot sandbox commands".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Refuse to start (the default): a sandbox mode that cannot be
    /// enforced is an error, never a silent downgrade.
    #[default]
    Refuse,
    /// Judge commands by classifying them, as spool did before it had a
    /// sandbox: only known read-only commands run unasked.
    Classify,
}

/// Whether a substring of a failed sandboxed command's output says the
/// kernel refused it something. Landlock refusals are `EACCES`, the
/// read-only mounts `EROFS`, the syscall filter `EPERM`; a tool prints
/// them in its own words, so this is a heuristic (as in Codex): a command
/// that fails for another reason and prints one of them is also reported
/// as a denial, which at worst offers a re-run outside the sandbox.
pub fn looks_denied(output: &str) -> bool {
    const MARKERS: [&str; 6] = [
        "permission denied",
        "operation not permitted",
        "read-only file system",
        "eacces",
        "eperm",
        "erofs",
    ];
    let lower = output.to_ascii_lowercase();
    MARKERS.iter().any(|marker| lower.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_recognised_in_the_words_tools_use() {
        assert!(looks_denied(
            "sh: 1: cannot create /etc/x: Permission denied"
        ));
        assert!(looks_denied(
            "touch: cannot touch '.git/config': Read-only file system"
        ));
        assert!(looks_denied(
            "PermissionError: [Errno 1] Operation not permitted"
        ));
        assert!(!looks_denied("error: test failed, to rerun pass `--lib`"));
    }
}
