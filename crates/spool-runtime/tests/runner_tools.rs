//! Tools in the agent loop, over a scripted model server: parallel calls,
//! apply_patch, function tools with bad arguments, client-run (dynamic)
//! tools, handoffs, update_plan and what a tool emits on the side.

mod runner_support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use runner_support::*;
use serde_json::{Value, json};
use spool_core::View;
use spool_protocol::*;
use spool_runtime::{DynamicTool, RunStatus, Tool};
use spool_store::{Appended, Store};
use spool_testkit::responses_api::{calls_response, message_response};
use spool_tools::function::{FunctionTool, ToolContext};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};

fn function<F, Fut>(name: &str, schema: Value, handler: F) -> Tool
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    Tool::Function(FunctionTool::new(name, format!("the {name} tool"), schema, handler).unwrap())
}

fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The names of the tools a request body offered.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn parallel_calls_run_concurrently_and_their_outputs_go_back_in_call_order() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[
                ("call_a", "left", json!({})),
                ("call_b", "right", json!({})),
            ],
        ),
        message_response("r2", &["Both done."]),
    ])
    .await;
    // Each handler waits for the other at the barrier: run one after the
    // other, they never get past it. `left` then waits until `right`'s
    // item is completed in the log, so the calls end in the opposite of
    // their call order.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let (events, received) = tokio::sync::mpsc::unbounded_channel::<Appended>();
    let received = Arc::new(tokio::sync::Mutex::new(received));
    let b = barrier.clone();
    let left = function("left", empty_schema(), move |_, _| {
        let (b, received) = (b.clone(), received.clone());
        async move {
            b.wait().await;
            let mut received = received.lock().await;
            while let Some(event) = received.recv().await {
                if let ServerNotification::ItemCompleted(n) = event.notification()
                    && matches!(&n.item, ThreadItem::FunctionCall { name, .. } if name == "right")
                {
                    return Ok("left done".to_owned());
                }
            }
            Err("the run's events ended".to_owned())
        }
    });
    let right = function("right", empty_schema(), move |_, _| {
        let b = barrier.clone();
        async move {
            b.wait().await;
            Ok("right done".to_owned())
        }
    });
    let agent = f.agent("coder").with_tool(left).with_tool(right);
    let runner = f.runner();
    let (_stop, interrupt) = tokio::sync::watch::channel(false);
    let input = vec![UserInput::text("go")];
    let run = runner.run_streamed(Arc::new(agent), &f.thread_id, input, &events, interrupt);
    let result = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the two calls ran concurrently (run one by one, they deadlock)")
        .unwrap();

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(result.final_output(), Some("Both done."));
    let bodies = f.request_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        outputs(&bodies[1]),
        vec![
            ("call_a".to_owned(), "left done".to_owned()),
            ("call_b".to_owned(), "right done".to_owned()),
        ]
    );
    // `right` finished first, yet its output went second.
    let completed: Vec<String> = log(&f)
        .await
        .iter()
        .filter_map(|e| match &e.payload {
            ServerNotification::ItemCompleted(n) => match &n.item {
                ThreadItem::FunctionCall { name, .. } => Some(name.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(completed, ["right", "left"]);
}

const FOUR_OPS: &str = "*** Begin Patch
*** Add File: added.txt
+hello
+world
*** Update File: update.txt
@@
 one
-two
+TWO
 three
*** Delete File: delete.txt
*** Update File: old.txt
*** Move to: moved/new.txt
@@
-move me
+moved
*** End Patch";

#[tokio::test]
async fn apply_patch_adds_updates_deletes_and_moves_files_and_shows_each_diff() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[("call_1", "apply_patch", json!({"input": FOUR_OPS}))],
        ),
        message_response("r2", &["Patched."]),
    ])
    .await;
    let ws = &f.workspace;
    std::fs::write(ws.join("update.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(ws.join("delete.txt"), "bye\n").unwrap();
    std::fs::write(ws.join("old.txt"), "move me\n").unwrap();
    // Inside the workspace, workspace-write needs nobody's approval.
    let agent = f
        .agent("coder")
        .with_tool(Tool::ApplyPatch)
        .with_policy(ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite);
    let result = f.run(&f.runner(), agent, "patch").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    let read = |p: &str| std::fs::read_to_string(ws.join(p)).unwrap();
    assert_eq!(read("added.txt"), "hello\nworld\n");
    assert_eq!(read("update.txt"), "one\nTWO\nthree\n");
    assert!(!ws.join("delete.txt").exists());
    assert!(!ws.join("old.txt").exists());
    assert_eq!(read("moved/new.txt"), "moved\n");

    let (status, changes) = find_item(&result, |item| match item {
        ThreadItem::FileChange {
            status, changes, ..
        } => Some((*status, changes.clone())),
        _ => None,
    });
    assert_eq!(status, PatchApplyStatus::Completed);
    assert_eq!(changes.len(), 4, "{changes:?}");
    let change = |name: &str| {
        changes
            .iter()
            .find(|c| c.path.ends_with(name))
            .unwrap_or_else(|| panic!("no change for {name}: {changes:?}"))
    };
    assert_eq!(change("added.txt").kind, PatchChangeKind::Add);
    assert!(change("added.txt").diff.contains("+hello"));
    assert_eq!(
        change("update.txt").kind,
        PatchChangeKind::Update { move_path: None }
    );
    let diff = &change("update.txt").diff;
    assert!(diff.contains("-two") && diff.contains("+TWO"), "{diff}");
    assert_eq!(change("delete.txt").kind, PatchChangeKind::Delete);
    assert!(change("delete.txt").diff.contains("-bye"));
    let moved = change("old.txt");
    match &moved.kind {
        PatchChangeKind::Update {
            move_path: Some(to),
        } => assert!(to.ends_with("moved/new.txt"), "{to}"),
        other => panic!("the move is an update with a move_path: {other:?}"),
    }
    assert!(moved.diff.contains("-move me") && moved.diff.contains("+moved"));

    let sent = outputs(&f.request_bodies()[1]);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.contains("added.txt"), "{}", sent[0].1);
}

