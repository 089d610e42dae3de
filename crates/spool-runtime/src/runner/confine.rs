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

/// The sandbox of one command: the agent's mode, with the network allowed
/// when the thread allows it or the command names hosts that the network
/// rules (or a person) already let through.
pub(crate) fn policy_for(
    agent: &Agent,
    command: &ShellCommand,
) -> Result<SandboxPolicy, sandbox::SandboxPolicyError> {
    let network = agent.sandbox_network || !hosts_in(&command.argv).is_empty();
    match agent.sandbox {
        SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => {
            Ok(SandboxPolicy::read_only(network))
        }
        SandboxMode::WorkspaceWrite => {
            let mut roots = vec![agent.workspace_root.clone()];
            // Temp dirs are writable, as in Codex: compilers and test
            // runners need them, and they hold nothing of the user's.
            roots.push(PathBuf::from("/tmp"));
            if let Some(tmp) = std::env::var_os("TMPDIR") {
                roots.push(PathBuf::from(tmp));
            }
            let roots = roots.into_iter().filter(|r| r.is_dir());
            SandboxPolicy::writable_roots(roots, network)
        }
    }
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
            "it may write only inside the workspace {} and the temp dir, never into .git or \
             spool.toml",
            agent.workspace_root.display()
        ),
        _ => "it may not write anywhere".to_owned(),
    };
    let network = if agent.sandbox_network {
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
