//! `llm_view` conversion of tool items: each tool kind → its call and
//! its output as Responses API input items (messages, reasoning, context
//! and compaction are in `views_convert.rs`).

mod views_support;

use serde_json::{Value, json};
use spool_protocol::{
    CommandExecutionStatus, DynamicToolCallOutputContentItem, DynamicToolCallStatus,
    FileUpdateChange, FunctionCallStatus, ItemStatus, McpToolCallError, McpToolCallResult,
    McpToolCallStatus, PatchApplyStatus, PatchChangeKind, ThreadItem, WebSearchAction,
};
use views_support::{convert, convert_one, function_call, record, with_provider, with_status};

fn command(status: CommandExecutionStatus, exit_code: Option<i32>) -> ThreadItem {
    ThreadItem::CommandExecution {
        plugin_id: Default::default(),
        script_path: Default::default(),
        source: Default::default(),
        id: "cmd".into(),
        command: "ls -a".into(),
        cwd: "/repo".into(),
        process_id: None,
        status,
        command_actions: Vec::new(),
        aggregated_output: Some(".\n..\n".into()),
        exit_code,
        duration_ms: Some(5),
    }
}

#[test]
fn function_call_becomes_call_and_output() {
    assert_eq!(
        convert_one(function_call("f", "call_1", "42")),
        [
            json!({"type": "function_call", "call_id": "call_1", "name": "lookup",
                   "arguments": "{\"q\":1}"}),
            json!({"type": "function_call_output", "call_id": "call_1", "output": "42"}),
        ]
    );
}

fn function_output(
    status: FunctionCallStatus,
    output: Option<&str>,
    envelope: ItemStatus,
) -> Vec<Value> {
    let mut item = function_call("f", "call_1", "");
    if let ThreadItem::FunctionCall {
        status: s,
        output: o,
        ..
    } = &mut item
    {
        *s = status;
        *o = output.map(str::to_owned);
    }
    convert(&[with_status(record("t", 1, item), envelope)])
}

#[test]
fn declined_failed_and_unfinished_function_calls() {
    let declined = function_output(FunctionCallStatus::Declined, None, ItemStatus::Declined);
    assert_eq!(declined[1]["output"], "The user declined this tool call.");
    let failed = function_output(
        FunctionCallStatus::Failed,
        Some("division by zero"),
        ItemStatus::Failed,
    );
    assert_eq!(failed[1]["output"], "division by zero");
    // Still running: the call has no output yet, so neither half is sent.
    let running = function_output(FunctionCallStatus::InProgress, None, ItemStatus::InProgress);
    assert!(running.is_empty());
    // Interrupted by a crash: the call still needs an answer.
    let interrupted = function_output(FunctionCallStatus::InProgress, None, ItemStatus::Incomplete);
    assert_eq!(
        interrupted[1]["output"],
        "The tool call was interrupted before it finished."
    );
}

#[test]
fn command_execution_replays_the_provider_call_with_exit_code_and_output() {
    let r = with_provider(
        record("t", 1, command(CommandExecutionStatus::Completed, Some(0))),
        json!({"item": {"type": "function_call", "id": "fc_9", "call_id": "call_9",
                        "name": "exec", "arguments": "{\"cmd\":[\"ls\",\"-a\"]}"}}),
    );
    assert_eq!(
        convert(&[r]),
        [
            json!({"type": "function_call", "call_id": "call_9", "name": "exec",
                   "arguments": "{\"cmd\":[\"ls\",\"-a\"]}"}),
            json!({"type": "function_call_output", "call_id": "call_9",
                   "output": "Exit code: 0\nOutput:\n.\n..\n"}),
        ]
    );
}

#[test]
fn command_execution_without_a_provider_call_gets_a_shell_call() {
    let input = convert_one(command(CommandExecutionStatus::Failed, Some(2)));
    assert_eq!(input[0]["name"], "shell");
    assert_eq!(input[0]["call_id"], "cmd");
    let arguments: Value = serde_json::from_str(input[0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"command": "ls -a", "workdir": "/repo"}));
    assert_eq!(input[1]["output"], "Exit code: 2\nOutput:\n.\n..\n");
    // A person's decline leaves no output; a refusal by the policy records
    // its reason there, and the model is told that reason.
    let mut declined = command(CommandExecutionStatus::Declined, None);
    if let ThreadItem::CommandExecution {
        aggregated_output, ..
    } = &mut declined
    {
        *aggregated_output = None;
    }
    let declined = convert_one(declined);
    assert_eq!(
        declined[1]["output"],
        "The user declined to run this command."
    );
    let mut refused = command(CommandExecutionStatus::Declined, None);
    if let ThreadItem::CommandExecution {
        aggregated_output, ..
    } = &mut refused
    {
        *aggregated_output = Some("Not run: outside the sandbox".to_owned());
    }
    assert_eq!(
        convert_one(refused)[1]["output"],
        "Not run: outside the sandbox"
    );
}

