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
    // Asking to leave the sandbox is what needs a person under on-request.
    let escalated = calls_response(
        "r1",
        &[(
            "call_1",
            "shell",
            json!({ "command": ["touch", "made.txt"], "sandbox_permissions": "require_escalated" }),
        )],
    );
    let server = ScriptedServer::with_responses([escalated, answer("OK.")])
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

/// Runs `spool ARGS` on a pseudo-terminal (util-linux `script`), typing
/// `typed` into it; returns everything the terminal showed.
async fn spool_on_a_terminal(home: &Home, model_url: &str, args: &[&str], typed: &str) -> String {
    let mut command = vec![env!("CARGO_BIN_EXE_spool").to_owned()];
    command.extend(args.iter().map(|a| format!("'{a}'")));
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &command.join(" "), "/dev/null"])
        .current_dir(home.path())
        .env("SPOOL_HOME", home.path())
        .env("SPOOL_LOCAL_MODEL_URL", model_url)
        .env_remove("OPENAI_API_KEY")
        .env_remove("SPOOL_STORE")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script(1) runs");
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed.as_bytes()).await.unwrap();
    let out = child.wait_with_output().await.unwrap();
    drop(stdin);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn on_a_terminal_a_patch_is_shown_as_a_diff_and_applied_when_accepted() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("util-linux `script` is needed for the terminal test");
    }
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the agent\n*** End Patch\n";
    let server = ScriptedServer::with_responses([
        calls_response(
            "r1",
            &[("call_1", "apply_patch", json!({ "input": patch }))],
        ),
        answer("Added."),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let shown = spool_on_a_terminal(
        &home,
        &server.url(),
        &[
            "run",
            "--tools",
            "apply_patch",
            "--sandbox",
            "read-only",
            "add a file",
        ],
        "a\n",
    )
    .await;
    assert!(shown.contains("wants to change files"), "{shown}");
    assert!(
        shown.contains("+hello from the agent"),
        "the diff was shown: {shown}"
    );
    assert!(shown.contains("[a]ccept"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("hello.txt")).unwrap(),
        "hello from the agent\n"
    );
}
