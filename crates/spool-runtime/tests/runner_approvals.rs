//! Approvals in the agent loop, over a scripted model server: each
//! decision, requests answered once, and a run paused with nobody to ask
//! that a later answer in the store resumes.
//!
//! The agents run under `on-request` + `workspace-write`, where a command
//! that is not known to be read-only (`touch`, a redirection) needs a
//! person, and under `read-only` for patches.

mod runner_support;

use std::sync::Arc;

use runner_support::*;
use serde_json::json;
use spool_core::run_state::RunState;
use spool_protocol::*;
use spool_runtime::{Agent, RunError, RunStatus, ShellTool, Tool};
use spool_store::{Store, StoreError};
use spool_testkit::responses_api::{calls_response, message_response};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};
use tokio::sync::{mpsc, watch};

use CommandExecutionApprovalDecision as Decision;

fn shell_agent(f: &Fixture) -> Agent {
    f.agent("coder")
        .with_tool(Tool::Shell(ShellTool::default()))
        .with_policy(ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite)
}

fn touch(call_id: &str, file: &str) -> (String, String, serde_json::Value) {
    (
        call_id.to_owned(),
        "shell".to_owned(),
        json!({"command": ["touch", file]}),
    )
}

/// A response calling the shell once per `(call_id, file)`: `touch file`.
fn touches(response_id: &str, calls: &[(&str, &str)]) -> spool_testkit::ScriptedResponse {
    let calls: Vec<_> = calls.iter().map(|(id, file)| touch(id, file)).collect();
    let calls: Vec<(&str, &str, serde_json::Value)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), name.as_str(), args.clone()))
        .collect();
    calls_response(response_id, &calls)
}

/// The statuses of the turn's `commandExecution` items, in order.
fn command_statuses(result: &spool_runtime::RunResult) -> Vec<CommandExecutionStatus> {
    result
        .items()
        .iter()
        .filter_map(|r| match &r.item {
            ThreadItem::CommandExecution { status, .. } => Some(*status),
            _ => None,
        })
        .collect()
}

/// Every request the client was asked is resolved exactly once in the
/// log, and nothing else is.
async fn assert_each_resolved_once(f: &Fixture, expected: &[String]) {
    let events = log(f).await;
    let mut resolved = resolved_ids(&events);
    let mut expected = expected.to_vec();
    resolved.sort();
    expected.sort();
    assert_eq!(resolved, expected);
    assert!(
        f.store
            .open_requests(&f.thread_id)
            .await
            .unwrap()
            .is_empty()
    );
}

fn ids(requests: &[spool_store::PendingRequest]) -> Vec<String> {
    requests.iter().map(|r| r.request_id.clone()).collect()
}

#[tokio::test]
async fn accept_runs_the_command() {
    let f = Fixture::new(vec![
        touches("r1", &[("call_1", "accepted.txt")]),
        message_response("r2", &["Touched."]),
    ])
    .await;
    let client = ScriptedClient::new([command_answer(Decision::Accept)]);
    let runner = f.runner().with_client(client.clone());
    let result = f.run(&runner, shell_agent(&f), "touch it").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert!(f.workspace.join("accepted.txt").exists());
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    match &asked[0].request {
        ServerRequest::CommandExecutionRequestApproval(params) => {
            assert_eq!(params.command.as_deref(), Some("touch accepted.txt"));
            assert!(params.reason.as_deref().unwrap().contains("sandbox"));
        }
        other => panic!("expected a command approval, got {other:?}"),
    }
    assert_eq!(
        command_statuses(&result),
        [CommandExecutionStatus::Completed]
    );
    assert_each_resolved_once(&f, &ids(&asked)).await;
}

#[tokio::test]
async fn accept_for_session_lets_the_same_command_run_again_without_asking() {
    let f = Fixture::new(vec![
        touches("r1", &[("call_1", "again.txt")]),
        touches("r2", &[("call_2", "again.txt")]),
        message_response("r3", &["Twice."]),
    ])
    .await;
    let client = ScriptedClient::new([command_answer(Decision::AcceptForSession)]);
    let runner = f.runner().with_client(client.clone());
    let result = f.run(&runner, shell_agent(&f), "touch it twice").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(
        client.asked().len(),
        1,
        "the second call was not asked about"
    );
    assert_eq!(
        command_statuses(&result),
        [
            CommandExecutionStatus::Completed,
            CommandExecutionStatus::Completed
        ]
    );
    assert_each_resolved_once(&f, &ids(&client.asked())).await;
}

