//! Client → server requests on the wire: each one read from the JSON a
//! Codex client sends (app-server protocol v2) and written back unchanged.
//! (Methods, errors and spool's additions: `client_requests_routing.rs`.)

use serde_json::{Value, json};
use spool_protocol::jsonrpc::JsonRpcMessage;
use spool_protocol::*;

/// Reads a request line as the server does, checks that writing the
/// request back gives the same JSON (Codex omits `"jsonrpc"`), and returns
/// it.
fn round_trip(wire: Value) -> ClientRequest {
    let JsonRpcMessage::Request(request) = JsonRpcMessage::parse(&wire.to_string()).unwrap() else {
        panic!("not a request: {wire}")
    };
    let parsed = ClientRequest::from_jsonrpc(&request).unwrap();
    assert_eq!(parsed.method(), wire["method"]);
    let mut back = serde_json::to_value(parsed.to_jsonrpc(request.id.clone())).unwrap();
    assert_eq!(back["jsonrpc"], "2.0");
    back.as_object_mut().unwrap().remove("jsonrpc");
    assert_eq!(back, wire, "written back differently");
    // The derived, method-tagged form reads the same.
    let tagged: ClientRequest =
        serde_json::from_value(json!({"method": wire["method"], "params": wire["params"]}))
            .unwrap();
    assert_eq!(tagged, parsed);
    parsed
}

/// Reads params that a client may send in a shorter form than Codex writes.
fn read(method: &str, params: Value) -> ClientRequest {
    ClientRequest::from_method_params(method, params).unwrap()
}

fn params_of(request: &ClientRequest) -> Value {
    serde_json::to_value(request).unwrap()["params"].clone()
}

#[test]
fn initialize() {
    let request = round_trip(json!({"id": 0, "method": "initialize", "params": {
        "clientInfo": {"name": "codex_vscode", "title": "Codex VS Code Extension", "version": "0.163.0"},
        "capabilities": {
            "experimentalApi": true,
            "requestAttestation": false,
            "optOutNotificationMethods": ["thread/started"]
        }
    }}));
    let ClientRequest::Initialize(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.client_info.name, "codex_vscode");
    assert!(params.capabilities.as_ref().unwrap().experimental_api);
    assert_eq!(params.spool_capabilities(), SpoolCapabilities::NONE);

    // The least a client sends: no title, no capabilities.
    let minimal = read(
        "initialize",
        json!({"clientInfo": {"name": "bot", "version": "1"}}),
    );
    assert_eq!(
        params_of(&minimal),
        json!({"clientInfo": {"name": "bot", "title": null, "version": "1"}})
    );
}

#[test]
fn initialize_with_spool_capabilities() {
    let request = round_trip(json!({"id": 1, "method": "initialize", "params": {
        "clientInfo": {"name": "ui", "title": null, "version": "2"},
        "capabilities": {
            "experimentalApi": false,
            "requestAttestation": false,
            "optOutNotificationMethods": null,
            "spool": {"seq": true, "views": true, "applicationItems": false, "provenance": true}
        }
    }}));
    let ClientRequest::Initialize(params) = request else {
        panic!("{request:?}")
    };
    let wanted = params.spool_capabilities();
    assert!(wanted.seq && wanted.views && wanted.provenance && !wanted.application_items);
    // Flags left out are off.
    let partial = read(
        "initialize",
        json!({"clientInfo": {"name": "ui", "version": "2"}, "capabilities": {"spool": {"seq": true}}}),
    );
    let ClientRequest::Initialize(partial) = partial else {
        unreachable!()
    };
    assert_eq!(
        partial.spool_capabilities(),
        SpoolCapabilities {
            seq: true,
            ..SpoolCapabilities::NONE
        }
    );
}

#[test]
fn initialize_response() {
    let response = InitializeResponse {
        user_agent: "spool/0.1.0".into(),
        codex_home: "/home/u/.spool".into(),
        platform_family: "unix".into(),
        platform_os: "linux".into(),
        spool: None,
    };
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"userAgent": "spool/0.1.0", "codexHome": "/home/u/.spool",
               "platformFamily": "unix", "platformOs": "linux"})
    );
    let granted = InitializeResponse {
        spool: Some(SpoolCapabilities::ALL.intersect(SpoolCapabilities {
            seq: true,
            ..SpoolCapabilities::NONE
        })),
        ..response
    };
    assert_eq!(
        serde_json::to_value(&granted).unwrap()["spool"],
        json!({"seq": true, "views": false, "applicationItems": false, "provenance": false})
    );
}

