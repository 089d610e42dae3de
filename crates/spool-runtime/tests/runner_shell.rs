//! The shell tool in the agent loop, over a scripted model server.

mod runner_support;

use std::time::Duration;

use runner_support::*;
use serde_json::json;
use spool_protocol::*;
use spool_runtime::{RunStatus, ShellTool, Tool};
use spool_testkit::responses_api::{calls_response, message_response};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};

#[tokio::test]
async fn a_two_step_shell_loop_runs_the_command_and_sends_its_output_back() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[(
                "call_1",
                "shell",
                json!({"command": ["sh", "-c", "echo hello > out.txt && echo done"]}),
            )],
        ),
        message_response("r2", &["All ", "done."]),
    ])
    .await;
    let agent = f
        .agent("coder")
        .with_tool(Tool::Shell(ShellTool::default()))
        .with_policy(ApprovalPolicy::Never, SandboxMode::DangerFullAccess);
    let result = f.run(&f.runner(), agent, "write a file").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(result.final_output(), Some("All done."));
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("out.txt")).unwrap(),
        "hello\n"
    );
    let command = result
        .items()
        .iter()
        .find_map(|r| match &r.item {
            ThreadItem::CommandExecution {
                status,
                exit_code,
                aggregated_output,
                command,
                ..
            } => Some((
                *status,
                *exit_code,
                aggregated_output.clone(),
                command.clone(),
            )),
            _ => None,
        })
        .expect("a commandExecution item");
    assert_eq!(command.0, CommandExecutionStatus::Completed);
    assert_eq!(command.1, Some(0));
    assert_eq!(command.2.as_deref(), Some("done\n"));
    assert!(command.3.contains("echo hello"), "{}", command.3);

    let bodies = f.request_bodies();
    assert_eq!(bodies.len(), 2);
    let sent = outputs(&bodies[1]);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "call_1");
    assert!(
        sent[0].1.contains("Exit code: 0") && sent[0].1.contains("done"),
        "{}",
        sent[0].1
    );
    assert!(
        bodies[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "shell")
    );
}

#[tokio::test]
async fn a_command_that_hangs_is_killed_at_its_timeout_and_the_item_fails() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[(
                "call_1",
                "shell",
                json!({"command": ["sleep", "30"], "timeout_ms": 300}),
            )],
        ),
        message_response("r2", &["It timed out."]),
    ])
    .await;
    let agent = f
        .agent("coder")
        .with_tool(Tool::Shell(ShellTool::default()))
        .with_policy(ApprovalPolicy::Never, SandboxMode::DangerFullAccess);
    let runner = f.runner();
    let run = f.run(&runner, agent, "wait");
    let result = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the timeout ends the command");
    assert_eq!(result.status, RunStatus::Completed);
    let (status, output) = result
        .items()
        .iter()
        .find_map(|r| match &r.item {
            ThreadItem::CommandExecution {
                status,
                aggregated_output,
                ..
            } => Some((*status, aggregated_output.clone().unwrap_or_default())),
            _ => None,
        })
        .unwrap();
    assert_eq!(status, CommandExecutionStatus::Failed);
    assert!(output.contains("timed out"), "{output}");
    let sent = outputs(&f.request_bodies()[1]);
    assert!(sent[0].1.contains("timed out"), "{}", sent[0].1);
}
