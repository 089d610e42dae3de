//! `llm_view` conversion: each item kind → Responses API input items.

mod views_support;

use serde_json::{Value, json};
use spool_core::ItemRecord;
use spool_core::llm::{LlmViewOptions, ReasoningIdPolicy, llm_view};
use spool_protocol::{
    CommandExecutionStatus, DynamicToolCallOutputContentItem, DynamicToolCallStatus,
    FileUpdateChange, FunctionCallStatus, ItemStatus, McpToolCallError, McpToolCallResult,
    McpToolCallStatus, PatchApplyStatus, PatchChangeKind, ThreadItem, UserInput, WebSearchAction,
};
use views_support::{
    agent, function_call, json as to_json, record, user, with_provider, with_status,
};

fn convert(records: &[ItemRecord]) -> Vec<Value> {
    to_json(&llm_view(records, &LlmViewOptions::default()).input)
}

fn convert_one(item: ThreadItem) -> Vec<Value> {
    convert(&[record("t", 1, item)])
}

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
fn user_message_becomes_user_input_parts() {
    let item = ThreadItem::UserMessage {
        client_id: Default::default(),
        id: "u".into(),
        content: vec![
            UserInput::text("look"),
            UserInput::Image {
                detail: Default::default(),
                file_id: Default::default(),
                url: Some("https://x/cat.png".into()),
            },
            UserInput::LocalImage {
                detail: Default::default(),
                path: "/tmp/dog.png".into(),
            },
            UserInput::Skill {
                name: "deploy".into(),
                path: "skills/deploy.md".into(),
            },
            UserInput::Mention {
                name: "main.rs".into(),
                path: "src/main.rs".into(),
            },
        ],
    };
    assert_eq!(
        convert_one(item),
        [json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://x/cat.png"},
            {"type": "input_text", "text": "[local image: /tmp/dog.png]"},
            {"type": "input_text", "text": "[skill: deploy (skills/deploy.md)]"},
            {"type": "input_text", "text": "[mention: main.rs (src/main.rs)]"},
        ]})]
    );
}

#[test]
fn agent_message_becomes_assistant_output_text_without_ids_or_status() {
    let r = with_provider(record("t", 1, agent("a", "Paris.")), json!({"id": "msg_1"}));
    assert_eq!(
        convert(&[r]),
        [json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]})]
    );
    assert!(
        convert_one(agent("a", "")).is_empty(),
        "empty messages say nothing"
    );
}

fn reasoning_record(ordinal: u64, provider: Value, summary: &[&str]) -> ItemRecord {
    with_provider(
        record(
            "t",
            ordinal,
            ThreadItem::Reasoning {
                id: format!("r{ordinal}"),
                summary: summary.iter().map(|s| s.to_string()).collect(),
                content: vec!["raw thought".into()],
            },
        ),
        provider,
    )
}

#[test]
fn reasoning_keeps_the_provider_id_and_encrypted_content_by_default() {
    let records = [
        reasoning_record(
            1,
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA"}),
            &["**Plan**"],
        ),
        record("t", 2, agent("a", "done")),
    ];
    let input = convert(&records);
    assert_eq!(
        input[0],
        json!({"type": "reasoning", "id": "rs_1",
               "summary": [{"type": "summary_text", "text": "**Plan**"}],
               "content": [{"type": "reasoning_text", "text": "raw thought"}],
               "encrypted_content": "gAAAA"})
    );
    assert_eq!(input.len(), 2);
}

#[test]
fn reasoning_id_policy_omit_strips_ids_and_drops_empty_items() {
    let records = [
        reasoning_record(
            1,
            json!({"id": "rs_1", "encrypted_content": "gAAAA"}),
            &["s"],
        ),
        // Only an id: nothing left once the id goes.
        with_provider(
            record(
                "t",
                2,
                ThreadItem::Reasoning {
                    id: "r2".into(),
                    summary: Vec::new(),
                    content: Vec::new(),
                },
            ),
            json!({"id": "rs_2"}),
        ),
        record("t", 3, agent("a", "done")),
    ];
    let options = LlmViewOptions {
        token_budget: None,
        reasoning_ids: ReasoningIdPolicy::Omit,
        ..LlmViewOptions::default()
    };
    let input = to_json(&llm_view(&records, &options).input);
    assert_eq!(input.len(), 2);
    assert_eq!(input[0]["type"], "reasoning");
    assert!(input[0].get("id").is_none(), "{}", input[0]);
    assert_eq!(input[0]["encrypted_content"], "gAAAA");
    assert_eq!(input[1]["role"], "assistant");

    // Preserve keeps the id-only item: the id points at stored reasoning.
    let input = convert(&records);
    assert_eq!(input.len(), 3);
    assert_eq!(input[1]["id"], "rs_2");
}

