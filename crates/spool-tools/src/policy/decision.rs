//! A person's answer to an approval request, and the one place that turns it
//! into grants and a run/interrupt outcome. Keeping the interpretation here
//! means the server, the CLI and RunState resume cannot disagree on what
//! `acceptForSession` covers.

use serde::{Deserialize, Serialize};

use super::decide::ToolRequest;
use super::grants::{ExecRule, Grants, NetworkRule, Rule, RuleDecision};

/// Answer to `item/commandExecution/requestApproval` and
/// `item/fileChange/requestApproval`, in Codex app-server v2 spelling:
/// unit variants are plain strings, the amendments are one-key objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalDecision {
    /// Run this call once.
    Accept,
    /// Run it, and the same call again this session without asking.
    AcceptForSession,
    /// Run it, and add an allow rule for commands starting with this prefix.
    AcceptWithExecpolicyAmendment { execpolicy_amendment: Vec<String> },
    /// Add a rule for a host; the call runs if the rule allows.
    ApplyNetworkPolicyAmendment {
        network_policy_amendment: NetworkPolicyAmendment,
    },
    /// Do not run it; the turn continues and the model is told.
    Decline,
    /// Do not run it, and interrupt the turn.
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPolicyAmendment {
    pub host: String,
    pub action: RuleDecision,
}

/// What the runtime must do after applying a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionEffect {
    /// Run the call.
    pub run: bool,
    /// Stop the turn (the call is not run).
    pub interrupt_turn: bool,
    /// A rule the decision added to the grants, which the runtime should
    /// also append to the rules file so it outlives the session. It is
    /// unscoped (`thread: None`), like a Codex execpolicy amendment; the
    /// runtime may add a note before persisting.
    pub new_rule: Option<Rule>,
}

impl ApprovalDecision {
    /// Records what the decision grants and says what to do with the call.
    ///
    /// `acceptForSession` approves exactly what was asked: the same argv, the
    /// same files (each path becomes an approved root that covers only
    /// itself), or the same host. An amendment is recorded even if it does
    /// not match the request, since the person approved that exact rule.
    /// An empty command prefix is ignored rather than recorded, because it
    /// would allow every command.
    pub fn apply_to(&self, grants: &mut Grants, request: ToolRequest<'_>) -> DecisionEffect {
        let mut effect = DecisionEffect {
            run: false,
            interrupt_turn: false,
            new_rule: None,
        };
        match self {
            ApprovalDecision::Accept => effect.run = true,
            ApprovalDecision::AcceptForSession => {
                effect.run = true;
                match request {
                    ToolRequest::Shell { argv, .. } => grants.approve_command_for_session(argv),
                    ToolRequest::Patch { paths, .. } => {
                        for path in paths {
                            grants.approve_root_for_session(path.clone());
                        }
                    }
                    ToolRequest::Network { host } => grants.approve_host_for_session(host),
                }
            }
            ApprovalDecision::AcceptWithExecpolicyAmendment {
                execpolicy_amendment,
            } => {
                effect.run = true;
                if !execpolicy_amendment.is_empty() {
                    let rule = ExecRule::new(execpolicy_amendment.clone(), RuleDecision::Allow);
                    grants.add_exec_rule(rule.clone());
                    effect.new_rule = Some(Rule::Exec(rule));
                }
            }
            ApprovalDecision::ApplyNetworkPolicyAmendment {
                network_policy_amendment: amendment,
            } => {
                effect.run = amendment.action == RuleDecision::Allow;
                if !amendment.host.trim().is_empty() {
                    let rule = NetworkRule::new(amendment.host.clone(), amendment.action);
                    grants.add_network_rule(rule.clone());
                    effect.new_rule = Some(Rule::Network(rule));
                }
            }
            ApprovalDecision::Decline => {}
            ApprovalDecision::Cancel => effect.interrupt_turn = true,
        }
        effect
    }
}

impl From<spool_protocol::CommandExecutionApprovalDecision> for ApprovalDecision {
    fn from(wire: spool_protocol::CommandExecutionApprovalDecision) -> Self {
        use spool_protocol::{CommandExecutionApprovalDecision as Wire, NetworkPolicyRuleAction};
        match wire {
            Wire::Accept => ApprovalDecision::Accept,
            Wire::AcceptForSession => ApprovalDecision::AcceptForSession,
            Wire::AcceptWithExecpolicyAmendment {
                execpolicy_amendment,
            } => ApprovalDecision::AcceptWithExecpolicyAmendment {
                execpolicy_amendment: execpolicy_amendment.0,
            },
            Wire::ApplyNetworkPolicyAmendment {
                network_policy_amendment,
            } => ApprovalDecision::ApplyNetworkPolicyAmendment {
                network_policy_amendment: NetworkPolicyAmendment {
                    host: network_policy_amendment.host,
                    action: match network_policy_amendment.action {
                        NetworkPolicyRuleAction::Allow => RuleDecision::Allow,
                        NetworkPolicyRuleAction::Deny => RuleDecision::Deny,
                    },
                },
            },
            Wire::Decline => ApprovalDecision::Decline,
            Wire::Cancel => ApprovalDecision::Cancel,
        }
    }
}

impl From<spool_protocol::FileChangeApprovalDecision> for ApprovalDecision {
    fn from(wire: spool_protocol::FileChangeApprovalDecision) -> Self {
        use spool_protocol::FileChangeApprovalDecision as Wire;
        match wire {
            Wire::Accept => ApprovalDecision::Accept,
            Wire::AcceptForSession => ApprovalDecision::AcceptForSession,
            Wire::Decline => ApprovalDecision::Decline,
            Wire::Cancel => ApprovalDecision::Cancel,
        }
    }
}