#[tokio::test]
async fn an_execpolicy_amendment_is_written_as_a_rule_and_lets_the_prefix_run() {
    let f = Fixture::new(vec![
        touches("r1", &[("call_1", "a.txt")]),
        touches("r2", &[("call_2", "b.txt")]),
        message_response("r3", &["Done."]),
        // A later turn, with nobody to ask.
        touches("r4", &[("call_3", "c.txt")]),
        message_response("r5", &["Done again."]),
    ])
    .await;
    let rules = f.dir.path().join("rules").join("exec.rules");
    let client = ScriptedClient::new([command_answer(Decision::AcceptWithExecpolicyAmendment {
        execpolicy_amendment: ExecPolicyAmendment(vec!["touch".to_owned()]),
    })]);
    let mut runner = f.runner().with_client(client.clone());
    runner.rules_file = Some(rules.clone());
    let result = f.run(&runner, shell_agent(&f), "touch two").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(client.asked().len(), 1, "b.txt matched the new rule");
    assert!(f.workspace.join("a.txt").exists() && f.workspace.join("b.txt").exists());
    let text = std::fs::read_to_string(&rules).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with(r#"prefix_rule(pattern=["touch"], decision="allow""#),
        "{text}"
    );
    assert!(
        text.contains(&f.thread_id),
        "the rule names its thread: {text}"
    );
    assert_each_resolved_once(&f, &ids(&client.asked())).await;

    // A new runner reads the rule back from the file.
    let mut later = f.runner();
    later.rules_file = Some(rules);
    let result = f.run(&later, shell_agent(&f), "touch another").await;
    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert!(f.workspace.join("c.txt").exists());
}

#[tokio::test]
async fn decline_skips_the_command_tells_the_model_and_the_turn_goes_on() {
    let f = Fixture::new(vec![
        touches("r1", &[("call_1", "declined.txt")]),
        message_response("r2", &["Fine, I won't."]),
    ])
    .await;
    let client = ScriptedClient::new([command_answer(Decision::Decline)]);
    let runner = f.runner().with_client(client.clone());
    let result = f.run(&runner, shell_agent(&f), "touch it").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(result.final_output(), Some("Fine, I won't."));
    assert!(!f.workspace.join("declined.txt").exists());
    assert_eq!(
        command_statuses(&result),
        [CommandExecutionStatus::Declined]
    );
    let record = result
        .items()
        .iter()
        .find(|r| matches!(r.item, ThreadItem::CommandExecution { .. }))
        .unwrap();
    assert_eq!(record.envelope.status, ItemStatus::Declined);
    let sent = outputs(&f.request_bodies()[1]);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.contains("declined"), "{}", sent[0].1);
    assert_each_resolved_once(&f, &ids(&client.asked())).await;
}

#[tokio::test]
async fn cancel_skips_the_command_and_ends_the_turn_interrupted() {
    // Two calls wait on a person; cancelling the first cancels both.
    let f = Fixture::new(vec![touches(
        "r1",
        &[("call_1", "first.txt"), ("call_2", "second.txt")],
    )])
    .await;
    let client = ScriptedClient::new([command_answer(Decision::Cancel)]);
    let runner = f.runner().with_client(client.clone());
    let result = f.run(&runner, shell_agent(&f), "touch both").await;

    assert_eq!(result.status, RunStatus::Interrupted);
    assert!(!f.workspace.join("first.txt").exists());
    assert!(!f.workspace.join("second.txt").exists());
    assert_eq!(client.asked().len(), 1);
    assert_eq!(
        command_statuses(&result),
        [
            CommandExecutionStatus::Declined,
            CommandExecutionStatus::Declined
        ]
    );
    assert_eq!(f.request_bodies().len(), 1, "no model call after a cancel");
    let events = log(&f).await;
    assert_eq!(count_method(&events, "turn/completed"), 1);
    let turns = f.store.turns(&f.thread_id).await.unwrap();
    assert_eq!(turns.last().unwrap().status, TurnStatus::Interrupted);
    // Both requests are answered (the second by the runner), once each.
    let requests = f.store.requests(&f.thread_id).await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_each_resolved_once(&f, &ids(&requests)).await;
    assert!(f.store.run_states(&f.thread_id).await.unwrap().is_empty());
}

