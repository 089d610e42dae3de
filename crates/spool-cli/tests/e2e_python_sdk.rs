//! The official Codex Python SDK (PyPI `openai-codex`, module `openai_codex`) drives
//! `spool app-server` over stdio with a scripted model on a real socket: the program in
//! `tests/peers/python_sdk.py` asserts each SDK call (metadata, models, account, thread
//! start/read/name/list/fork/resume/archive/unarchive, two runs, a command behind an
//! approval the SDK accepts by default); this test checks what only the outside can see:
//! what the model was sent, and that the command's side effect happened exactly once.
//!
//! The SDK comes from `scripts/codex-peers.sh` (a virtualenv cached outside the clone). A
//! missing install fails the test; `SPOOL_SKIP_PEERS=1` skips it instead.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::Home;

/// The SDK's own timeouts are unbounded; the program times each step out at 60 s, and this
/// bounds the whole run in case Python itself wedges.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The virtualenv's python, or `None` when the peers are deliberately skipped.
fn peers_python() -> Option<PathBuf> {
    if std::env::var("SPOOL_SKIP_PEERS").as_deref() == Ok("1") {
        eprintln!("e2e_python_sdk: skipped (SPOOL_SKIP_PEERS=1): the Codex Python SDK was not run");
        return None;
    }
    let script = repo_root().join("scripts/codex-peers.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("python")
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "the Codex Python SDK is not installed: run scripts/codex-peers.sh install \
         (or set SPOOL_SKIP_PEERS=1 to skip this test)\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()))
}

/// `(role, text)` of each message in a Responses API request's `input`.
fn messages(request_body: &Value) -> Vec<(String, String)> {
    request_body["input"]
        .as_array()
        .unwrap_or_else(|| panic!("no input array: {request_body}"))
        .iter()
        .filter(|item| item["type"] == "message")
        .map(|item| {
            let text: String = item["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|part| part["text"].as_str())
                .collect();
            (item["role"].as_str().unwrap_or("").to_owned(), text)
        })
        .collect()
}

fn message(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

#[tokio::test]
async fn the_codex_python_sdk_drives_spool_app_server() {
    let Some(python) = peers_python() else {
        return;
    };
    let home = Home::new();
    let work = tempfile::tempdir().unwrap();
    // Outside the thread's workspace, so only the approved escalation can write it: the
    // approval is what lets the command run, not the sandbox.
    let outside = tempfile::tempdir().unwrap();
    let side_effect = outside.path().join("ran.txt");
    let append = format!("echo ran >> '{}'", side_effect.display());

    // Kept in step with the script in python_sdk.py's docstring.
    let model = ScriptedServer::with_responses([
        message_response("r1", &["answer ", "one"]),
        message_response("r2", &["answer two"]),
        calls_response(
            "r3",
            &[(
                "call_1",
                "shell",
                json!({"command": ["sh", "-c", append], "sandbox_permissions": "require_escalated"}),
            )],
        ),
        message_response("r4", &["appended"]),
        message_response("r5", &["SUMMARY: three turns so far"]),
        message_response("r6", &["answer after compaction"]),
    ])
    .await
    .unwrap();

    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/python_sdk.py");
    let run = tokio::process::Command::new(&python)
        .arg(&program)
        .arg(env!("CARGO_BIN_EXE_spool"))
        .arg(work.path())
        .arg(&side_effect)
        .current_dir(work.path())
        // The SDK passes its environment on to the server it launches.
        .env("SPOOL_HOME", home.path())
        .env("SPOOL_LOCAL_MODEL_URL", model.url())
        .env_remove("OPENAI_API_KEY")
        .env_remove("SPOOL_STORE")
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(RUN_TIMEOUT, run)
        .await
        .expect("the Python SDK program finishes within 5 minutes")
        .expect("the venv's python starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("python_sdk.py stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        out.status.success(),
        "the Python SDK program failed ({}):\n{stdout}\n{stderr}",
        out.status
    );

    assert_eq!(
        std::fs::read_to_string(&side_effect).ok().as_deref(),
        Some("ran\n"),
        "the approved command ran exactly once"
    );

    let requests = model.requests();
    assert_eq!(
        requests.len(),
        6,
        "one model call per run, two for the command turn, one to compact: {:#?}",
        requests.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
    assert_eq!(model.remaining(), 0);

    let second = messages(&requests[1].body);
    let expected = [
        message("user", "first question"),
        message("assistant", "answer one"),
        message("user", "second question"),
    ];
    assert!(
        second.ends_with(&expected),
        "the second run's request carries the first turn, then the new question: {second:?}"
    );

    // The command's output went back to the model once, for the one call.
    let outputs: Vec<&Value> = requests[3].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert_eq!(outputs[0]["call_id"], "call_1");

    // thread.compact(): the summarizing call saw the three turns; the turn after it sees
    // the summary and its own question, none of what the summary replaced.
    let summarizing = messages(&requests[4].body);
    assert_eq!(
        summarizing.first(),
        Some(&message("user", "first question"))
    );
    assert!(
        summarizing.last().unwrap().1.starts_with("Summarize"),
        "{summarizing:?}"
    );
    assert_eq!(
        messages(&requests[5].body),
        [
            message(
                "user",
                &format!(
                    "{}SUMMARY: three turns so far",
                    spool_core::llm::COMPACTION_PREFIX
                )
            ),
            message("user", "after compaction"),
        ]
    );
}