#[test]
fn thread_start() {
    let request = round_trip(json!({"id": 2, "method": "thread/start", "params": {
        "model": "gpt-5.1-codex",
        "modelProvider": "openai",
        "serviceTier": null,
        "cwd": "/repo",
        "approvalPolicy": "on-request",
        "approvalsReviewer": "user",
        "sandbox": "workspace-write",
        "config": {"model_reasoning_effort": "high"},
        "serviceName": null,
        "baseInstructions": null,
        "developerInstructions": "Be brief.",
        "personality": "pragmatic",
        "ephemeral": null,
        "historyMode": "paginated",
        "sessionStartSource": "startup",
        "threadSource": null,
        "dynamicTools": [
            {"type": "function", "name": "lookup", "description": "Find a customer",
             "inputSchema": {"type": "object"}},
            {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
                {"type": "function", "name": "note", "description": "Add a note",
                 "inputSchema": {"type": "object"}, "deferLoading": true}
            ]}
        ]
    }}));
    let ClientRequest::ThreadStart(params) = request else {
        panic!("{request:?}")
    };
    // `null` clears the tier; omitted leaves it alone.
    assert_eq!(params.service_tier, Some(None));
    assert_eq!(params.sandbox, Some(SandboxMode::WorkspaceWrite));
    assert_eq!(params.approval_policy, Some(AskForApproval::OnRequest));
    assert_eq!(params.dynamic_tools.as_ref().unwrap().len(), 2);
}

#[test]
fn thread_start_from_empty_params_writes_codex_nulls() {
    let request = read("thread/start", json!({}));
    assert_eq!(
        params_of(&request),
        json!({"model": null, "modelProvider": null, "cwd": null, "approvalPolicy": null,
               "approvalsReviewer": null, "sandbox": null, "config": null, "serviceName": null,
               "baseInstructions": null, "developerInstructions": null, "personality": null,
               "ephemeral": null, "historyMode": null, "sessionStartSource": null,
               "threadSource": null, "dynamicTools": null}),
        "serviceTier is omitted, every other optional field is null"
    );
    let ClientRequest::ThreadStart(params) = read("thread/start", json!({"serviceTier": "flex"}))
    else {
        unreachable!()
    };
    assert_eq!(params.service_tier, Some(Some("flex".to_owned())));
}

#[test]
fn thread_start_reads_legacy_flat_dynamic_tools() {
    let ClientRequest::ThreadStart(params) = read(
        "thread/start",
        json!({"dynamicTools": [
            {"namespace": "crm", "name": "find", "description": "d", "inputSchema": {}},
            {"name": "plain", "description": "p", "inputSchema": {}, "exposeToContext": false},
            {"namespace": "crm", "name": "note", "description": "n", "inputSchema": {}}
        ]}),
    ) else {
        unreachable!()
    };
    let tools = serde_json::to_value(params.dynamic_tools).unwrap();
    assert_eq!(
        tools,
        json!([
            {"type": "namespace", "name": "crm", "description": "", "tools": [
                {"type": "function", "name": "find", "description": "d", "inputSchema": {}},
                {"type": "function", "name": "note", "description": "n", "inputSchema": {}}
            ]},
            {"type": "function", "name": "plain", "description": "p", "inputSchema": {},
             "deferLoading": true}
        ])
    );
    let mixed = ClientRequest::from_method_params(
        "thread/start",
        json!({"dynamicTools": [
            {"type": "function", "name": "a", "description": "", "inputSchema": {}},
            {"name": "b", "description": "", "inputSchema": {}}
        ]}),
    )
    .unwrap_err();
    assert_eq!(mixed.code(), -32602);
}

#[test]
fn thread_resume() {
    let request = round_trip(json!({"id": "r1", "method": "thread/resume", "params": {
        "threadId": "thr_1",
        "model": null,
        "modelProvider": null,
        "cwd": null,
        "approvalPolicy": "never",
        "approvalsReviewer": null,
        "sandbox": "read-only",
        "config": null,
        "baseInstructions": null,
        "developerInstructions": null,
        "personality": null,
        "excludeTurns": true
    }}));
    let ClientRequest::ThreadResume(params) = request else {
        panic!("{request:?}")
    };
    assert!(params.exclude_turns);
    assert_eq!(params.after_seq, None);

    // spool's cursor, when a client sends it.
    let request = round_trip(json!({"id": "r2", "method": "thread/resume", "params": {
        "threadId": "thr_1", "model": null, "modelProvider": null, "cwd": null,
        "approvalPolicy": null, "approvalsReviewer": null, "sandbox": null, "config": null,
        "baseInstructions": null, "developerInstructions": null, "personality": null,
        "afterSeq": 41
    }}));
    assert!(matches!(request, ClientRequest::ThreadResume(ref p) if p.after_seq == Some(41)));
}