#[test]
fn file_change_lists_the_changed_files() {
    let change = |path: &str, kind| FileUpdateChange {
        path: path.into(),
        kind,
        diff: "+x".into(),
    };
    let input = convert_one(ThreadItem::FileChange {
        id: "fc".into(),
        changes: vec![
            change("a.rs", PatchChangeKind::Add),
            change("b.rs", PatchChangeKind::Update { move_path: None }),
            change("c.rs", PatchChangeKind::Delete),
        ],
        status: PatchApplyStatus::Completed,
    });
    assert_eq!(input[0]["name"], "apply_patch");
    assert_eq!(
        input[1]["output"],
        "Updated the following files:\nA a.rs\nM b.rs\nD c.rs"
    );
}

#[test]
fn mcp_tool_call_answers_with_its_result_or_error() {
    let mcp = |result, error| ThreadItem::McpToolCall {
        plugin_id: Default::default(),
        read_only_hint: Default::default(),
        app_context: Default::default(),
        mcp_app_resource_uri: Default::default(),
        mcp_app_ui: Default::default(),
        id: "m".into(),
        server: "github".into(),
        tool: "search".into(),
        status: McpToolCallStatus::Completed,
        arguments: json!({"q": "spool"}),
        result,
        error,
        duration_ms: None,
    };
    let ok = convert_one(mcp(
        Some(Box::new(McpToolCallResult {
            meta: Default::default(),
            content: vec![json!({"type": "text", "text": "3 repos"})],
            structured_content: None,
        })),
        None,
    ));
    assert_eq!(ok[0]["name"], "mcp__github__search");
    assert_eq!(ok[0]["arguments"], "{\"q\":\"spool\"}");
    assert_eq!(ok[1]["output"], "3 repos");
    let failed = convert_one(mcp(
        None,
        Some(McpToolCallError {
            message: "rate limited".into(),
        }),
    ));
    assert_eq!(failed[1]["output"], "Error: rate limited");
}

#[test]
fn dynamic_tool_call_answers_with_its_content() {
    let input = convert_one(ThreadItem::DynamicToolCall {
        namespace: Default::default(),
        id: "d".into(),
        tool: "pick_color".into(),
        arguments: json!({}),
        status: DynamicToolCallStatus::Completed,
        content_items: Some(vec![
            DynamicToolCallOutputContentItem::InputText {
                text: "blue".into(),
            },
            DynamicToolCallOutputContentItem::InputImage {
                image_url: "https://x/swatch.png".into(),
            },
        ]),
        success: Some(true),
        duration_ms: None,
    });
    assert_eq!(input[0]["name"], "pick_color");
    assert_eq!(input[1]["output"], "blue\n[image: https://x/swatch.png]");
}

#[test]
fn handoff_and_plan_become_their_tool_calls() {
    let handoff = convert_one(ThreadItem::Handoff {
        id: "h".into(),
        from_agent: "Triage".into(),
        to_agent: "Billing Agent".into(),
        call_id: Some("call_h".into()),
    });
    assert_eq!(handoff[0]["name"], "transfer_to_billing_agent");
    assert_eq!(handoff[0]["call_id"], "call_h");
    assert_eq!(handoff[1]["output"], "Transferred to Billing Agent");

    let plan = convert_one(ThreadItem::Plan {
        id: "p".into(),
        text: "1. read\n2. write".into(),
    });
    assert_eq!(plan[0]["name"], "update_plan");
    assert_eq!(plan[1]["output"], "Plan updated");
}

#[test]
fn freeform_provider_calls_stay_freeform() {
    let r = with_provider(
        record(
            "t",
            1,
            ThreadItem::FileChange {
                id: "fc".into(),
                changes: Vec::new(),
                status: PatchApplyStatus::Completed,
            },
        ),
        json!({"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch",
               "input": "*** Begin Patch\n*** End Patch"}),
    );
    let input = convert(&[r]);
    assert_eq!(input[0]["type"], "custom_tool_call");
    assert_eq!(input[0]["input"], "*** Begin Patch\n*** End Patch");
    assert_eq!(input[1]["type"], "custom_tool_call_output");
    assert_eq!(input[1]["call_id"], "call_p");
}

#[test]
fn web_search_uses_the_provider_id_and_action() {
    let item = ThreadItem::WebSearch {
        results: Default::default(),
        id: "w".into(),
        query: "rust 1.95".into(),
        action: Some(WebSearchAction::OpenPage {
            url: Some("https://blog.rust-lang.org".into()),
        }),
    };
    let r = with_provider(
        record("t", 1, item.clone()),
        json!({"type": "web_search_call", "id": "ws_1", "status": "completed",
               "action": {"type": "search", "query": "rust 1.95 release"}}),
    );
    assert_eq!(
        convert(&[r]),
        [
            json!({"type": "web_search_call", "id": "ws_1", "status": "completed",
                "action": {"type": "search", "query": "rust 1.95 release"}})
        ]
    );
    // Without provider data the item's own action is used, in API shape.
    assert_eq!(
        convert_one(item)[0]["action"],
        json!({"type": "open_page", "url": "https://blog.rust-lang.org"})
    );
}