/// A run with no client: pauses on its first request.
async fn paused_run(f: &Fixture, agent: Agent) -> spool_runtime::RunResult {
    let result = f.run(&f.runner(), agent, "go").await;
    assert_eq!(result.status, RunStatus::Paused, "{:?}", result.error);
    result
}

#[tokio::test]
async fn answering_an_unknown_or_answered_request_is_an_error() {
    let f = Fixture::new(vec![touches("r1", &[("call_1", "x.txt")])]).await;
    let paused = paused_run(&f, shell_agent(&f)).await;
    let request_id = paused.interruptions()[0].request_id.clone();

    let unknown = f
        .store
        .resolve_request(
            &f.thread_id,
            "no-such-request",
            json!({"decision": "accept"}),
        )
        .await;
    assert!(
        matches!(unknown, Err(StoreError::UnknownRequest { ref request_id, .. })
            if request_id == "no-such-request"),
        "{unknown:?}"
    );
    f.store
        .resolve_request(&f.thread_id, &request_id, json!({"decision": "accept"}))
        .await
        .unwrap();
    let again = f
        .store
        .resolve_request(&f.thread_id, &request_id, json!({"decision": "decline"}))
        .await;
    assert!(
        matches!(again, Err(StoreError::RequestAlreadyResolved { request_id: ref id })
            if *id == request_id),
        "{again:?}"
    );
    // The first answer stands, logged once.
    let stored = f.store.request(&f.thread_id, &request_id).await.unwrap();
    assert_eq!(stored.unwrap().answer, Some(json!({"decision": "accept"})));
    assert_each_resolved_once(&f, &[request_id]).await;
}

#[tokio::test]
async fn a_run_with_nobody_to_ask_pauses_and_resumes_from_an_answer_in_the_store() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[(
                "call_1",
                "shell",
                json!({"command": ["sh", "-c", "echo ran >> log.txt"]}),
            )],
        ),
        message_response("r2", &["Logged."]),
    ])
    .await;
    let agent = Arc::new(shell_agent(&f));
    let paused = f
        .runner()
        .run(agent.clone(), &f.thread_id, vec![UserInput::text("log")])
        .await
        .unwrap();

    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.error);
    assert_eq!(paused.interruptions().len(), 1);
    let interruption = &paused.interruptions()[0];
    assert_eq!(interruption.call_id, "call_1");
    let open = f.store.open_requests(&f.thread_id).await.unwrap();
    assert_eq!(ids(&open), [interruption.request_id.as_str()]);
    let turns = f.store.turns(&f.thread_id).await.unwrap();
    assert_eq!(turns.last().unwrap().status, TurnStatus::InProgress);
    assert!(!f.workspace.join("log.txt").exists());
    assert_eq!(f.request_bodies().len(), 1);
    // The exported state is a valid snapshot naming the same request.
    let exported = RunState::from_json(&paused.to_state()).unwrap();
    assert_eq!(exported.interruptions, paused.interruptions());

    f.store
        .resolve_request(
            &f.thread_id,
            &interruption.request_id,
            json!({"decision": "accept"}),
        )
        .await
        .unwrap();
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let runner = f.runner();
    let resumed = runner
        .resume(agent.clone(), &f.thread_id, &events, interrupt.clone())
        .await
        .unwrap();

    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);
    assert_eq!(resumed.turn_id, paused.turn_id);
    assert_eq!(resumed.final_output(), Some("Logged."));
    assert!(resumed.interruptions().is_empty());
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("log.txt")).unwrap(),
        "ran\n",
        "the command ran exactly once"
    );
    // One model call before the pause, one after: resuming made none.
    let bodies = f.request_bodies();
    assert_eq!(bodies.len(), 2);
    let sent = outputs(&bodies[1]);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "call_1");
    let turns = f.store.turns(&f.thread_id).await.unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].status, TurnStatus::Completed);
    assert_eq!(count_method(&log(&f).await, "turn/completed"), 1);
    assert_each_resolved_once(&f, std::slice::from_ref(&interruption.request_id)).await;
    assert!(f.store.run_states(&f.thread_id).await.unwrap().is_empty());

    // Nothing is left to resume: the command cannot run a second time.
    let again = runner.resume(agent, &f.thread_id, &events, interrupt).await;
    assert!(
        matches!(again, Err(RunError::NothingToResume { .. })),
        "{again:?}"
    );
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("log.txt")).unwrap(),
        "ran\n"
    );
}

