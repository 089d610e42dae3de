//! The RunState fixture corpus: one directory per shipped version (every
//! snapshot in it must keep reading, forever) and negative snapshots that
//! must keep failing with the right error, without echoing their content.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use spool_core::llm::{HistoryCursor, PartKey, ReasoningIdPolicy};
use spool_core::run_state::{
    AgentKey, CURRENT_SCHEMA_VERSION, CallStatus, InterruptionKind, JsonErrorKind, RunState,
    RunStateError, SCHEMA_VERSIONS, SchemaVersion, StaticAgentGraph, ToolKey,
};
use spool_protocol::HistoryMode;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run_state")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

fn stem(path: &Path) -> &str {
    path.file_stem().unwrap().to_str().unwrap()
}

/// `(version, directory)` for every `v*/` directory of the corpus.
fn version_dirs() -> Vec<(String, PathBuf)> {
    let mut dirs: Vec<(String, PathBuf)> = fs::read_dir(corpus())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let version = name.strip_prefix('v')?.to_owned();
            Some((version, path))
        })
        .collect();
    dirs.sort();
    dirs
}

/// The agent graph each positive fixture was written against, by file
/// stem. A new fixture must add its graph here.
fn graph_for(stem: &str) -> StaticAgentGraph {
    match stem {
        "minimal" => StaticAgentGraph::new([("assistant", vec!["shell"])]),
        "resume_pending_approval" => resume_graph(),
        "paused_previous_response_id" => StaticAgentGraph::new([("assistant", vec!["shell"])]),
        "paused_mcp_approval" => {
            StaticAgentGraph::new([("assistant", vec!["shell", "mcp__files__delete"])])
        }
        other => panic!("fixture {other}.json has no graph in graph_for"),
    }
}

fn resume_graph() -> StaticAgentGraph {
    StaticAgentGraph::new([
        ("triage", vec!["transfer_to_coder"]),
        ("coder", vec!["shell", "read_file"]),
        ("coder", vec!["shell", "apply_patch"]),
    ])
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn every_shipped_version_has_a_fixture_directory_and_vice_versa() {
    let dirs: Vec<String> = version_dirs().into_iter().map(|(v, _)| v).collect();
    for (version, _) in SCHEMA_VERSIONS {
        assert!(
            dirs.iter().any(|dir| dir == version),
            "SCHEMA_VERSIONS has {version} but tests/fixtures/run_state/v{version}/ is missing"
        );
        assert!(
            corpus().join(format!("v{version}/minimal.json")).is_file(),
            "v{version}/ has no minimal.json"
        );
    }
    for dir in &dirs {
        assert!(
            SCHEMA_VERSIONS.iter().any(|(version, _)| version == dir),
            "fixture directory v{dir}/ is for a version not in SCHEMA_VERSIONS"
        );
    }
}

#[test]
fn every_positive_fixture_reads_checks_and_round_trips() {
    let mut seen = 0;
    for (version, dir) in version_dirs() {
        for path in json_files(&dir) {
            let name = path.display().to_string();
            let text = read(&path);
            let raw: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                raw["$schemaVersion"], version,
                "{name} is not a {version} snapshot"
            );
            let state = RunState::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            state
                .check_against(&graph_for(stem(&path)))
                .unwrap_or_else(|e| panic!("{name}: {e}"));

            let written = state.to_json();
            assert!(
                written.starts_with(&format!(
                    "{{\n  \"$schemaVersion\": \"{CURRENT_SCHEMA_VERSION}\""
                )),
                "{name}: $schemaVersion is not first:\n{written}"
            );
            let reread = RunState::from_json(&written).unwrap();
            assert_eq!(reread, state, "{name} does not round-trip");
            let via_serde: RunState = serde_json::from_str(&written).unwrap();
            assert_eq!(via_serde, state, "{name}: serde and from_json disagree");

            if version == CURRENT_SCHEMA_VERSION {
                // A current-version snapshot is exactly what the writer
                // writes: reader and writer agree on every field.
                let rewritten: Value = serde_json::from_str(&written).unwrap();
                assert_eq!(rewritten, raw, "{name}: writer and fixture differ");
            }
            seen += 1;
        }
    }
    assert!(seen >= SCHEMA_VERSIONS.len());
}

