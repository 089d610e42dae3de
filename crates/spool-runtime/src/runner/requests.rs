//! Asking: which calls need a person, the durable requests that ask them,
//! and what their answers do.
//!
//! A call the policy does not let through becomes a request in the store
//! (`pending_requests`) before anyone is asked, together with the run
//! state, so the question survives the process. The runner then asks its
//! [`ClientRequests`] (a terminal prompt, a connected client); with nobody
//! to ask, the run pauses and can be resumed later from the store or from
//! an exported RunState. Answers are recorded in the store (which logs
//! `serverRequest/resolved`) before they take effect.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use spool_protocol::*;
use spool_store::PendingRequest;
use spool_tools::mcp::{McpApproval, McpToolInfo};
use spool_tools::policy::{self, Grants, ToolRequest, Verdict};
use spool_tools::shell;

use super::confine;
use super::file_call::{Filed, FiledCall};
use crate::agent::{Agent, Confinement};
use crate::now_ms;

/// Who answers a run's requests while it runs (a terminal, a client
/// connection). `None` means nobody can answer now: the run pauses.
pub trait ClientRequests: Send + Sync {
    fn ask<'a>(
        &'a self,
        request: &'a PendingRequest,
    ) -> Pin<Box<dyn Future<Output = Option<ServerRequestAnswer>> + Send + 'a>>;
}

/// What the policy says about one filed call.
pub(crate) enum Gate {
    /// Run it; `true` outside the kernel sandbox (a grant let it leave).
    Run(bool),
    Refuse(String),
    Ask(Box<PendingRequest>),
}

/// Applies the agent's policy to a filed call.
pub(crate) fn gate(
    filed: &FiledCall,
    agent: &Agent,
    grants: &Grants,
    thread_id: &str,
    turn_id: &str,
) -> Gate {
    // A command that names a host (a URL in its arguments) needs network
    // access to it: the network rules speak first.
    if let Filed::Shell { command, .. } = &filed.filed {
        for (host, protocol) in hosts_in(&command.argv) {
            // A thread whose sandbox has the network on asks about no host;
            // a rule that denies one still holds.
            if agent.sandbox_options.network {
                if grants
                    .network_rule_for(&host)
                    .is_some_and(|rule| rule.decision == policy::RuleDecision::Deny)
                {
                    return Gate::Refuse(format!("network access to {host} is denied by a rule"));
                }
                continue;
            }
            let verdict = policy::decide_with(
                enforcement(agent),
                agent.approval_policy,
                agent.sandbox,
                &agent.workspace_root,
                ToolRequest::Network { host: &host },
                grants,
                shell::is_known_safe,
            );
            match verdict {
                Verdict::Run => {}
                Verdict::Refuse { reason } => return Gate::Refuse(reason),
                Verdict::Ask { reason } => {
                    return Gate::Ask(Box::new(network_request(
                        filed, command, &host, &protocol, &reason, thread_id, turn_id,
                    )));
                }
            }
        }
    }
    let verdict = match &filed.filed {
        Filed::Shell {
            command,
            escalation_requested,
            ..
        } => policy::decide_with(
            enforcement(agent),
            agent.approval_policy,
            agent.sandbox,
            &agent.workspace_root,
            ToolRequest::Shell {
                argv: &command.argv,
                cwd: &command.cwd,
                escalation_requested: *escalation_requested,
            },
            grants,
            shell::is_known_safe,
        ),
        Filed::Patch { paths, .. } => policy::decide_with(
            enforcement(agent),
            agent.approval_policy,
            agent.sandbox,
            &agent.workspace_root,
            ToolRequest::Patch {
                paths,
                extra_roots: &confine::extra_writable_roots(agent),
            },
            grants,
            shell::is_known_safe,
        ),
        // The client runs its own tools and decides about them itself.
        Filed::Function { .. } | Filed::Done => Verdict::Run,
        Filed::Mcp { tool, .. } => match mcp_asks(tool, agent, grants) {
            true => Verdict::Ask {
                reason: format!(
                    "the MCP tool {} of {} may change things",
                    tool.tool, tool.server
                ),
            },
            false => Verdict::Run,
        },
        Filed::Dynamic {
            tool, arguments, ..
        } => {
            return Gate::Ask(Box::new(new_request(
                ServerRequest::DynamicToolCall(DynamicToolCallParams {
                    thread_id: thread_id.to_owned(),
                    turn_id: turn_id.to_owned(),
                    call_id: filed.call.call_id.clone(),
                    namespace: tool.namespace.clone(),
                    tool: tool.name.clone(),
                    arguments: arguments.clone(),
                }),
                &filed.item_id,
            )));
        }
    };
    match verdict {
        // A call that wants to leave the sandbox only gets `Run` through a
        // grant, so it runs outside; every other call runs inside.
        Verdict::Run => Gate::Run(leaves_sandbox(filed, agent, false)),
        Verdict::Refuse { reason } => Gate::Refuse(reason),
        Verdict::Ask { reason } => {
            match approval_request(filed, &reason, agent, thread_id, turn_id) {
                Some(request) => Gate::Ask(Box::new(request)),
                None => Gate::Run(false),
            }
        }
    }
}

