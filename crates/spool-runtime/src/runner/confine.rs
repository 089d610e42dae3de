//! The command a shell call really runs: inside the kernel sandbox or not,
//! without the server's secrets, and with git's program-running settings
//! turned off.

use std::path::PathBuf;

use spool_tools::policy::{ApprovalPolicy, SandboxMode};
use spool_tools::sandbox::{self, SandboxPolicy};
use spool_tools::shell::{self, ShellCommand, ShellOutcome};

use super::requests::hosts_in;
use crate::agent::{Agent, Confinement};

/// A command ready to start, and whether the sandbox confines it.
pub(crate) struct Prepared {
    pub command: ShellCommand,
    pub sandboxed: bool,
}

/// What a confined command's failure means.
pub(crate) enum SandboxVerdict {
    /// Not confined, not failed, or not a refusal of the sandbox.
    Plain,
    /// The helper could not confine itself; the command never ran.
    SetupFailed(String),
    /// The kernel refused the command something (a write outside the
    /// writable roots, the network): `note` says so for the model.
    Denied { note: String },
}

/// `command` as spool starts it for `agent`; `outside` when a person (or a
/// grant) let it leave the sandbox.
pub(crate) fn prepare(
    agent: &Agent,
    command: &ShellCommand,
    outside: bool,
) -> Result<Prepared, String> {
    let mut out = command.clone();
    out.argv = shell::neutralize_git(&command.argv);
    out.env.extend(
        shell::GIT_ENV
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    out.env_remove = shell::names_to_remove(
        names.iter().map(String::as_str),
        &agent.env_secrets,
        &agent.env_pass_through,
    );
    let Confinement::Kernel(launcher) = &agent.confinement else {
        return Ok(Prepared {
            command: out,
            sandboxed: false,
        });
    };
    if outside || agent.sandbox == SandboxMode::DangerFullAccess {
        // Unconfined, but still under the helper: it dies with the server.
        out.argv = launcher.wrap_unconfined(&out.argv);
        return Ok(Prepared {
            command: out,
            sandboxed: false,
        });
    }
    let policy = policy_for(agent, command).map_err(|e| e.to_string())?;
    out.argv = launcher.wrap(&policy, &out.argv);
    Ok(Prepared {
        command: out,
        sandboxed: true,
    })
}

/// The sandbox of one command: the agent's mode and the thread's options,
/// with the network allowed when the thread allows it or the command names
/// hosts that the network rules (or a person) already let through.
pub(crate) fn policy_for(
    agent: &Agent,
    command: &ShellCommand,
) -> Result<SandboxPolicy, sandbox::SandboxPolicyError> {
    let network = agent.sandbox_options.network || !hosts_in(&command.argv).is_empty();
    match agent.sandbox {
        SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => {
            Ok(SandboxPolicy::read_only(network))
        }
        SandboxMode::WorkspaceWrite => {
            SandboxPolicy::writable_roots(writable_roots(agent), network)
        }
    }
}

/// Where `workspace-write` lets an agent's commands and patches write: the
/// workspace, the thread's extra roots, and the temp dirs unless the
/// thread left them out (they are writable by default, as in Codex:
/// compilers and test runners need them, and they hold nothing of the
/// user's). Folders that do not exist are skipped.
pub(crate) fn writable_roots(agent: &Agent) -> Vec<PathBuf> {
    let mut roots = vec![agent.workspace_root.clone()];
    roots.extend(extra_writable_roots(agent));
    roots.retain(|r| r.is_dir());
    roots
}

/// [`writable_roots`] besides the workspace, whether they exist or not.
pub(crate) fn extra_writable_roots(agent: &Agent) -> Vec<PathBuf> {
    let options = &agent.sandbox_options;
    let mut roots = options.writable_roots.clone();
    if !options.exclude_slash_tmp {
        roots.push(PathBuf::from("/tmp"));
    }
    if !options.exclude_tmpdir_env_var
        && let Some(tmp) = std::env::var_os("TMPDIR")
    {
        roots.push(PathBuf::from(tmp));
    }
    roots
}

/// Reads a confined command's outcome.
pub(crate) fn judge(agent: &Agent, ran: &ShellOutcome, sandboxed: bool) -> SandboxVerdict {
    if !sandboxed || ran.success() {
        return SandboxVerdict::Plain;
    }
    let output = &ran.aggregated_output;
    if ran.exit_code == Some(i32::from(sandbox::SETUP_FAILED_CODE))
        && let Some(line) = output
            .lines()
            .find(|l| l.starts_with(sandbox::SETUP_FAILED))
    {
        return SandboxVerdict::SetupFailed(line.to_owned());
    }
    if !sandbox::looks_denied(output) {
        return SandboxVerdict::Plain;
    }
    let limits = match agent.sandbox {
        SandboxMode::WorkspaceWrite => format!(
            "it may write only inside {}, never into .git or spool.toml",
            writable_roots(agent)
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "it may not write anywhere".to_owned(),
    };
    let network = if agent.sandbox_options.network {
        ""
    } else {
        "; the network is off"
    };
    let next = match agent.approval_policy {
        ApprovalPolicy::OnRequest => {
            "; to run it outside the sandbox, call the tool again with \
             sandbox_permissions \"require_escalated\" and a justification, and a person is asked"
        }
        ApprovalPolicy::Never => {
            "; the approval policy is never, so nothing runs outside it: find a way within it"
        }
        ApprovalPolicy::Untrusted | ApprovalPolicy::OnFailure => "",
    };
    SandboxVerdict::Denied {
        note: format!(
            "[the sandbox ({}) denied this command: {limits}{network}{next}]",
            agent.sandbox
        ),
    }
}

/// Whether a denial is asked about (a re-run outside the sandbox) rather
/// than reported to the model: under the policies that ask on failure.
pub(crate) fn asks_after_denial(policy: ApprovalPolicy) -> bool {
    matches!(
        policy,
        ApprovalPolicy::Untrusted | ApprovalPolicy::OnFailure
    )
}
