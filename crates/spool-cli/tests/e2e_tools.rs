//! `spool run` with tools over a scripted Responses API server: the
//! approval policy and sandbox flags decide, and without a terminal a call
//! that needs approval is declined with a clear message.

mod support;

use serde_json::json;
use spool_testkit::responses_api::{calls_response, message_response};
use spool_testkit::{ScriptedResponse, ScriptedServer};
use support::*;

fn shell_call(argv: &[&str]) -> ScriptedResponse {
    calls_response("r1", &[("call_1", "shell", json!({ "command": argv }))])
}

fn answer(text: &str) -> ScriptedResponse {
    message_response("r2", &[text])
}

#[tokio::test]
async fn without_a_terminal_a_call_needing_approval_is_declined_with_a_message() {
    let server =
        ScriptedServer::with_responses([shell_call(&["touch", "made.txt"]), answer("OK.")])
            .await
            .unwrap();
    let home = Home::new();
    let (_, stderr) = home
        .spool_ok(&server.url(), &["run", "--tools", "shell", "make a file"])
        .await;
    assert!(
        stderr.contains("declined the command `touch made.txt`")
            && stderr.contains("not a terminal"),
        "{stderr}"
    );
    assert!(
        !home.path().join("made.txt").exists(),
        "the command did not run"
    );
    // The model was told, and answered.
    let second: serde_json::Value =
        serde_json::from_str(&server.requests()[1].body_text()).unwrap();
    let told = second["input"].as_array().unwrap().iter().any(|m| {
        m["type"] == "function_call_output"
            && m["output"].as_str().unwrap_or("").contains("declined")
    });
    assert!(told, "{second}");

    let thread = thread_id_from(&stderr);
    let (shown, _) = home
        .spool_ok(&server.url(), &["threads", "show", &thread])
        .await;
    assert!(
        shown.contains("$ touch made.txt") && shown.contains("declined"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_policy_that_allows_the_call_runs_it_and_shows_it() {
    let server =
        ScriptedServer::with_responses([shell_call(&["touch", "made.txt"]), answer("Made it.")])
            .await
            .unwrap();
    let home = Home::new();
    let (stdout, stderr) = home
        .spool_ok(
            &server.url(),
            &[
                "run",
                "--tools",
                "shell",
                "--approval-policy",
                "never",
                "--sandbox",
                "danger-full-access",
                "make a file",
            ],
        )
        .await;
    assert!(home.path().join("made.txt").exists(), "the command ran");
    assert!(stderr.contains("$ touch made.txt"), "{stderr}");
    assert!(stdout.contains("Made it."), "{stdout}");
}

#[tokio::test]
async fn a_bad_policy_name_is_a_clear_error() {
    let home = Home::new();
    let out = home
        .spool(
            "http://127.0.0.1:9/v1",
            &["run", "--approval-policy", "sometimes", "hi"],
        )
        .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sometimes") && stderr.contains("on-request"),
        "{stderr}"
    );
}