#[test]
fn reasoning_with_an_id_and_nothing_after_it_is_dropped() {
    // Its call is still running, so the call is left out, and the API would
    // reject reasoning without the item it led to.
    let mut running = function_call("f", "call_1", "");
    if let ThreadItem::FunctionCall { status, output, .. } = &mut running {
        *status = FunctionCallStatus::InProgress;
        *output = None;
    }
    let records = [
        reasoning_record(1, json!({"id": "rs_1"}), &["s"]),
        with_status(record("t", 2, running), ItemStatus::InProgress),
    ];
    assert!(convert(&records).is_empty());
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

#[test]
fn context_becomes_a_developer_message() {
    assert_eq!(
        convert_one(ThreadItem::Context {
            id: "c".into(),
            text: "Today is Monday.".into(),
        }),
        [json!({"type": "message", "role": "developer",
                "content": [{"type": "input_text", "text": "Today is Monday."}]})]
    );
}

#[test]
fn compaction_replaces_everything_before_it() {
    let records = [
        record("t1", 1, user("u1", "old question")),
        record("t1", 2, agent("a1", "old answer")),
        record("t2", 3, user("u2", "same turn, before the compaction")),
        record(
            "t2",
            4,
            ThreadItem::ContextCompaction {
                id: "cc".into(),
                summary: Some("They asked an old question.".into()),
                replaces: None,
            },
        ),
        record("t2", 5, agent("a2", "after")),
    ];
    let view = llm_view(&records, &LlmViewOptions::default());
    assert_eq!(
        to_json(&view.input),
        [
            json!({"type": "message", "role": "user", "content": [{"type": "input_text",
                   "text": "Summary of the conversation so far:\nThey asked an old question."}]}),
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "after", "annotations": []}]}),
        ]
    );
    assert_eq!((view.turns_included, view.turns_omitted), (1, 0));

    // A compaction still in progress replaces nothing yet.
    let mut unfinished = records.clone();
    unfinished[3].envelope.status = ItemStatus::InProgress;
    assert_eq!(
        llm_view(&unfinished, &LlmViewOptions::default())
            .input
            .len(),
        4
    );
}

#[test]
fn ui_and_bookkeeping_items_produce_nothing() {
    let items = [
        ThreadItem::Component {
            id: "2".into(),
            name: "Card".into(),
            props: json!({}),
        },
        ThreadItem::Container {
            id: "3".into(),
            title: None,
            children: vec!["2".into()],
        },
        ThreadItem::Status {
            id: "4".into(),
            text: "working".into(),
        },
        ThreadItem::StateChange {
            id: "5".into(),
            key: "k".into(),
            value: json!(1),
        },
        ThreadItem::ResourceChange {
            id: "6".into(),
            uri: "file:///x".into(),
            change: "modified".into(),
        },
        ThreadItem::StepError {
            id: "7".into(),
            message: "retrying".into(),
        },
        ThreadItem::Error {
            id: "8".into(),
            message: "boom".into(),
        },
        ThreadItem::EnteredReviewMode {
            id: "9".into(),
            review: "r".into(),
        },
    ];
    for item in items {
        // Even when a producer puts them in the model's audience.
        let mut r = record("t", 1, item);
        r.envelope.audience = spool_protocol::Audience::BOTH;
        let view = llm_view(&[r], &LlmViewOptions::default());
        assert!(view.input.is_empty(), "{:?}", view.input);
        assert_eq!(view.turns_included, 0);
    }
}

#[test]
fn a_finished_review_reaches_the_model_as_its_findings_and_an_unfinished_one_not_at_all() {
    let exited = |review: &str| {
        record(
            "t",
            1,
            ThreadItem::ExitedReviewMode {
                id: "10".into(),
                review: review.into(),
            },
        )
    };
    let view = llm_view(&[exited("x.rs:3 leaks a file")], &LlmViewOptions::default());
    assert_eq!(
        serde_json::to_value(&view.input).unwrap(),
        json!([{
            "type": "message",
            "role": "user",
            "content": [{
                "type": "input_text",
                "text": format!("{}x.rs:3 leaks a file", spool_core::llm::REVIEW_PREFIX)
            }]
        }])
    );
    let empty = llm_view(&[exited("")], &LlmViewOptions::default());
    assert!(empty.input.is_empty(), "{:?}", empty.input);
}

#[test]
fn records_outside_the_model_audience_are_left_out() {
    let mut hidden = record("t", 1, user("u", "secret"));
    hidden.envelope.audience = spool_protocol::Audience::CLIENT_ONLY;
    assert!(convert(&[hidden, record("t", 2, agent("a", "ok"))]).len() == 1);
}

#[test]
fn a_viewed_image_goes_to_the_model_as_its_call_output_and_image_input() {
    let r = with_provider(
        record(
            "t",
            1,
            ThreadItem::ImageView {
                id: "img".into(),
                path: "/w/a.png".into(),
            },
        ),
        json!({"type": "function_call", "call_id": "call_7", "name": "view_image",
               "arguments": "{\"path\":\"a.png\"}", "imageUrl": "data:image/png;base64,AAAA"}),
    );
    assert_eq!(
        convert(&[r]),
        [
            json!({"type": "function_call", "call_id": "call_7", "name": "view_image",
                   "arguments": "{\"path\":\"a.png\"}"}),
            json!({"type": "function_call_output", "call_id": "call_7",
                   "output": "Attached the image /w/a.png."}),
            json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Image /w/a.png:"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}),
        ]
    );
    // Without a recorded image or call there is nothing to send.
    let bare = record(
        "t",
        1,
        ThreadItem::ImageView {
            id: "img".into(),
            path: "/w/a.png".into(),
        },
    );
    assert!(convert(&[bare]).is_empty());
}