/// Whether a person is asked before an MCP tool runs. A server's (or a
/// tool's) `approval` setting decides first; then the thread's policy,
/// informed by the tool's hints as MCP defines them (a tool that does not
/// say otherwise may write, and may destroy): `untrusted` asks for all but
/// read-only tools, `on-request` for tools that may destroy, `on-failure`
/// and `never` never ask (no sandbox confines an MCP server, so there is
/// no failure to ask after). An `accept` for the session is not asked
/// again.
fn mcp_asks(tool: &McpToolInfo, agent: &Agent, grants: &Grants) -> bool {
    if grants
        .session
        .is_mcp_tool_approved(&tool.server, &tool.tool)
    {
        return false;
    }
    let read_only = tool.read_only == Some(true);
    match tool.approval {
        Some(McpApproval::Always) => true,
        Some(McpApproval::Never) => false,
        None => match agent.approval_policy {
            policy::ApprovalPolicy::Untrusted => !read_only,
            policy::ApprovalPolicy::OnRequest => !read_only && tool.destructive != Some(false),
            policy::ApprovalPolicy::OnFailure | policy::ApprovalPolicy::Never => false,
        },
    }
}

fn enforcement(agent: &Agent) -> policy::Enforcement {
    match agent.confinement {
        Confinement::Kernel(_) => policy::Enforcement::Kernel,
        Confinement::Classify => policy::Enforcement::Classify,
    }
}

/// Whether an accepted (or granted) shell call runs outside the kernel
/// sandbox: it asked to leave it (escalation, a folder outside the
/// workspace) or is the re-run after a denial.
pub(crate) fn leaves_sandbox(filed: &FiledCall, agent: &Agent, retry: bool) -> bool {
    match &filed.filed {
        Filed::Shell {
            command,
            escalation_requested,
            ..
        } => policy::leaves_sandbox(
            &agent.workspace_root,
            &command.cwd,
            *escalation_requested,
            retry,
        ),
        _ => false,
    }
}

/// The hosts a command's arguments name as URLs (`scheme://host[:port]/…`),
/// each once, with the URL's scheme.
pub(crate) fn hosts_in(argv: &[String]) -> Vec<(String, String)> {
    let mut hosts: Vec<(String, String)> = Vec::new();
    for word in argv.iter().flat_map(|arg| arg.split_whitespace()) {
        let Some((scheme, rest)) = word.split_once("://") else {
            continue;
        };
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            continue;
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let host = host_port
            .split(':')
            .next()
            .unwrap_or_default()
            .trim_matches(|c| c == '\'' || c == '"')
            .to_ascii_lowercase();
        if !host.is_empty() && !hosts.iter().any(|(h, _)| *h == host) {
            hosts.push((host, scheme.to_ascii_lowercase()));
        }
    }
    hosts
}

/// A command approval about network access to `host`.
fn network_request(
    filed: &FiledCall,
    command: &spool_tools::shell::ShellCommand,
    host: &str,
    protocol: &str,
    reason: &str,
    thread_id: &str,
    turn_id: &str,
) -> PendingRequest {
    let request =
        ServerRequest::CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            item_id: filed.item_id.clone(),
            started_at_ms: 0,
            approval_id: None,
            reason: Some(format!("network access to {host}: {reason}")),
            network_approval_context: Some(NetworkApprovalContext {
                host: host.to_owned(),
                protocol: protocol.to_owned(),
            }),
            command: Some(shell::format_command(&command.argv)),
            cwd: Some(command.cwd.display().to_string()),
            command_actions: Some(shell::command_actions(&command.argv)),
            proposed_execpolicy_amendment: Some(ExecPolicyAmendment(command.argv.clone())),
            proposed_network_policy_amendments: Some(vec![
                NetworkPolicyAmendment {
                    host: host.to_owned(),
                    action: NetworkPolicyRuleAction::Allow,
                },
                NetworkPolicyAmendment {
                    host: host.to_owned(),
                    action: NetworkPolicyRuleAction::Deny,
                },
            ]),
            available_decisions: None,
        });
    new_request(request, &filed.item_id)
}