#[test]
fn thread_fork() {
    let request = round_trip(json!({"id": 3, "method": "thread/fork", "params": {
        "threadId": "thr_1",
        "lastTurnId": "turn_3",
        "beforeTurnId": null,
        "model": null,
        "modelProvider": null,
        "cwd": null,
        "approvalPolicy": null,
        "approvalsReviewer": null,
        "sandbox": null,
        "config": null,
        "baseInstructions": null,
        "developerInstructions": null,
        "ephemeral": true,
        "threadSource": null
    }}));
    let ClientRequest::ThreadFork(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.last_turn_id.as_deref(), Some("turn_3"));
    assert!(params.ephemeral && !params.exclude_turns);
}

#[test]
fn thread_list() {
    let request = round_trip(json!({"id": 4, "method": "thread/list", "params": {
        "cursor": null,
        "limit": 25,
        "sortKey": "updated_at",
        "sortDirection": "desc",
        "modelProviders": null,
        "sourceKinds": ["cli", "vscode", "appServer", "subAgentThreadSpawn"],
        "archived": true,
        "sectionId": null,
        "cwd": "/repo",
        "searchTerm": "flaky test"
    }}));
    let ClientRequest::ThreadList(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.sort_key, Some(ThreadSortKey::UpdatedAt));
    assert_eq!(params.archived, Some(true));
    assert_eq!(params.section_id, Some(None));
    assert_eq!(
        params.cwd,
        Some(ThreadListCwdFilter::One("/repo".to_owned()))
    );

    let ClientRequest::ThreadList(params) = read(
        "thread/list",
        json!({"sortKey": "created_at", "cwd": ["/a", "/b"], "useStateDbOnly": true}),
    ) else {
        unreachable!()
    };
    assert_eq!(
        params.cwd,
        Some(ThreadListCwdFilter::Many(vec!["/a".into(), "/b".into()]))
    );
    assert!(params.use_state_db_only);
    assert_eq!(params.section_id, None);
}

#[test]
fn thread_read() {
    let request = round_trip(json!({"id": 5, "method": "thread/read",
        "params": {"threadId": "thr_1", "includeTurns": true}}));
    assert!(matches!(request, ClientRequest::ThreadRead(ref p) if p.include_turns));
    // `includeTurns: false` is not written.
    let request = round_trip(json!({"id": 6, "method": "thread/read",
        "params": {"threadId": "thr_1"}}));
    assert!(matches!(request, ClientRequest::ThreadRead(ref p) if !p.include_turns));
}

#[test]
fn thread_turns_list() {
    let request = round_trip(json!({"id": 7, "method": "thread/turns/list", "params": {
        "threadId": "thr_1", "cursor": "c_9", "limit": 10, "sortDirection": "desc",
        "itemsView": "summary"
    }}));
    let ClientRequest::ThreadTurnsList(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.items_view, Some(TurnItemsView::Summary));
    assert_eq!((params.view, params.tokens), (None, None));

    let request = round_trip(json!({"id": 8, "method": "thread/turns/list", "params": {
        "threadId": "thr_1", "cursor": null, "limit": null, "sortDirection": null,
        "itemsView": "full", "view": "all", "tokens": 4000
    }}));
    assert!(
        matches!(request, ClientRequest::ThreadTurnsList(ref p) if p.view == Some(ItemsView::All))
    );
}

#[test]
fn thread_items_list() {
    let request = round_trip(json!({"id": 9, "method": "thread/items/list", "params": {
        "threadId": "thr_1", "turnId": "turn_2", "cursor": null, "limit": 100,
        "sortDirection": "asc"
    }}));
    let ClientRequest::ThreadItemsList(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.sort_direction, Some(SortDirection::Asc));
    assert_eq!((params.view, params.tokens), (None, None));

    let request = round_trip(json!({"id": 10, "method": "thread/items/list", "params": {
        "threadId": "thr_1", "turnId": null, "cursor": "c", "limit": null,
        "sortDirection": "desc", "view": "llm", "tokens": 8000
    }}));
    let ClientRequest::ThreadItemsList(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.view, Some(ItemsView::Llm));
    assert_eq!(params.tokens, Some(8000));
}

