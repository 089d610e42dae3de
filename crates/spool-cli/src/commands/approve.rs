//! Approvals on the terminal: show what a tool wants to do, ask, answer.
//!
//! When standard input is not a terminal nobody can be asked, so every
//! request is declined with a message saying why (the model is told the
//! call was declined and the turn goes on). A client-run tool has no
//! client here and fails the same way.

use std::future::Future;
use std::io::{BufRead, IsTerminal, Write};
use std::pin::Pin;

use spool_protocol::*;
use spool_runtime::ClientRequests;
use spool_store::{AnyStore, PendingRequest, Store};

/// What the model is told of a client tool nobody is connected to run.
const NO_CLIENT: &str = "no client is connected to run this tool";

/// Asks on the terminal; reads the store for what a request is about
/// (a patch's diff).
pub struct TerminalApprover {
    pub store: AnyStore,
}

impl ClientRequests for TerminalApprover {
    fn ask<'a>(
        &'a self,
        request: &'a PendingRequest,
    ) -> Pin<Box<dyn Future<Output = Option<ServerRequestAnswer>> + Send + 'a>> {
        Box::pin(async move {
            let changes = self.changes_of(request).await;
            let request = request.request.clone();
            let interactive = std::io::stdin().is_terminal();
            let answer = tokio::task::spawn_blocking(move || match interactive {
                true => prompt(&request, &changes),
                false => not_a_terminal(&request),
            })
            .await;
            answer.ok()
        })
    }
}

impl TerminalApprover {
    /// The file changes a patch approval is about (its item's diffs).
    async fn changes_of(&self, request: &PendingRequest) -> Vec<FileUpdateChange> {
        let ServerRequest::FileChangeRequestApproval(_) = &request.request else {
            return Vec::new();
        };
        let items = self
            .store
            .items(&request.thread_id, spool_core::View::All)
            .await
            .unwrap_or_default();
        items
            .into_iter()
            .find_map(|record| match record.item {
                ThreadItem::FileChange { id, changes, .. } if id == request.item_id => {
                    Some(changes)
                }
                _ => None,
            })
            .unwrap_or_default()
    }
}

/// Most diff lines shown before asking.
const MAX_DIFF_LINES: usize = 200;

fn not_a_terminal(request: &ServerRequest) -> ServerRequestAnswer {
    eprintln!(
        "spool: declined {} — it needs approval and standard input is not a terminal \
         (run interactively, or choose --approval-policy/--sandbox that allow it)",
        what(request)
    );
    request.refusal(NO_CLIENT)
}

fn what(request: &ServerRequest) -> String {
    match request {
        ServerRequest::CommandExecutionRequestApproval(p) => {
            format!("the command `{}`", p.command.clone().unwrap_or_default())
        }
        ServerRequest::FileChangeRequestApproval(p) => format!(
            "file changes under {}",
            p.grant_root.clone().unwrap_or_default()
        ),
        ServerRequest::DynamicToolCall(p) => format!("the client tool `{}`", p.tool),
        ServerRequest::McpServerElicitation(p) => match p.approved_tool() {
            Some(tool) => format!("the MCP tool `{tool}` of {}", p.server_name),
            None => format!("a question of the MCP server {}", p.server_name),
        },
    }
}

