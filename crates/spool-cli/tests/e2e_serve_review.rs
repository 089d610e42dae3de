//! `review/start` on the real `spool serve` over stdio, with a scripted
//! model server and a real git repository as the thread's directory:
//! the exact notification order of an inline review, a detached review on
//! a new thread, targets that cannot be reviewed, and what the next turn's
//! model request holds.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

const FINDING: &str = "calc.rs:2 returns 3 where the doc says 2.";

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A repository with one commit and one uncommitted change.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("calc.rs"), "/// Two.\nfn two() -> u32 { 2 }\n").unwrap();
    git(root, &["add", "calc.rs"]);
    git(root, &["commit", "-q", "-m", "Add two"]);
    std::fs::write(root.join("calc.rs"), "/// Two.\nfn two() -> u32 { 3 }\n").unwrap();
    dir
}

/// Every message that belongs to `thread` (`threadId`, or the thread of
/// `thread/started`), as `method` or `method:itemType`.
fn shape(seen: &[Value], thread: &str) -> Vec<String> {
    seen.iter()
        .filter(|m| m["params"]["threadId"] == thread || m["params"]["thread"]["id"] == thread)
        .map(|m| match m["params"]["item"]["type"].as_str() {
            Some(kind) => format!("{}:{kind}", method_of(m)),
            None => method_of(m).to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn an_inline_review_streams_between_entered_and_exited_review_mode() {
    let repo = repo();
    let model = ScriptedServer::with_responses([
        message_response("r1", &["calc.rs:2 returns 3 ", "where the doc says 2."]),
        message_response("r2", &["Fixed."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let started = client
        .call(
            1,
            "thread/start",
            json!({"cwd": repo.path().display().to_string()}),
        )
        .await;
    let thread = thread_id_of(&started);
    let reply = client
        .call(
            2,
            "review/start",
            json!({"threadId": thread, "target": {"type": "uncommittedChanges"}}),
        )
        .await;
    assert_eq!(reply["result"]["reviewThreadId"], thread, "{reply}");
    assert_eq!(reply["result"]["turn"]["status"], "inProgress");
    client.until(|m| method_of(m) == "turn/completed").await;

    let deltas = shape(&client.seen, &thread)
        .iter()
        .filter(|m| *m == "item/agentMessage/delta")
        .count();
    assert_eq!(deltas, 2);
    let expected: Vec<String> = [
        "thread/started",
        "turn/started",
        "item/started:enteredReviewMode",
        "item/completed:enteredReviewMode",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "item/started:exitedReviewMode",
        "item/completed:exitedReviewMode",
        "turn/completed",
    ]
    .map(str::to_owned)
    .to_vec();
    let seen: Vec<String> = shape(&client.seen, &thread)
        .into_iter()
        .filter(|m| m != "thread/status/changed" && m != "thread/tokenUsage/updated")
        .collect();
    assert_eq!(seen, expected);
    let entered = client
        .seen
        .iter()
        .find(|m| m["params"]["item"]["type"] == "enteredReviewMode")
        .unwrap();
    assert_eq!(entered["params"]["item"]["review"], "uncommitted changes");
    let exited = client
        .seen
        .iter()
        .rfind(|m| m["params"]["item"]["type"] == "exitedReviewMode")
        .unwrap();
    assert_eq!(exited["params"]["item"]["review"], FINDING);
    let completed = client.seen.last().unwrap();
    assert_eq!(completed["params"]["turn"]["status"], "completed");

    // The reviewer got the working tree's diff, and only that.
    let first: Value = serde_json::from_str(&model.requests()[0].body_text()).unwrap();
    let input = first["input"].to_string();
    assert!(input.contains("fn two() -> u32 { 3 }"), "{input}");
    assert!(
        first["instructions"]
            .as_str()
            .unwrap()
            .contains("reviewing a set of code changes")
    );

    // The next turn knows the findings, not the diff.
    client.seen.clear();
    client
        .call(
            3,
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "fix it"}]}),
        )
        .await;
    client.until(|m| method_of(m) == "turn/completed").await;
    let next: Value = serde_json::from_str(&model.requests()[1].body_text()).unwrap();
    let input = next["input"].to_string();
    assert!(input.contains(FINDING), "{input}");
    assert!(!input.contains("u32 { 3 }"), "{input}");

    // thread/read shows the review turn as a Codex client expects it.
    let read = client
        .call(
            4,
            "thread/read",
            json!({"threadId": thread, "includeTurns": true}),
        )
        .await;
    let kinds: Vec<&str> = read["result"]["thread"]["turns"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["enteredReviewMode", "agentMessage", "exitedReviewMode"]
    );
    client.close().await;
}

#[tokio::test]
async fn a_detached_review_runs_on_a_new_thread_and_bad_targets_start_nothing() {
    let repo = repo();
    git(repo.path(), &["commit", "-q", "-am", "Return three"]);
    let model = ScriptedServer::with_responses([message_response("r1", &["Looks right."])])
        .await
        .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({})).await;
    let started = client
        .call(
            1,
            "thread/start",
            json!({"cwd": repo.path().display().to_string()}),
        )
        .await;
    let thread = thread_id_of(&started);

    // Nothing uncommitted now; an unknown commit; a directory outside git.
    let nothing = client
        .call(
            2,
            "review/start",
            json!({"threadId": thread, "target": {"type": "uncommittedChanges"}}),
        )
        .await;
    assert_eq!(nothing["error"]["code"], -32602, "{nothing}");
    assert!(
        nothing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no uncommitted changes")
    );
    let unknown = client
        .call(
            3,
            "review/start",
            json!({"threadId": thread, "target": {"type": "commit", "sha": "deadbeef"}}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let plain = tempfile::tempdir().unwrap();
    let outside = client
        .call(
            4,
            "thread/start",
            json!({"cwd": plain.path().display().to_string()}),
        )
        .await;
    let outside = thread_id_of(&outside);
    let not_git = client
        .call(
            5,
            "review/start",
            json!({"threadId": outside, "target": {"type": "baseBranch", "branch": "main"}}),
        )
        .await;
    assert_eq!(not_git["error"]["code"], -32602, "{not_git}");
    assert!(
        not_git["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not inside a git repository")
    );
    assert!(model.requests().is_empty(), "no review ran");

    let reply = client
        .call(
            6,
            "review/start",
            json!({
                "threadId": thread,
                "target": {"type": "commit", "sha": "HEAD", "title": null},
                "delivery": "detached"
            }),
        )
        .await;
    let review_thread = reply["result"]["reviewThreadId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(review_thread, thread);
    client.until(|m| method_of(m) == "turn/completed").await;
    let seen = shape(&client.seen, &review_thread);
    assert_eq!(seen.first().map(String::as_str), Some("thread/started"));
    assert!(seen.contains(&"item/completed:exitedReviewMode".to_owned()));
    assert!(
        shape(&client.seen, &thread)
            .iter()
            .all(|m| m == "thread/started"),
        "the source thread ran nothing: {:?}",
        shape(&client.seen, &thread)
    );
    let entered = client
        .seen
        .iter()
        .find(|m| m["params"]["item"]["type"] == "enteredReviewMode")
        .unwrap();
    assert!(
        entered["params"]["item"]["review"]
            .as_str()
            .unwrap()
            .ends_with(": Return three"),
        "{entered}"
    );
    let body: Value = serde_json::from_str(&model.requests()[0].body_text()).unwrap();
    assert!(body["input"].to_string().contains("u32 { 3 }"));
    client.close().await;
}