/// A request asked now: stamped with the time its row records.
pub(crate) fn new_request(mut request: ServerRequest, item_id: &str) -> PendingRequest {
    let now = now_ms();
    request.stamp_started_at(now);
    PendingRequest {
        request_id: uuid::Uuid::now_v7().to_string(),
        thread_id: request.thread_id().to_owned(),
        turn_id: request.turn_id().to_owned(),
        item_id: item_id.to_owned(),
        request,
        created_at_ms: now,
        answer: None,
        resolved_at_ms: None,
    }
}

/// The approval request for a call the policy (or, for a re-run outside
/// the sandbox, a denial) says a person must allow.
pub(crate) fn approval_request(
    filed: &FiledCall,
    reason: &str,
    agent: &Agent,
    thread_id: &str,
    turn_id: &str,
) -> Option<PendingRequest> {
    let request = match &filed.filed {
        Filed::Shell { command, .. } => {
            ServerRequest::CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams {
                thread_id: thread_id.to_owned(),
                turn_id: turn_id.to_owned(),
                item_id: filed.item_id.clone(),
                started_at_ms: 0,
                approval_id: None,
                reason: Some(reason.to_owned()),
                network_approval_context: None,
                command: Some(shell::format_command(&command.argv)),
                cwd: Some(command.cwd.display().to_string()),
                command_actions: Some(shell::command_actions(&command.argv)),
                // The whole argv: accepting it as a rule allows exactly this
                // command and its extensions. The session grant reads it back.
                proposed_execpolicy_amendment: Some(ExecPolicyAmendment(command.argv.clone())),
                proposed_network_policy_amendments: None,
                available_decisions: None,
            })
        }
        Filed::Patch { paths, .. } => {
            ServerRequest::FileChangeRequestApproval(FileChangeRequestApprovalParams {
                thread_id: thread_id.to_owned(),
                turn_id: turn_id.to_owned(),
                item_id: filed.item_id.clone(),
                started_at_ms: 0,
                reason: Some(reason.to_owned()),
                grant_root: Some(
                    common_root(paths, &agent.workspace_root)
                        .display()
                        .to_string(),
                ),
            })
        }
        Filed::Mcp {
            tool, arguments, ..
        } => ServerRequest::McpServerElicitation(McpServerElicitationRequestParams::tool_approval(
            thread_id,
            turn_id,
            &tool.server,
            &tool.tool,
            tool.description.as_deref(),
            arguments,
        )),
        Filed::Function { .. } | Filed::Dynamic { .. } | Filed::Done => return None,
    };
    Some(new_request(request, &filed.item_id))
}

/// The deepest directory holding every path (what `acceptForSession`
/// approves for a patch).
fn common_root(paths: &[PathBuf], fallback: &Path) -> PathBuf {
    let mut dirs = paths.iter().filter_map(|p| p.parent());
    let Some(first) = dirs.next() else {
        return fallback.to_owned();
    };
    let mut root = first.to_owned();
    for dir in dirs {
        while !dir.starts_with(&root) {
            if !root.pop() {
                return fallback.to_owned();
            }
        }
    }
    root
}

/// What an answer means for the call it answers.
pub(crate) struct AnswerEffect {
    pub run: bool,
    pub interrupt_turn: bool,
    /// A rule the person asked to keep (written to the rules file).
    pub new_rule: Option<policy::Rule>,
    /// For a client-run tool: its result.
    pub dynamic: Option<DynamicToolCallResponse>,
}

