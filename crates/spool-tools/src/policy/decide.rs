//! The decision itself: a pure function of the settings, the request and the
//! grants, so it can be tested as a table and replayed on resume with the
//! same answer.

use std::path::{Path, PathBuf};

use super::grants::{Grants, RuleDecision, path_within};
use super::modes::{ApprovalPolicy, SandboxMode};

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

/// Decides one call. See the module docs for the table.
///
/// `is_known_safe` classifies a command as read-only and harmless; it is
/// passed in because the list belongs to the shell tool.
pub fn decide(
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
            cwd: _,
            escalation_requested,
        } => decide_shell(
            policy,
            sandbox,
            argv,
            escalation_requested,
            grants,
            is_known_safe(argv),
        ),
        ToolRequest::Patch { paths } => {
            decide_patch(policy, sandbox, workspace_root, paths, grants)
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
    let rule = grants.exec_rule_for(argv);
    if let Some(rule) = rule
        && rule.decision == RuleDecision::Deny
    {
        return refuse(format!(
            "{command} is denied by the rule on commands starting with {}",
            display_command(&rule.pattern)
        ));
    }
    let granted = rule.is_some() || grants.session.is_command_approved(argv);
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
    workspace_root: &Path,
    paths: &[PathBuf],
    grants: &Grants,
) -> Verdict {
    let granted = grants.session.covers_paths(paths);
    let outside: Vec<&PathBuf> = paths
        .iter()
        .filter(|p| !path_within(p, workspace_root))
        .collect();
    let within = match sandbox {
        SandboxMode::ReadOnly => false,
        SandboxMode::WorkspaceWrite => outside.is_empty(),
        SandboxMode::DangerFullAccess => true,
    };
    let what = match sandbox {
        SandboxMode::ReadOnly => "the sandbox is read-only".to_owned(),
        _ => format!(
            "{} outside the workspace {}",
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

fn ask(reason: String) -> Verdict {
    Verdict::Ask { reason }
}

fn refuse(reason: String) -> Verdict {
    Verdict::Refuse { reason }
}

/// The command as a person would type it, quoted where needed so the reason
/// shows word boundaries, and bounded (reasons end up in UIs and prompts).
fn display_command(argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
    let mut text = format!("`{}`", words.join(" "));
    if text.chars().count() > 200 {
        text = format!("{}…`", text.chars().take(199).collect::<String>());
    }
    text
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
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