#[test]
fn resume_fixture_answers_the_resume_questions() {
    let state =
        RunState::from_json(&read(&corpus().join("v1.0/resume_pending_approval.json"))).unwrap();
    let coder1 = AgentKey::new("coder", 1);
    let shell = ToolKey::new(coder1.clone(), "shell");
    assert_eq!(state.current_agent, coder1);

    let pending = state.pending_interruptions();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].request_id, "req_3");
    assert_eq!(pending[0].call_id, "call_shell_3");
    assert_eq!(pending[0].tool, shell);
    assert_eq!(pending[0].kind, InterruptionKind::CommandExecution);
    assert_eq!(pending[0].summary, "cargo test --workspace");

    // The completed call must never run again; the others have not run.
    assert!(!state.needs_execution("call_patch_1"));
    assert_eq!(state.call_status("call_patch_1"), CallStatus::Completed);
    assert!(state.needs_execution("call_shell_2"));
    assert!(state.needs_execution("call_shell_3"));
    assert_eq!(state.unfinished_calls().count(), 0);

    // The decision binds to coder#1's shell and call_shell_2 only.
    assert_eq!(
        state.decision_for(&shell, "call_shell_2"),
        Some(&serde_json::json!({ "decision": "accept" }))
    );
    let other_coder_shell = ToolKey::new(AgentKey::new("coder", 0), "shell");
    assert_eq!(state.decision_for(&other_coder_shell, "call_shell_2"), None);
    assert_eq!(
        state.decision_for(&ToolKey::new(coder1, "apply_patch"), "call_shell_2"),
        None
    );
    assert_eq!(state.decision_for(&shell, "call_shell_3"), None);

    // The patch output is the one item the model has not seen yet.
    assert_eq!(state.unacknowledged_input().len(), 1);
    assert_eq!(
        state.unacknowledged_input()[0]["type"],
        "function_call_output"
    );
}

#[test]
fn resume_fails_closed_against_a_different_graph() {
    let state =
        RunState::from_json(&read(&corpus().join("v1.0/resume_pending_approval.json"))).unwrap();

    // The second `coder` is gone: the current agent is missing.
    let one_coder = StaticAgentGraph::new([("coder", vec!["shell", "apply_patch"])]);
    let error = state.check_against(&one_coder).unwrap_err();
    assert_eq!(
        error,
        RunStateError::MissingAgent {
            path: "currentAgent".into(),
            name: "coder".into(),
            occurrence: 1
        }
    );
    assert!(error.to_string().contains("agent `coder` (occurrence 1)"));

    // The two coders were reordered: occurrence 1 now lacks apply_patch.
    let reordered = StaticAgentGraph::new([
        ("coder", vec!["shell", "apply_patch"]),
        ("coder", vec!["shell", "read_file"]),
    ]);
    assert_eq!(
        state.check_against(&reordered).unwrap_err(),
        RunStateError::MissingTool {
            path: "calls[0].tool".into(),
            agent: "coder".into(),
            occurrence: 1,
            tool: "apply_patch".into()
        }
    );

    // The shell tool was removed: the approval's and interruption's tools
    // are missing too (the ledger entry is reported first).
    let no_shell = StaticAgentGraph::new([
        ("triage", vec!["transfer_to_coder"]),
        ("coder", vec!["shell", "read_file"]),
        ("coder", vec!["apply_patch"]),
    ]);
    let error = state.check_against(&no_shell).unwrap_err();
    assert!(
        matches!(&error, RunStateError::MissingTool { path, tool, .. }
            if path == "calls[1].tool" && tool == "shell"),
        "{error:?}"
    );

    let minimal = RunState::from_json(&read(&corpus().join("v1.0/minimal.json"))).unwrap();
    assert!(minimal.check_against(&resume_graph()).is_err());
}

#[test]
fn a_1_1_snapshot_carries_the_history_cursor_and_a_1_0_one_replays() {
    let state = RunState::from_json(&read(
        &corpus().join("v1.1/paused_previous_response_id.json"),
    ))
    .unwrap();
    assert_eq!(state.reasoning_ids, ReasoningIdPolicy::Omit);
    let history = state.history.expect("a provider-held history");
    assert_eq!(history.mode, HistoryMode::PreviousResponseId);
    assert_eq!(
        history.cursor,
        HistoryCursor {
            previous_response_id: Some("resp_second".into()),
            through_ordinal: 7,
            unsent: vec![PartKey {
                item_id: "item_steer".into(),
                part: 0
            }],
            held_calls: vec!["call_rm".into()],
        }
    );
    assert_eq!(history.conversation_id, None);

    // 1.0 knew neither: ids were kept and spool replayed its own log.
    for name in ["minimal", "resume_pending_approval"] {
        let old = RunState::from_json(&read(&corpus().join(format!("v1.0/{name}.json")))).unwrap();
        assert_eq!(old.reasoning_ids, ReasoningIdPolicy::Preserve);
        assert_eq!(old.history, None);
    }

    // A 1.1 field of the wrong shape names its path.
    let mut value: Value = serde_json::from_str(&read(
        &corpus().join("v1.1/paused_previous_response_id.json"),
    ))
    .unwrap();
    value["history"]["cursor"]["unsent"][0]["part"] = "first".into();
    let error = RunState::from_json(&value.to_string()).unwrap_err();
    assert!(
        matches!(&error, RunStateError::Field { version: "1.1", path, .. }
            if path == "history.cursor.unsent[0].part"),
        "{error:?}"
    );
    value["history"]["cursor"]["unsent"][0]["part"] = 0.into();
    value["history"]["mode"] = "replay".into();
    let error = RunState::from_json(&value.to_string()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("previousResponseId, conversationId"),
        "{error}"
    );
}