/// Interprets `answer` for `request`, recording grants it gives. An answer
/// of the wrong kind for the request (a file decision for a command, say)
/// is treated as a decline, so a confused client never runs anything.
pub(crate) fn apply_answer(
    request: &PendingRequest,
    answer: &ServerRequestAnswer,
    grants: &mut Grants,
) -> AnswerEffect {
    let refuse = AnswerEffect {
        run: false,
        interrupt_turn: false,
        new_rule: None,
        dynamic: None,
    };
    match (&request.request, answer) {
        (
            ServerRequest::CommandExecutionRequestApproval(params),
            ServerRequestAnswer::CommandExecution(response),
        ) => {
            let argv = params
                .proposed_execpolicy_amendment
                .as_ref()
                .map(|amendment| amendment.0.clone())
                .unwrap_or_default();
            let cwd = PathBuf::from(params.cwd.clone().unwrap_or_default());
            let decision = policy::ApprovalDecision::from(response.decision.clone());
            // A network approval grants the host; a command approval the argv.
            let asked = match &params.network_approval_context {
                Some(context) => ToolRequest::Network {
                    host: &context.host,
                },
                None => ToolRequest::Shell {
                    argv: &argv,
                    cwd: &cwd,
                    escalation_requested: false,
                },
            };
            let effect = decision.apply_to(grants, asked);
            AnswerEffect {
                run: effect.run,
                interrupt_turn: effect.interrupt_turn,
                new_rule: effect.new_rule,
                dynamic: None,
            }
        }
        (
            ServerRequest::FileChangeRequestApproval(params),
            ServerRequestAnswer::FileChange(response),
        ) => {
            let root: Vec<PathBuf> = params.grant_root.iter().map(PathBuf::from).collect();
            let decision = policy::ApprovalDecision::from(response.decision);
            let effect = decision.apply_to(
                grants,
                ToolRequest::Patch {
                    paths: &root,
                    extra_roots: &[],
                },
            );
            AnswerEffect {
                run: effect.run,
                interrupt_turn: effect.interrupt_turn,
                new_rule: effect.new_rule,
                dynamic: None,
            }
        }
        (ServerRequest::DynamicToolCall(_), ServerRequestAnswer::DynamicToolCall(response)) => {
            AnswerEffect {
                run: true,
                interrupt_turn: false,
                new_rule: None,
                dynamic: Some(response.clone()),
            }
        }
        (
            ServerRequest::McpServerElicitation(params),
            ServerRequestAnswer::McpServerElicitation(response),
        ) => {
            if let (true, Some(tool)) = (response.for_session(), params.approved_tool()) {
                grants.session.approve_mcp_tool(&params.server_name, tool);
            }
            AnswerEffect {
                run: response.action == McpServerElicitationAction::Accept,
                // As for a command: `cancel` stops the turn.
                interrupt_turn: response.action == McpServerElicitationAction::Cancel,
                new_rule: None,
                dynamic: None,
            }
        }
        (
            ServerRequest::CommandExecutionRequestApproval(_)
            | ServerRequest::FileChangeRequestApproval(_)
            | ServerRequest::DynamicToolCall(_)
            | ServerRequest::McpServerElicitation(_),
            _,
        ) => refuse,
    }
}

/// Session grants a thread's earlier answers gave (`acceptForSession`),
/// rebuilt from its answered requests so they outlive the process.
pub(crate) fn replay_session_grants(requests: &[PendingRequest], grants: &mut Grants) {
    for request in requests {
        let Some(answer) = request
            .answer
            .as_ref()
            .and_then(|a| parse_answer(request, a))
        else {
            continue;
        };
        let is_session = match &answer {
            ServerRequestAnswer::CommandExecution(response) => matches!(
                response.decision,
                CommandExecutionApprovalDecision::AcceptForSession
            ),
            ServerRequestAnswer::FileChange(response) => matches!(
                response.decision,
                FileChangeApprovalDecision::AcceptForSession
            ),
            ServerRequestAnswer::DynamicToolCall(_) => false,
            ServerRequestAnswer::McpServerElicitation(response) => response.for_session(),
        };
        if is_session {
            apply_answer(request, &answer, grants);
        }
    }
}

/// Parses a stored answer; an answer that no longer parses is a decline.
pub(crate) fn stored_answer(request: &PendingRequest) -> Option<ServerRequestAnswer> {
    let answer = request.answer.as_ref()?;
    Some(
        parse_answer(request, answer).unwrap_or(ServerRequestAnswer::FileChange(
            FileChangeRequestApprovalResponse {
                decision: FileChangeApprovalDecision::Decline,
            },
        )),
    )
}

/// An answer as the kind its request expects (see
/// [`ServerRequest::answer_from`]).
fn parse_answer(
    request: &PendingRequest,
    answer: &serde_json::Value,
) -> Option<ServerRequestAnswer> {
    request.request.answer_from(answer.clone()).ok()
}