#[test]
fn thread_archive_unarchive_name_revert_rollback() {
    round_trip(json!({"id": 11, "method": "thread/archive", "params": {"threadId": "thr_1"}}));
    round_trip(json!({"id": 12, "method": "thread/unarchive", "params": {"threadId": "thr_1"}}));
    let request = round_trip(json!({"id": 13, "method": "thread/name/set",
        "params": {"threadId": "thr_1", "name": "Fix the flaky test"}}));
    assert!(
        matches!(request, ClientRequest::ThreadSetName(ref p) if p.name == "Fix the flaky test")
    );
    let request = round_trip(json!({"id": 14, "method": "thread/revert",
        "params": {"threadId": "thr_1", "beforeTurnId": "turn_4"}}));
    assert!(matches!(request, ClientRequest::ThreadRevert(ref p) if p.before_turn_id == "turn_4"));
    let request = round_trip(json!({"id": 15, "method": "thread/rollback",
        "params": {"threadId": "thr_1", "numTurns": 2}}));
    assert!(matches!(request, ClientRequest::ThreadRollback(ref p) if p.num_turns == 2));
}

#[test]
fn turn_start() {
    let request = round_trip(json!({"id": 16, "method": "turn/start", "params": {
        "threadId": "thr_1",
        "clientUserMessageId": null,
        "input": [
            {"type": "text", "text": "Why does this fail?", "text_elements": []},
            {"type": "localImage", "path": "/tmp/screenshot.png"}
        ],
        "turnTrigger": null,
        "cwd": "/repo",
        "approvalPolicy": "untrusted",
        "approvalsReviewer": "guardian_subagent",
        "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/tmp/build"],
                          "networkAccess": true, "excludeTmpdirEnvVar": false,
                          "excludeSlashTmp": false},
        "model": "gpt-5.1-codex",
        "serviceTier": "flex",
        "serviceTierForTurn": null,
        "effort": "high",
        "summary": "concise",
        "personality": null,
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    }}));
    let ClientRequest::TurnStart(params) = request else {
        panic!("{request:?}")
    };
    assert_eq!(params.input[0].as_text(), Some("Why does this fail?"));
    assert_eq!(
        params.approvals_reviewer,
        Some(ApprovalsReviewer::AutoReview)
    );
    assert_eq!(
        params.sandbox_policy.as_ref().map(SandboxPolicy::mode),
        Some(SandboxMode::WorkspaceWrite)
    );
    assert_eq!(params.service_tier, Some(Some("flex".to_owned())));
}

#[test]
fn turn_start_as_a_typescript_client_sends_it() {
    // Optional fields left out, the camelCase `textElements`, and the newer
    // spelling of the automatic reviewer.
    let ClientRequest::TurnStart(params) = read(
        "turn/start",
        json!({"threadId": "thr_1", "input": [{"type": "text", "text": "hi", "textElements": []}],
               "approvalsReviewer": "auto_review",
               "sandboxPolicy": {"type": "readOnly"},
               "collaborationMode": {"mode": "plan"}}),
    ) else {
        unreachable!()
    };
    assert_eq!(params.input, vec![UserInput::text("hi")]);
    assert_eq!(
        params.approvals_reviewer,
        Some(ApprovalsReviewer::AutoReview)
    );
    assert_eq!(
        params.sandbox_policy,
        Some(SandboxPolicy::ReadOnly {
            network_access: false
        })
    );
    let written = params_of(&ClientRequest::TurnStart(params));
    assert_eq!(written["approvalsReviewer"], "guardian_subagent");
    assert_eq!(
        written["sandboxPolicy"],
        json!({"type": "readOnly", "networkAccess": false})
    );
    assert!(written.get("serviceTier").is_none());
    assert!(written.get("collaborationMode").is_none(), "not modelled");
}

#[test]
fn turn_steer_and_interrupt() {
    let request = round_trip(json!({"id": 17, "method": "turn/steer", "params": {
        "threadId": "thr_1",
        "clientUserMessageId": "msg_7",
        "input": [{"type": "text", "text": "use the other branch", "text_elements": []}],
        "expectedTurnId": "turn_5"
    }}));
    assert!(matches!(request, ClientRequest::TurnSteer(ref p) if p.expected_turn_id == "turn_5"));
    let request = round_trip(json!({"id": 18, "method": "turn/interrupt",
        "params": {"threadId": "thr_1", "turnId": "turn_5"}}));
    assert_eq!(request.thread_id(), Some("thr_1"));
}
