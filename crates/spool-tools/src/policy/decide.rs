//! The decision itself: a pure function of the settings, the request and the
//! grants, so it can be tested as a table and replayed on resume with the
//! same answer.

use std::path::{Path, PathBuf};

use super::grants::{Grants, RuleDecision, path_within};
use super::modes::{ApprovalPolicy, SandboxMode};
use crate::sandbox::SandboxPolicy;

/// A shell call as the kernel-sandbox rules see it.
struct ShellCall<'a> {
    argv: &'a [String],
    cwd_inside: bool,
    escalation_requested: bool,
    known_safe: bool,
}

/// Whether a command the policy lets run (or a person accepted) runs
/// outside the kernel sandbox: only when it was asked to leave it (an
/// escalation, a working directory outside the workspace, a re-run after
/// the sandbox denied it) and a person, now or through a grant, said yes.
/// Everything else runs inside.
pub fn leaves_sandbox(
    workspace_root: &Path,
    cwd: &Path,
    escalation_requested: bool,
    retry_after_denial: bool,
) -> bool {
    escalation_requested || retry_after_denial || !path_within(cwd, workspace_root)
}

/// A deny rule's refusal, else whether an allow rule or a session approval
/// grants the command.
fn rule_or_grant(argv: &[String], grants: &Grants) -> Result<bool, Verdict> {
    let rule = grants.exec_rule_for(argv);
    if let Some(rule) = rule
        && rule.decision == RuleDecision::Deny
    {
        return Err(refuse(format!(
            "{} is denied by the rule on commands starting with {}",
            display_command(argv),
            display_command(&rule.pattern)
        )));
    }
    Ok(rule.is_some() || grants.session.is_command_approved(argv))
}

fn decide_confined_shell(
    policy: ApprovalPolicy,
    sandbox: SandboxMode,
    call: &ShellCall<'_>,
    grants: &Grants,
) -> Verdict {
    let command = display_command(call.argv);
    let granted = match rule_or_grant(call.argv, grants) {
        Err(refusal) => return refusal,
        Ok(granted) => granted,
    };
    let leaving = if call.escalation_requested {
        Some(format!(
            "the model asked to run {command} outside the sandbox ({sandbox})"
        ))
    } else if !call.cwd_inside {
        Some(format!(
            "{command} would run in a folder outside the workspace, outside the sandbox ({sandbox})"
        ))
    } else {
        None
    };
    if let Some(why) = leaving {
        return match (granted, policy) {
            (true, _) => Verdict::Run,
            (false, ApprovalPolicy::Never) => refuse(format!(
                "{why}, and the approval policy is never: run it without asking to leave the \
                 sandbox, in the workspace, and it runs inside the sandbox"
            )),
            (false, _) => ask(why),
        };
    }
    match policy {
        ApprovalPolicy::Untrusted if !(call.known_safe || granted) => ask(format!(
            "{command} is not a known-safe command and the approval policy is untrusted"
        )),
        _ => Verdict::Run,
    }
}

/// A tool call, reduced to what the policy looks at.
#[derive(Debug, Clone, Copy)]
pub enum ToolRequest<'a> {
    Shell {
        argv: &'a [String],
        cwd: &'a Path,
        /// The model asked to run this outside the sandbox.
        escalation_requested: bool,
    },
    Patch {
        /// Every file the patch touches: absolute, already resolved.
        paths: &'a [PathBuf],
        /// Writable besides the workspace under `workspace-write` (the
        /// thread's extra roots, the temp dirs), as for commands.
        extra_roots: &'a [PathBuf],
    },
    Network {
        host: &'a str,
    },
}

/// What to do with the call. Reasons are written for the person asked (Ask)
/// or for the model told no (Refuse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Run,
    Ask { reason: String },
    Refuse { reason: String },
}

/// How the sandbox mode is made to hold for shell commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Enforcement {
    /// The kernel confines every command that runs inside the sandbox
    /// (Landlock, seccomp): commands run there unasked, and only leaving it
    /// needs a person.
    Kernel,
    /// No OS sandbox: a command counts as inside it only when it is known
    /// to be read-only (the operator's explicit fallback, and the default
    /// of a library agent that was given no sandbox helper).
    #[default]
    Classify,
}

