//! Client → server requests by method: every method known by name,
//! unknown methods told apart from bad params, absent params read as an
//! empty object, spool's additions absent unless set, and responses in
//! Codex's field names. (How each request reads and writes back on the
//! wire is `client_requests_wire.rs`.)

use serde_json::{Value, json};
use spool_protocol::jsonrpc::{JsonRpcRequest, RequestId, error_codes};
use spool_protocol::*;

fn params_of(request: &ClientRequest) -> Value {
    serde_json::to_value(request).unwrap()["params"].clone()
}

#[test]
fn every_method_is_known_and_tagged_by_name() {
    assert_eq!(ClientRequest::METHODS.len(), 32);
    for method in ClientRequest::METHODS {
        // Empty params are read, or rejected as params, never as a method.
        match ClientRequest::from_method_params(method, json!({})) {
            Ok(request) => assert_eq!(request.method(), *method),
            Err(e) => assert_eq!(e.code(), -32602, "{method}: {e}"),
        }
    }
}

#[test]
fn unknown_method_is_not_invalid_params() {
    let request: JsonRpcRequest = serde_json::from_value(
        json!({"id": 30, "method": "thread/goal/get", "params": {"threadId": "thr_1"}}),
    )
    .unwrap();
    let error = ClientRequest::from_jsonrpc(&request).unwrap_err();
    assert_eq!(
        error,
        ClientRequestError::UnknownMethod {
            method: "thread/goal/get".into()
        }
    );
    assert_eq!(error.code(), error_codes::METHOD_NOT_FOUND);
    let reply = error.to_jsonrpc_error(request.id.clone());
    assert_eq!(reply.id, Some(RequestId::Integer(30)));
    assert_eq!(reply.error.code, -32601);
    assert!(reply.error.message.contains("thread/goal/get"));
}

#[test]
fn bad_params_of_a_known_method_are_invalid_params() {
    let cases = [
        ("thread/read", json!({"threadId": 5}), "invalid type"),
        (
            "turn/start",
            json!({"threadId": "t"}),
            "missing field `input`",
        ),
        (
            "thread/list",
            json!({"sortKey": "name"}),
            "unknown variant `name`",
        ),
        (
            "thread/start",
            json!({"sandbox": "sometimes"}),
            "unknown variant",
        ),
        (
            "thread/rollback",
            json!({"threadId": "t", "numTurns": -1}),
            "invalid value",
        ),
        ("thread/read", json!("thr_1"), "invalid type"),
        (
            "turn/start",
            json!({"threadId": "t", "input": [{"type": "video"}]}),
            "unknown variant",
        ),
    ];
    for (method, params, serde_says) in cases {
        let error = ClientRequest::from_method_params(method, params.clone()).unwrap_err();
        assert_eq!(
            error.code(),
            error_codes::INVALID_PARAMS,
            "{method} {params}"
        );
        let ClientRequestError::InvalidParams {
            method: named,
            message,
        } = &error
        else {
            panic!("{error:?}")
        };
        assert_eq!(*named, method);
        assert!(message.contains(serde_says), "{method}: {message}");
        assert!(error.to_string().contains(message.as_str()));
    }
}

#[test]
fn absent_params_read_as_empty_object() {
    let list: JsonRpcRequest =
        serde_json::from_value(json!({"id": 1, "method": "thread/list"})).unwrap();
    assert!(matches!(
        ClientRequest::from_jsonrpc(&list),
        Ok(ClientRequest::ThreadList(_))
    ));
    let read: JsonRpcRequest =
        serde_json::from_value(json!({"id": 2, "method": "thread/read", "params": null})).unwrap();
    let error = ClientRequest::from_jsonrpc(&read).unwrap_err();
    assert_eq!(error.code(), -32602);
    assert!(error.to_string().contains("missing field `threadId`"));
}

#[test]
fn spool_only_fields_are_absent_when_unset() {
    let capabilities = serde_json::to_value(InitializeCapabilities::default()).unwrap();
    assert_eq!(
        capabilities,
        json!({"experimentalApi": false, "requestAttestation": false,
               "optOutNotificationMethods": null})
    );
    let resume = params_of(&ClientRequest::ThreadResume(Box::new(ThreadResumeParams {
        thread_id: "t".into(),
        ..Default::default()
    })));
    assert!(resume.get("afterSeq").is_none(), "{resume}");
    for request in [
        ClientRequest::ThreadTurnsList(ThreadTurnsListParams {
            thread_id: "t".into(),
            ..Default::default()
        }),
        ClientRequest::ThreadItemsList(ThreadItemsListParams {
            thread_id: "t".into(),
            ..Default::default()
        }),
    ] {
        let params = params_of(&request);
        assert!(
            params.get("view").is_none() && params.get("tokens").is_none(),
            "{params}"
        );
    }
    let entry = serde_json::to_value(ThreadItemEntry {
        turn_id: "u".into(),
        item: ThreadItem::agent_message("m", "hi"),
        envelope: None,
    })
    .unwrap();
    assert_eq!(
        entry.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["turnId", "item"]
    );
}

#[test]
fn thread_responses_use_codex_field_names() {
    let thread = Thread::new("thr_1", "openai", "/repo", 1_700_000_000);
    let start = ThreadStartResponse {
        thread: thread.clone(),
        model: "gpt-5.1-codex".into(),
        model_provider: "openai".into(),
        service_tier: None,
        cwd: "/repo".into(),
        instruction_sources: vec!["/repo/AGENTS.md".into()],
        approval_policy: AskForApproval::OnRequest,
        approvals_reviewer: ApprovalsReviewer::User,
        sandbox: SandboxPolicy::from_mode(SandboxMode::WorkspaceWrite),
        reasoning_effort: None,
    };
    let mut wire = serde_json::to_value(&start).unwrap();
    assert_eq!(wire["thread"]["id"], "thr_1");
    wire.as_object_mut().unwrap().remove("thread");
    assert_eq!(
        wire,
        json!({"model": "gpt-5.1-codex", "modelProvider": "openai", "serviceTier": null,
               "cwd": "/repo", "instructionSources": ["/repo/AGENTS.md"],
               "approvalPolicy": "on-request", "approvalsReviewer": "user",
               "sandbox": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": false,
                           "excludeTmpdirEnvVar": false, "excludeSlashTmp": false},
               "reasoningEffort": null})
    );
    let revert = serde_json::to_value(ThreadRevertResponse {
        thread,
        turns_backwards_cursor: Some("t".into()),
        items_backwards_cursor: None,
    })
    .unwrap();
    assert_eq!(revert["turnsBackwardsCursor"], "t");
    assert_eq!(revert["itemsBackwardsCursor"], Value::Null);
    assert_eq!(
        serde_json::to_value(TurnSteerResponse {
            turn_id: "turn_5".into()
        })
        .unwrap(),
        json!({"turnId": "turn_5"})
    );
    assert_eq!(
        serde_json::to_value(TurnInterruptResponse {}).unwrap(),
        json!({})
    );
}