#[tokio::test]
async fn a_patch_reaching_outside_the_workspace_fails_back_to_the_model_and_writes_nothing() {
    let patch = "*** Begin Patch
*** Add File: inside.txt
+fine
*** Add File: ../outside.txt
+escaped
*** End Patch";
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "apply_patch", json!({"input": patch}))]),
        message_response("r2", &["Sorry."]),
    ])
    .await;
    let agent = f
        .agent("coder")
        .with_tool(Tool::ApplyPatch)
        .with_policy(ApprovalPolicy::Never, SandboxMode::DangerFullAccess);
    let result = f.run(&f.runner(), agent, "patch").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert!(!f.workspace.parent().unwrap().join("outside.txt").exists());
    // All or nothing: the file inside is not written either.
    assert!(!f.workspace.join("inside.txt").exists());
    let sent = outputs(&f.request_bodies()[1]);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "call_1");
    assert!(
        sent[0].1.contains("outside the workspace") && sent[0].1.contains("../outside.txt"),
        "{}",
        sent[0].1
    );
    let status = find_item(&result, |item| match item {
        ThreadItem::FunctionCall { name, status, .. } if name == "apply_patch" => Some(*status),
        ThreadItem::FileChange { .. } => panic!("a rejected patch files no fileChange"),
        _ => None,
    });
    assert_eq!(status, FunctionCallStatus::Failed);
}