/// Decides one call with the classification fallback; see [`decide_with`].
pub fn decide(
    policy: ApprovalPolicy,
    sandbox: SandboxMode,
    workspace_root: &Path,
    request: ToolRequest<'_>,
    grants: &Grants,
    is_known_safe: impl Fn(&[String]) -> bool,
) -> Verdict {
    decide_with(
        Enforcement::Classify,
        policy,
        sandbox,
        workspace_root,
        request,
        grants,
        is_known_safe,
    )
}

/// Decides one call. See the module docs for the tables.
///
/// `is_known_safe` classifies a command as read-only and harmless; it is
/// passed in because the list belongs to the shell tool.
pub fn decide_with(
    enforcement: Enforcement,
    policy: ApprovalPolicy,
    sandbox: SandboxMode,
    workspace_root: &Path,
    request: ToolRequest<'_>,
    grants: &Grants,
    is_known_safe: impl Fn(&[String]) -> bool,
) -> Verdict {
    match request {
        ToolRequest::Shell {
            argv,
            cwd,
            escalation_requested,
        } => {
            let shell = ShellCall {
                argv,
                cwd_inside: path_within(cwd, workspace_root),
                escalation_requested,
                // A command is known-safe only where it runs: in a folder
                // outside the workspace, even `git status` reads a config
                // nobody has looked at.
                known_safe: path_within(cwd, workspace_root) && is_known_safe(argv),
            };
            match (enforcement, sandbox) {
                (Enforcement::Kernel, SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite) => {
                    decide_confined_shell(policy, sandbox, &shell, grants)
                }
                _ => decide_shell(
                    policy,
                    sandbox,
                    argv,
                    escalation_requested,
                    grants,
                    shell.known_safe,
                ),
            }
        }
        ToolRequest::Patch { paths, extra_roots } => {
            let mut roots = vec![workspace_root.to_path_buf()];
            roots.extend(extra_roots.iter().cloned());
            decide_patch(policy, sandbox, &roots, paths, grants)
        }
        ToolRequest::Network { host } => decide_network(policy, sandbox, host, grants),
    }
}

fn decide_shell(
    policy: ApprovalPolicy,
    sandbox: SandboxMode,
    argv: &[String],
    escalation_requested: bool,
    grants: &Grants,
    known_safe: bool,
) -> Verdict {
    let command = display_command(argv);
    let granted = match rule_or_grant(argv, grants) {
        Err(refusal) => return refusal,
        Ok(granted) => granted,
    };
    // Without an OS sandbox only commands known to be read-only can be said
    // to stay inside one; anything else could write anywhere.
    let within = match sandbox {
        SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite => known_safe,
        SandboxMode::DangerFullAccess => true,
    };
    match policy {
        ApprovalPolicy::Never => {
            if within || granted {
                Verdict::Run
            } else {
                refuse(format!(
                    "{command} is outside the sandbox ({sandbox}) and the approval policy is never"
                ))
            }
        }
        ApprovalPolicy::Untrusted => {
            if known_safe || granted {
                Verdict::Run
            } else {
                ask(format!(
                    "{command} is not a known-safe command and the approval policy is untrusted"
                ))
            }
        }
        ApprovalPolicy::OnRequest | ApprovalPolicy::OnFailure => {
            // With full access there is no sandbox to leave, so an
            // escalation request changes nothing there.
            let escalating = escalation_requested && sandbox != SandboxMode::DangerFullAccess;
            if granted || (within && !escalating) {
                Verdict::Run
            } else if escalating {
                ask(format!(
                    "the model asked to run {command} outside the sandbox ({sandbox})"
                ))
            } else {
                ask(format!("{command} is outside the sandbox ({sandbox})"))
            }
        }
    }
}