/// The error kind each negative fixture must produce.
fn expected_error(stem: &str, error: &RunStateError) -> bool {
    match stem {
        "future_version" => matches!(
            error,
            RunStateError::UnsupportedVersion { version, newer: true } if version == "9.0"
        ),
        "missing_version" => matches!(error, RunStateError::MissingVersion),
        "malformed" => matches!(
            error,
            RunStateError::NotJson {
                kind: JsonErrorKind::Eof,
                ..
            }
        ),
        "bad_version_format" => matches!(error, RunStateError::BadVersionFormat { .. }),
        "wrong_field_type" => matches!(
            error,
            RunStateError::Field { path, .. } if path == "calls[0].executed"
        ),
        other => panic!("negative fixture {other}.json has no expected error"),
    }
}

/// Every string value in a JSON value, keys excluded.
fn string_values(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| string_values(item, out)),
        Value::Object(map) => map.values().for_each(|item| string_values(item, out)),
        _ => {}
    }
}

/// Quoted strings in text that may not parse, keys (a string followed by
/// `:`) excluded; an unterminated last string counts too.
fn quoted_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else {
            out.push(after.to_owned());
            break;
        };
        rest = &after[end + 1..];
        if !rest.trim_start().starts_with(':') {
            out.push(after[..end].to_owned());
        }
    }
    out
}

#[test]
fn every_negative_fixture_fails_typed_and_never_echoes_content() {
    let files = json_files(&corpus().join("negative"));
    assert!(files.len() >= 5, "negative fixtures missing");
    for path in files {
        let name = stem(&path);
        let text = read(&path);
        let error = RunState::from_json(&text).expect_err(name);
        assert!(
            expected_error(name, &error),
            "{name}: wrong error {error:?}"
        );

        let display = error.to_string();
        let debug = format!("{error:?}");
        assert!(
            display.contains("supported RunState versions: 1.0, 1.1, 1.2"),
            "{name}: {display}"
        );

        let mut values = match serde_json::from_str::<Value>(&text) {
            Ok(value) => {
                let mut values = Vec::new();
                string_values(&value, &mut values);
                values
            }
            Err(_) => quoted_values(&text),
        };
        // A well-formed MAJOR.MINOR version is the one value an error may
        // repeat (it is short and cannot carry content).
        values.retain(|value| SchemaVersion::parse(value).is_none());
        assert!(!values.is_empty(), "{name}: no string values to check");
        for value in values {
            assert!(
                !display.contains(&value) && !debug.contains(&value),
                "{name}: error echoes {value:?}: {display} / {debug}"
            );
        }
        // serde_json would have quoted the secret; we must not.
        assert!(!display.contains("SECRET") && !debug.contains("SECRET"));
    }
}

#[test]
fn negative_messages_read_well() {
    let message = |stem: &str| {
        RunState::from_json(&read(&corpus().join(format!("negative/{stem}.json"))))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        message("future_version"),
        "RunState version 9.0 is not supported by this build (it is newer); \
         supported RunState versions: 1.0, 1.1, 1.2"
    );
    assert_eq!(
        message("wrong_field_type"),
        "RunState 1.0 field `calls[0].executed` has the wrong type \
         (expected a boolean, found a string); supported RunState versions: 1.0, 1.1, 1.2"
    );
    assert_eq!(
        message("bad_version_format"),
        "RunState `$schemaVersion` must be a string of the form MAJOR.MINOR, \
         found a string that is not MAJOR.MINOR; supported RunState versions: 1.0, 1.1, 1.2"
    );
}
