//! How to start the sandbox helper: a program and the arguments that come
//! before the policy (for spool, its own binary and `sandbox-exec`).

use std::path::PathBuf;

use super::SandboxPolicy;

/// The helper that confines itself and then runs the command. It must
/// accept `[PREFIX…] POLICY-ARGS -- ARGV…` where POLICY-ARGS are
/// [`SandboxPolicy::to_args`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    pub program: PathBuf,
    pub prefix: Vec<String>,
}

impl Launcher {
    /// `program sandbox-exec …`: a binary that serves spool's
    /// `sandbox-exec` subcommand (the `spool` binary itself).
    pub fn spool(program: impl Into<PathBuf>) -> Launcher {
        Launcher {
            program: program.into(),
            prefix: vec!["sandbox-exec".to_owned()],
        }
    }

    /// The argv that runs `argv` outside the sandbox, still under the
    /// helper, so it dies with the process that started it.
    pub fn wrap_unconfined(&self, argv: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(argv.len() + self.prefix.len() + 3);
        out.push(self.program.to_string_lossy().into_owned());
        out.extend(self.prefix.iter().cloned());
        out.push("--unconfined".to_owned());
        out.push("--".to_owned());
        out.extend(argv.iter().cloned());
        out
    }

    /// The argv that runs `argv` under `policy`.
    pub fn wrap(&self, policy: &SandboxPolicy, argv: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(argv.len() + self.prefix.len() + 8);
        out.push(self.program.to_string_lossy().into_owned());
        out.extend(self.prefix.iter().cloned());
        out.extend(policy.to_args());
        out.push("--".to_owned());
        out.extend(argv.iter().cloned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_follows_the_policy_after_a_double_dash() {
        let launcher = Launcher::spool("/usr/bin/spool");
        let argv = launcher.wrap(
            &SandboxPolicy::read_only(false),
            &["sh".to_owned(), "-c".to_owned(), "--writable x".to_owned()],
        );
        assert_eq!(
            argv,
            [
                "/usr/bin/spool",
                "sandbox-exec",
                "--",
                "sh",
                "-c",
                "--writable x"
            ]
        );
    }
}