fn decide_patch(
    policy: ApprovalPolicy,
    sandbox: SandboxMode,
    roots: &[PathBuf],
    paths: &[PathBuf],
    grants: &Grants,
) -> Verdict {
    let granted = grants.session.covers_paths(paths);
    let workspace_root = &roots[0];
    // The same write rules the kernel applies to commands: beneath a
    // writable root once symlinks are resolved, never into `.git` or a
    // root's spool.toml. Roots that do not exist hold nothing to write.
    let existing = roots.iter().filter(|r| r.is_dir()).cloned();
    let sandbox_policy = SandboxPolicy::writable_roots(existing, false).ok();
    let outside: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| {
            let Some(root) = roots.iter().find(|root| path_within(p, root)) else {
                return true;
            };
            is_protected(p, root)
                // Resolved: a symlink inside the workspace may lead out.
                || (root.is_dir()
                    && sandbox_policy
                        .as_ref()
                        .is_some_and(|policy| !policy.allows_write(p)))
        })
        .collect();
    let within = match sandbox {
        SandboxMode::ReadOnly => false,
        SandboxMode::WorkspaceWrite => outside.is_empty(),
        SandboxMode::DangerFullAccess => true,
    };
    let what = match sandbox {
        SandboxMode::ReadOnly => "the sandbox is read-only".to_owned(),
        _ => format!(
            "{} outside the workspace {} or in a protected place (.git, spool.toml)",
            display_paths(&outside),
            workspace_root.display()
        ),
    };
    match policy {
        ApprovalPolicy::Never => {
            if within || granted {
                Verdict::Run
            } else {
                refuse(format!(
                    "this patch is outside the sandbox ({what}) and the approval policy is never"
                ))
            }
        }
        ApprovalPolicy::Untrusted => {
            if granted {
                Verdict::Run
            } else {
                ask(format!(
                    "the approval policy is untrusted, so every patch needs approval: {}",
                    display_paths(&paths.iter().collect::<Vec<_>>())
                ))
            }
        }
        ApprovalPolicy::OnRequest | ApprovalPolicy::OnFailure => {
            if within || granted {
                Verdict::Run
            } else {
                ask(format!("this patch is outside the sandbox ({what})"))
            }
        }
    }
}

fn decide_network(
    policy: ApprovalPolicy,
    sandbox: SandboxMode,
    host: &str,
    grants: &Grants,
) -> Verdict {
    match grants.network_rule_for(host).map(|r| r.decision) {
        Some(RuleDecision::Deny) => {
            return refuse(format!("network access to {host} is denied by a rule"));
        }
        Some(RuleDecision::Allow) => return Verdict::Run,
        None => {}
    }
    if grants.session.is_host_approved(host) || sandbox == SandboxMode::DangerFullAccess {
        return Verdict::Run;
    }
    match policy {
        ApprovalPolicy::Never => refuse(format!(
            "network access to {host} is outside the sandbox ({sandbox}) and the approval policy is never"
        )),
        _ => ask(format!("network access to {host} needs approval")),
    }
}

/// A path in `.git` (at any depth) or a protected name at the root's top,
/// judged on the words of the path alone.
fn is_protected(path: &Path, root: &Path) -> bool {
    let Ok(rest) = path.strip_prefix(root) else {
        return false;
    };
    let first_protected = rest.components().next().is_some_and(|c| {
        crate::sandbox::PROTECTED_NAMES
            .iter()
            .any(|name| c.as_os_str() == *name)
    });
    first_protected || rest.components().any(|c| c.as_os_str() == ".git")
}

fn ask(reason: String) -> Verdict {
    Verdict::Ask { reason }
}

fn refuse(reason: String) -> Verdict {
    Verdict::Refuse { reason }
}

/// The command as a person would type it, quoted where needed so the reason
/// shows word boundaries, and bounded (reasons end up in UIs and prompts).
fn display_command(argv: &[String]) -> String {
    let mut text = format!("`{}`", crate::shell::format_command(argv));
    if text.chars().count() > 200 {
        text = format!("{}…`", text.chars().take(199).collect::<String>());
    }
    text
}

fn display_paths(paths: &[&PathBuf]) -> String {
    const SHOWN: usize = 3;
    let mut text = paths
        .iter()
        .take(SHOWN)
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        text.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    text
}