#[tokio::test]
async fn a_function_tool_with_invalid_arguments_is_not_called_and_the_model_is_told() {
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "double", json!({"n": "five"}))]),
        calls_response("r2", &[("call_2", "double", json!({"n": 5}))]),
        message_response("r3", &["10."]),
    ])
    .await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let schema = json!({
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"]
    });
    let double = function("double", schema, move |args, _| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move { Ok((args["n"].as_i64().unwrap() * 2).to_string()) }
    });
    let result = f
        .run(
            &f.runner(),
            f.agent("math").with_tool(double),
            "double five",
        )
        .await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(result.final_output(), Some("10."));
    // Only the valid call reached the handler.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let bodies = f.request_bodies();
    assert_eq!(bodies.len(), 3);
    let first = outputs(&bodies[1]);
    assert_eq!(first.len(), 1);
    assert!(
        first[0].1.contains("double") && first[0].1.contains("/n"),
        "{}",
        first[0].1
    );
    assert_eq!(
        outputs(&bodies[2])[1],
        ("call_2".to_owned(), "10".to_owned())
    );
    let statuses: Vec<FunctionCallStatus> = result
        .items()
        .iter()
        .filter_map(|r| match &r.item {
            ThreadItem::FunctionCall { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        [FunctionCallStatus::Failed, FunctionCallStatus::Completed]
    );
}

#[tokio::test]
async fn a_dynamic_tool_is_answered_by_the_client_and_its_answer_goes_to_the_model() {
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "lookup", json!({"q": "answer"}))]),
        message_response("r2", &["It is 42."]),
    ])
    .await;
    let client = ScriptedClient::new([ServerRequestAnswer::DynamicToolCall(
        DynamicToolCallResponse {
            content_items: vec![DynamicToolCallOutputContentItem::InputText {
                text: "forty-two".to_owned(),
            }],
            success: true,
        },
    )]);
    let lookup = Tool::Dynamic(DynamicTool {
        namespace: None,
        name: "lookup".to_owned(),
        description: "Looks things up in the client.".to_owned(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    });
    let runner = f.runner().with_client(client.clone());
    let result = f
        .run(&runner, f.agent("asker").with_tool(lookup), "ask")
        .await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    match &asked[0].request {
        ServerRequest::DynamicToolCall(params) => {
            assert_eq!(params.tool, "lookup");
            assert_eq!(params.call_id, "call_1");
            assert_eq!(params.arguments, json!({"q": "answer"}));
        }
        other => panic!("expected item/tool/call, got {other:?}"),
    }
    let (status, content) = find_item(&result, |item| match item {
        ThreadItem::DynamicToolCall {
            status,
            content_items,
            ..
        } => Some((*status, content_items.clone())),
        _ => None,
    });
    assert_eq!(status, DynamicToolCallStatus::Completed);
    assert_eq!(
        content,
        Some(vec![DynamicToolCallOutputContentItem::InputText {
            text: "forty-two".to_owned()
        }])
    );
    let sent = outputs(&f.request_bodies()[1]);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.contains("forty-two"), "{}", sent[0].1);
    let events = log(&f).await;
    assert_eq!(resolved_ids(&events), [asked[0].request_id.clone()]);
    assert!(
        f.store
            .open_requests(&f.thread_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(f.store.run_states(&f.thread_id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_handoff_passes_control_and_the_next_call_uses_the_new_agents_instructions_and_tools() {
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "transfer_to_B", json!({}))]),
        message_response("r2", &["B here."]),
    ])
    .await;
    let ok = |name: &str| {
        let name = name.to_owned();
        let output = name.clone();
        function(&name, empty_schema(), move |_, _| {
            let output = output.clone();
            async move { Ok(output) }
        })
    };
    let b = f
        .agent("B")
        .with_instructions("You are B.")
        .with_tool(ok("b_tool"));
    let a = f
        .agent("A")
        .with_instructions("You are A.")
        .with_tool(ok("a_tool"))
        .with_handoff(Arc::new(b));
    let result = f.run(&f.runner(), a, "hand over").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(result.final_output(), Some("B here."));
    let bodies = f.request_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["instructions"], "You are A.");
    assert_eq!(tool_names(&bodies[0]), ["a_tool", "transfer_to_B"]);
    assert_eq!(bodies[1]["instructions"], "You are B.");
    assert_eq!(tool_names(&bodies[1]), ["b_tool"]);
    let (from, to, call_id) = find_item(&result, |item| match item {
        ThreadItem::Handoff {
            from_agent,
            to_agent,
            call_id,
            ..
        } => Some((from_agent.clone(), to_agent.clone(), call_id.clone())),
        _ => None,
    });
    assert_eq!((from.as_str(), to.as_str()), ("A", "B"));
    assert_eq!(call_id.as_deref(), Some("call_1"));
    let sent = outputs(&bodies[1]);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.contains("B"), "{}", sent[0].1);
    let answer = result
        .items()
        .iter()
        .find(|r| matches!(r.item, ThreadItem::AgentMessage { .. }))
        .unwrap();
    assert_eq!(answer.envelope.provenance.agent, "B");
}

#[tokio::test]
async fn update_plan_files_a_plan_item_and_streams_its_delta() {
    let plan = json!({"explanation": "Two steps.", "plan": [
        {"step": "read the code", "status": "completed"},
        {"step": "fix the bug", "status": "in_progress"}
    ]});
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "update_plan", plan)]),
        message_response("r2", &["Planned."]),
    ])
    .await;
    let agent = f.agent("planner").with_tool(Tool::UpdatePlan);
    let (result, streamed) = run_streamed(&f, &f.runner(), agent, "plan").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    let (id, text) = find_item(&result, |item| match item {
        ThreadItem::Plan { id, text } => Some((id.clone(), text.clone())),
        _ => None,
    });
    assert!(text.contains("Two steps."), "{text}");
    assert!(text.contains("[x] read the code"), "{text}");
    assert!(text.contains("[~] fix the bug"), "{text}");
    let deltas: Vec<&TextDeltaNotification> = streamed
        .iter()
        .filter_map(|e| match e.notification() {
            ServerNotification::PlanDelta(delta) => Some(delta),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 1);
    assert_eq!(deltas[0].item_id, id);
    assert_eq!(deltas[0].delta, text);
    let sent = outputs(&f.request_bodies()[1]);
    assert_eq!(sent, [("call_1".to_owned(), "Plan updated".to_owned())]);
}

