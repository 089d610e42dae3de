//! Wire details that Codex app-server v2 clients depend on (checked against
//! Codex's generated types; see docs/internals/item-lifecycle.md).

use serde_json::{Value, json};
use spool_protocol::*;

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

#[test]
fn text_input_writes_text_elements_in_snake_case() {
    let v = to_json(&UserInput::text("hi"));
    assert_eq!(
        v,
        json!({"type": "text", "text": "hi", "text_elements": []})
    );
    // The camelCase spelling is still read.
    let back: UserInput =
        serde_json::from_value(json!({"type": "text", "text": "a", "textElements": []})).unwrap();
    assert_eq!(back, UserInput::text("a"));
}

#[test]
fn image_input_by_url_or_file_id() {
    let by_file: UserInput =
        serde_json::from_value(json!({"type": "image", "fileId": "file_1"})).unwrap();
    assert!(
        matches!(by_file, UserInput::Image { url: None, file_id: Some(ref f), .. } if f == "file_1")
    );
    let by_url = to_json(&UserInput::Image {
        url: Some("https://x/y.png".into()),
        file_id: None,
        detail: None,
    });
    assert_eq!(by_url, json!({"type": "image", "url": "https://x/y.png"}));
}

#[test]
fn patch_update_writes_move_path_in_snake_case() {
    let v = to_json(&PatchChangeKind::Update { move_path: None });
    assert_eq!(v, json!({"type": "update", "move_path": null}));
}

#[test]
fn optional_codex_fields_are_explicit_nulls() {
    let v = to_json(&ThreadItem::agent_message("m", "hi"));
    assert_eq!(
        v,
        json!({"type": "agentMessage", "id": "m", "text": "hi", "phase": null,
               "memoryCitation": null, "delivery": null, "questions": null})
    );
    let v = to_json(&ThreadItem::CommandExecution {
        id: "c".into(),
        plugin_id: None,
        script_path: None,
        command: "ls".into(),
        cwd: "/".into(),
        process_id: None,
        source: CommandExecutionSource::Agent,
        status: CommandExecutionStatus::InProgress,
        command_actions: vec![],
        aggregated_output: None,
        exit_code: None,
        duration_ms: None,
    });
    for key in [
        "pluginId",
        "scriptPath",
        "processId",
        "aggregatedOutput",
        "exitCode",
        "durationMs",
    ] {
        assert_eq!(v[key], Value::Null, "{key} is written as null");
        assert!(v.as_object().unwrap().contains_key(key), "{key} is present");
    }
    assert_eq!(v["source"], "agent");
    assert_eq!(v["status"], "inProgress");
}

#[test]
fn item_notifications_carry_codex_timestamps() {
    let started = to_json(&ItemStartedNotification {
        item: ThreadItem::agent_message("m", ""),
        thread_id: "t".into(),
        turn_id: "u".into(),
        started_at_ms: 5,
        envelope: None,
    });
    assert_eq!(started["startedAtMs"], 5);
    assert!(
        started.get("envelope").is_none(),
        "spool's envelope is absent unless set"
    );
    let completed = to_json(&ItemCompletedNotification {
        item: ThreadItem::agent_message("m", "x"),
        thread_id: "t".into(),
        turn_id: "u".into(),
        completed_at_ms: 6,
        envelope: None,
    });
    assert_eq!(completed["completedAtMs"], 6);
}

#[test]
fn thread_history_mode_is_codexs_and_spools_owner_is_separate() {
    let mut thread = Thread::new("t", "local", "/", 1);
    let v = to_json(&thread);
    assert_eq!(v["historyMode"], "legacy");
    assert_eq!(v["sessionId"], "t");
    assert_eq!(v["source"], "appServer");
    assert_eq!(v["forkedFromId"], Value::Null);
    assert_eq!(v["model"], Value::Null);
    assert!(v.get("historyOwner").is_none());
    thread.history_owner = Some(HistoryMode::PreviousResponseId);
    assert_eq!(to_json(&thread)["historyOwner"], "previousResponseId");
}

#[test]
fn thread_name_updated_skips_a_missing_name() {
    let v = to_json(&ThreadNameUpdatedNotification {
        thread_id: "t".into(),
        thread_name: None,
    });
    assert_eq!(v, json!({"threadId": "t"}));
}

#[test]
fn turn_error_and_usage_have_codex_fields() {
    let e = to_json(&TurnError::new("boom", Some(CodexErrorInfo::Unauthorized)));
    assert_eq!(
        e,
        json!({"message": "boom", "codexErrorInfo": "unauthorized", "additionalDetails": null, "misalignment": null})
    );
    let u = to_json(&TokenUsageBreakdown::default());
    assert_eq!(u["cacheWriteInputTokens"], 0);
    let http = to_json(&CodexErrorInfo::HttpConnectionFailed {
        http_status_code: Some(502),
    });
    assert_eq!(
        http,
        json!({"httpConnectionFailed": {"httpStatusCode": 502}})
    );
}

#[test]
fn unknown_web_search_actions_read_as_other() {
    let a: WebSearchAction = serde_json::from_value(json!({"type": "somethingNew"})).unwrap();
    assert_eq!(a, WebSearchAction::Other);
}