/// Asks on the terminal until the answer is one of the choices.
fn prompt(request: &ServerRequest, changes: &[FileUpdateChange]) -> ServerRequestAnswer {
    let mut stderr = std::io::stderr();
    match request {
        ServerRequest::CommandExecutionRequestApproval(p) => {
            let _ = writeln!(
                stderr,
                "\nThe agent wants to run:\n  $ {}",
                p.command.clone().unwrap_or_default()
            );
            if let Some(cwd) = &p.cwd {
                let _ = writeln!(stderr, "  in {cwd}");
            }
            if let Some(reason) = &p.reason {
                let _ = writeln!(stderr, "  ({reason})");
            }
        }
        ServerRequest::FileChangeRequestApproval(p) => {
            let _ = writeln!(
                stderr,
                "\nThe agent wants to change files under {}",
                p.grant_root.clone().unwrap_or_default()
            );
            if let Some(reason) = &p.reason {
                let _ = writeln!(stderr, "  ({reason})");
            }
            let lines: Vec<&str> = changes.iter().flat_map(|c| c.diff.lines()).collect();
            for line in lines.iter().take(MAX_DIFF_LINES) {
                let _ = writeln!(stderr, "  {line}");
            }
            if lines.len() > MAX_DIFF_LINES {
                let _ = writeln!(stderr, "  … {} more lines", lines.len() - MAX_DIFF_LINES);
            }
        }
        ServerRequest::McpServerElicitation(p) if p.approved_tool().is_some() => {
            let (McpElicitation::Form { message, meta, .. }
            | McpElicitation::Url { message, meta, .. }) = &p.request;
            let _ = writeln!(stderr, "\n{message}");
            if let Some(arguments) = meta.as_ref().and_then(|m| m.get("tool_params")) {
                let _ = writeln!(stderr, "  with {arguments}");
            }
        }
        ServerRequest::DynamicToolCall(_) | ServerRequest::McpServerElicitation(_) => {
            return not_a_terminal(request);
        }
    }
    let stdin = std::io::stdin();
    loop {
        let _ = write!(
            stderr,
            "[a]ccept, accept for this [s]ession, [d]ecline, [c]ancel the turn: "
        );
        let _ = stderr.flush();
        let mut line = String::new();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            return request.refusal(NO_CLIENT);
        }
        let choice = match line.trim() {
            "a" | "accept" | "y" | "yes" => Choice::Accept,
            "s" | "session" => Choice::Session,
            "d" | "decline" | "n" | "no" => Choice::Decline,
            "c" | "cancel" => Choice::Cancel,
            _ => continue,
        };
        return answer(request, choice);
    }
}

#[derive(Clone, Copy)]
enum Choice {
    Accept,
    Session,
    Decline,
    Cancel,
}

fn answer(request: &ServerRequest, choice: Choice) -> ServerRequestAnswer {
    match request {
        ServerRequest::CommandExecutionRequestApproval(_) => {
            ServerRequestAnswer::CommandExecution(CommandExecutionRequestApprovalResponse {
                decision: match choice {
                    Choice::Accept => CommandExecutionApprovalDecision::Accept,
                    Choice::Session => CommandExecutionApprovalDecision::AcceptForSession,
                    Choice::Decline => CommandExecutionApprovalDecision::Decline,
                    Choice::Cancel => CommandExecutionApprovalDecision::Cancel,
                },
            })
        }
        ServerRequest::FileChangeRequestApproval(_) => {
            ServerRequestAnswer::FileChange(FileChangeRequestApprovalResponse {
                decision: match choice {
                    Choice::Accept => FileChangeApprovalDecision::Accept,
                    Choice::Session => FileChangeApprovalDecision::AcceptForSession,
                    Choice::Decline => FileChangeApprovalDecision::Decline,
                    Choice::Cancel => FileChangeApprovalDecision::Cancel,
                },
            })
        }
        ServerRequest::McpServerElicitation(_) => {
            let action = match choice {
                Choice::Accept | Choice::Session => McpServerElicitationAction::Accept,
                Choice::Decline => McpServerElicitationAction::Decline,
                Choice::Cancel => McpServerElicitationAction::Cancel,
            };
            let meta = matches!(choice, Choice::Session)
                .then(|| serde_json::json!({"persist": "session"}));
            ServerRequestAnswer::McpServerElicitation(McpServerElicitationRequestResponse {
                action,
                content: None,
                meta,
            })
        }
        ServerRequest::DynamicToolCall(_) => request.refusal(NO_CLIENT),
    }
}