fn add_file(path: &str, line: &str) -> serde_json::Value {
    json!({"input": format!("*** Begin Patch\n*** Add File: {path}\n+{line}\n*** End Patch")})
}

fn patch_agent(f: &Fixture) -> Agent {
    f.agent("editor")
        .with_tool(Tool::ApplyPatch)
        .with_policy(ApprovalPolicy::OnRequest, SandboxMode::ReadOnly)
}

fn file_change_status(result: &spool_runtime::RunResult) -> PatchApplyStatus {
    find_item(result, |item| match item {
        ThreadItem::FileChange { status, .. } => Some(*status),
        _ => None,
    })
}

#[tokio::test]
async fn a_file_change_needing_approval_is_applied_once_accepted() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[("call_1", "apply_patch", add_file("notes.txt", "hi"))],
        ),
        message_response("r2", &["Written."]),
    ])
    .await;
    let client = ScriptedClient::new([file_answer(FileChangeApprovalDecision::Accept)]);
    let runner = f.runner().with_client(client.clone());
    let result = f.run(&runner, patch_agent(&f), "write notes").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    match &asked[0].request {
        ServerRequest::FileChangeRequestApproval(params) => {
            assert_eq!(
                params.grant_root.as_deref(),
                Some(f.workspace.display().to_string().as_str())
            );
            assert!(params.reason.as_deref().unwrap().contains("read-only"));
        }
        other => panic!("expected a file change approval, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("notes.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(file_change_status(&result), PatchApplyStatus::Completed);
    assert_each_resolved_once(&f, &ids(&asked)).await;
}

#[tokio::test]
async fn a_paused_file_change_resumes_from_an_accept_in_the_store() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[("call_1", "apply_patch", add_file("later.txt", "ok"))],
        ),
        message_response("r2", &["Written."]),
    ])
    .await;
    let agent = Arc::new(patch_agent(&f));
    let paused = paused_run(&f, (*agent).clone()).await;
    let request_id = paused.interruptions()[0].request_id.clone();
    // The wire answer of a file change approval, as a client sends it.
    f.store
        .resolve_request(&f.thread_id, &request_id, json!({"decision": "accept"}))
        .await
        .unwrap();
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let resumed = f
        .runner()
        .resume(agent, &f.thread_id, &events, interrupt)
        .await
        .unwrap();

    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);
    assert_eq!(file_change_status(&resumed), PatchApplyStatus::Completed);
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("later.txt")).unwrap(),
        "ok\n"
    );
}

#[tokio::test]
async fn accept_for_session_on_a_file_change_carries_over_to_the_next_turn() {
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "apply_patch", add_file("one.txt", "1"))]),
        message_response("r2", &["One."]),
        calls_response("r3", &[("call_2", "apply_patch", add_file("two.txt", "2"))]),
        message_response("r4", &["Two."]),
    ])
    .await;
    let client = ScriptedClient::new([file_answer(FileChangeApprovalDecision::AcceptForSession)]);
    let runner = f.runner().with_client(client.clone());
    let first = f.run(&runner, patch_agent(&f), "write one").await;
    assert_eq!(first.status, RunStatus::Completed, "{:?}", first.error);
    assert_eq!(client.asked().len(), 1);

    // A new runner with nobody to ask: the session grant (rebuilt from the
    // thread's answered requests) lets the patch under the same root run.
    let second = f.run(&f.runner(), patch_agent(&f), "write two").await;
    assert_eq!(second.status, RunStatus::Completed, "{:?}", second.error);
    assert_eq!(file_change_status(&second), PatchApplyStatus::Completed);
    assert!(f.workspace.join("two.txt").exists());
    assert_each_resolved_once(&f, &ids(&client.asked())).await;
}