#[tokio::test]
async fn what_a_tool_emits_becomes_items_under_its_call_and_status_is_streamed_not_stored() {
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "report", json!({}))]),
        message_response("r2", &["Reported."]),
    ])
    .await;
    let report = function("report", empty_schema(), |_, ctx| async move {
        ctx.emit_status("working on it");
        ctx.emit_message("half way there");
        ctx.emit_component("chart", json!({"points": [1, 2]}));
        ctx.emit_context("the user prefers metric units");
        Ok("report done".to_owned())
    });
    let (result, streamed) =
        run_streamed(&f, &f.runner(), f.agent("reporter").with_tool(report), "go").await;

    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    let stored = f.store.items(&f.thread_id, View::All).await.unwrap();
    let call_id = stored
        .iter()
        .find(|r| matches!(r.item, ThreadItem::FunctionCall { .. }))
        .map(|r| r.item.id().to_owned())
        .unwrap();
    let children: Vec<&ThreadItem> = stored
        .iter()
        .filter(|r| r.envelope.provenance.parent_item_id.as_deref() == Some(&call_id))
        .map(|r| &r.item)
        .collect();
    assert_eq!(children.len(), 3, "{children:?}");
    assert!(children.iter().any(|item| matches!(
        item, ThreadItem::AgentMessage { text, .. } if text == "half way there"
    )));
    assert!(children.iter().any(|item| matches!(
        item, ThreadItem::Component { name, props, .. }
            if name == "chart" && props == &json!({"points": [1, 2]})
    )));
    assert!(children.iter().any(|item| matches!(
        item, ThreadItem::Context { text, .. } if text == "the user prefers metric units"
    )));
    assert!(
        !stored
            .iter()
            .any(|r| matches!(r.item, ThreadItem::Status { .. })),
        "status items are never stored"
    );
    // …but the status was streamed, as a transient item under the call.
    let status = streamed.iter().find_map(|e| match e {
        Appended::Transient(ServerNotification::ItemCompleted(n)) => match &n.item {
            ThreadItem::Status { text, .. } => Some((text.clone(), n.envelope.clone())),
            _ => None,
        },
        _ => None,
    });
    let (text, envelope) = status.expect("the status item was streamed");
    assert_eq!(text, "working on it");
    assert_eq!(
        envelope.unwrap().provenance.parent_item_id.as_deref(),
        Some(call_id.as_str())
    );
    // The context reached the model with the call's output.
    let body = &f.request_bodies()[1];
    assert_eq!(
        outputs(body),
        [("call_1".to_owned(), "report done".to_owned())]
    );
    assert!(
        body["input"]
            .to_string()
            .contains("the user prefers metric units")
    );
}

#[tokio::test]
async fn what_a_tool_emits_is_streamed_while_it_still_runs() {
    let f = Fixture::new(vec![
        calls_response("r1", &[("call_1", "slow", json!({}))]),
        message_response("r2", &["Done."]),
    ])
    .await;
    // The tool returns only once the test has seen its status streamed:
    // buffering emissions until the tool returns would deadlock.
    let release = Arc::new(tokio::sync::Notify::new());
    let released = release.clone();
    let slow = function("slow", empty_schema(), move |_, ctx| {
        let released = released.clone();
        async move {
            ctx.emit_status("still working");
            released.notified().await;
            Ok("finished".to_owned())
        }
    });
    let runner = f.runner();
    let agent = Arc::new(f.agent("worker").with_tool(slow));
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let (_stop, interrupt) = tokio::sync::watch::channel(false);
    let thread_id = f.thread_id.clone();
    let run = tokio::spawn(async move {
        let input = vec![UserInput::text("go")];
        runner
            .run_streamed(agent, &thread_id, input, &events, interrupt)
            .await
    });
    let saw_status = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = received.recv().await {
            if let Appended::Transient(ServerNotification::ItemCompleted(n)) = &event
                && matches!(&n.item, ThreadItem::Status { text, .. } if text == "still working")
            {
                return true;
            }
        }
        false
    })
    .await
    .expect("the status arrived while the tool ran");
    assert!(saw_status);
    release.notify_one();
    let result = run.await.unwrap().unwrap();
    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
}
