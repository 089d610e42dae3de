//! Resuming from an exported RunState: the JSON `to_state()` gives back
//! resumes the run (once its request is answered); against an agent graph
//! without the waiting tool it fails closed.

mod runner_support;

use std::sync::Arc;

use runner_support::*;
use serde_json::json;
use spool_core::run_state::{RunState, RunStateError};
use spool_runtime::{RunError, RunStatus, ShellTool, Tool};
use spool_store::Store;
use spool_testkit::responses_api::{calls_response, message_response};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};
use tokio::sync::{mpsc, watch};

#[tokio::test]
async fn an_exported_state_resumes_and_a_changed_graph_is_refused() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[("call_1", "shell", json!({"command": ["touch", "made.txt"]}))],
        ),
        message_response("r2", &["Made."]),
    ])
    .await;
    let agent = f
        .agent("coder")
        .with_tool(Tool::Shell(ShellTool::default()))
        .with_policy(ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite);
    let paused = f.run(&f.runner(), agent.clone(), "make a file").await;
    assert_eq!(paused.status, RunStatus::Paused);
    let exported = paused.to_state();
    assert!(
        exported.starts_with("{\n  \"$schemaVersion\": \"1.2\""),
        "{exported}"
    );
    let request = paused.interruptions()[0].request_id.clone();

    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    // A graph whose agent lacks the waiting tool: refused before anything runs.
    let without_shell = Arc::new(f.agent("coder"));
    let refused = f
        .runner()
        .resume_from_state(
            without_shell,
            RunState::from_json(&exported).unwrap(),
            &events,
            interrupt.clone(),
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(RunError::State(RunStateError::MissingTool { .. }))
        ),
        "{refused:?}"
    );
    assert!(!f.workspace.join("made.txt").exists());

    f.store
        .resolve_request(&f.thread_id, &request, json!({"decision": "accept"}))
        .await
        .unwrap();
    let resumed = f
        .runner()
        .resume_from_state(
            Arc::new(agent),
            RunState::from_json(&exported).unwrap(),
            &events,
            interrupt,
        )
        .await
        .unwrap();
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);
    assert_eq!(resumed.final_output(), Some("Made."));
    assert!(f.workspace.join("made.txt").exists());
    assert_eq!(f.server.requests().len(), 2);
    assert!(resumed.interruptions().is_empty());
}

#[tokio::test]
async fn a_run_that_never_finishes_stops_at_max_turns_with_a_clear_error() {
    let looping: Vec<_> = (0..3)
        .map(|n| {
            calls_response(
                &format!("r{n}"),
                &[(&format!("call_{n}"), "shell", json!({"command": ["true"]}))],
            )
        })
        .collect();
    let f = Fixture::new(looping).await;
    let agent = f
        .agent("looper")
        .with_tool(Tool::Shell(ShellTool::default()))
        .with_policy(ApprovalPolicy::Never, SandboxMode::DangerFullAccess);
    let runner = f.runner().with_max_turns(2);
    let outcome = runner
        .run(
            Arc::new(agent),
            &f.thread_id,
            vec![spool_protocol::UserInput::text("loop")],
        )
        .await;
    assert!(
        matches!(outcome, Err(RunError::MaxTurnsExceeded { max_turns: 2 })),
        "{outcome:?}"
    );
    assert_eq!(f.server.requests().len(), 2, "no third model call");
    // The turn is on record as failed, with the reason.
    let turns = f.store.turns(&f.thread_id).await.unwrap();
    assert_eq!(turns[0].status, spool_protocol::TurnStatus::Failed);
    let message = turns[0].error.as_ref().unwrap().message.clone();
    assert!(message.contains("max_turns = 2"), "{message}");
}
