//! Review turns over a scripted model server: what the reviewer sees,
//! what the thread keeps, and what later turns get.

mod runner_support;

use std::sync::Arc;

use runner_support::*;
use serde_json::{Value, json};
use spool_core::View;
use spool_core::llm::{LlmViewOptions, REVIEW_PREFIX};
use spool_protocol::*;
use spool_runtime::{REVIEWER_INSTRUCTIONS, Review, RunStatus, reviewer};
use spool_store::Store;
use spool_testkit::responses_api::{calls_response, message_response};
use tokio::sync::{mpsc, watch};

const PROMPT: &str = "Review this.\n```diff\n+let x = divide(a, 0);\n```\n";
const FINDINGS: &str = "src/lib.rs:1 divides by zero.";

fn review() -> Review {
    Review {
        hint: "uncommitted changes".into(),
        prompt: PROMPT.into(),
    }
}

/// Every text of a request body's `input`, joined.
fn input_text(body: &Value) -> String {
    body["input"].to_string()
}

#[tokio::test]
async fn a_review_sees_only_its_prompt_and_leaves_only_its_findings_to_later_turns() {
    let f = Fixture::new(vec![
        message_response("r1", &["Hi there."]),
        calls_response(
            "r2",
            &[("call_1", "shell", json!({"command": ["cat", "notes.txt"]}))],
        ),
        message_response("r3", &["src/lib.rs:1 ", "divides by zero."]),
        message_response("r4", &["I will fix it."]),
    ])
    .await;
    std::fs::write(f.workspace.join("notes.txt"), "the notes\n").unwrap();
    let runner = f.runner();
    f.run(&runner, f.agent("coder"), "hello").await;

    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let result = runner
        .review_streamed(
            Arc::new(reviewer(&f.agent("coder"))),
            &f.thread_id,
            review(),
            &events,
            interrupt,
        )
        .await
        .unwrap();
    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    assert_eq!(result.final_output(), Some(FINDINGS));

    let bodies = f.request_bodies();
    assert_eq!(bodies.len(), 3);
    // The reviewer: its instructions, its prompt, not the conversation.
    assert_eq!(bodies[1]["instructions"], REVIEWER_INSTRUCTIONS);
    let first = input_text(&bodies[1]);
    assert!(first.contains("divide(a, 0)"), "{first}");
    assert!(
        !first.contains("hello") && !first.contains("Hi there"),
        "{first}"
    );
    // Its second call has its command's output.
    let sent = outputs(&bodies[2]);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.contains("the notes"), "{}", sent[0].1);

    // The turn: entered, prompt, command, message, exited.
    let records = f.store.items(&f.thread_id, View::All).await.unwrap();
    let review_turn = &records.last().unwrap().turn_id;
    let turn: Vec<_> = records
        .iter()
        .filter(|r| &r.turn_id == review_turn)
        .collect();
    let kinds: Vec<_> = turn.iter().map(|r| r.item.kind()).collect();
    assert_eq!(
        kinds,
        [
            ItemKind::EnteredReviewMode,
            ItemKind::UserMessage,
            ItemKind::CommandExecution,
            ItemKind::AgentMessage,
            ItemKind::ExitedReviewMode,
        ]
    );
    assert!(matches!(
        &turn[0].item,
        ThreadItem::EnteredReviewMode { review, .. } if review == "uncommitted changes"
    ));
    assert!(matches!(
        &turn[4].item,
        ThreadItem::ExitedReviewMode { review, .. } if review == FINDINGS
    ));
    let audiences: Vec<_> = turn.iter().map(|r| r.envelope.audience).collect();
    let nobody = Audience {
        client: false,
        llm: false,
    };
    assert_eq!(
        audiences,
        [
            Audience::CLIENT_ONLY,
            nobody,
            Audience::CLIENT_ONLY,
            Audience::CLIENT_ONLY,
            Audience::BOTH,
        ]
    );
    // The client view has the review without the prompt's diff.
    let client = f.store.items(&f.thread_id, View::Client).await.unwrap();
    assert!(
        !client
            .iter()
            .any(|r| r.item.kind() == ItemKind::UserMessage && r.turn_id == *review_turn)
    );

    // A later turn sees the conversation and the findings, not the
    // reviewer's work.
    let view = f
        .store
        .llm_view(&f.thread_id, LlmViewOptions::default())
        .await
        .unwrap();
    let history = serde_json::to_string(&view.input).unwrap();
    assert!(history.contains("hello") && history.contains("Hi there"));
    assert!(history.contains(&format!("{}{FINDINGS}", REVIEW_PREFIX.replace('\n', "\\n"))));
    assert!(!history.contains("divide(a, 0)"), "{history}");
    assert!(!history.contains("notes.txt"), "{history}");
    f.run(&runner, f.agent("coder"), "fix it").await;
    let last = input_text(&f.request_bodies()[3]);
    assert!(
        last.contains(FINDINGS) && !last.contains("divide(a, 0)"),
        "{last}"
    );
}

#[tokio::test]
async fn the_reviewer_cannot_change_anything_and_never_asks() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[(
                "call_1",
                "shell",
                json!({"command": ["rm", "-f", "keep.txt"]}),
            )],
        ),
        message_response("r2", &["No findings."]),
    ])
    .await;
    std::fs::write(f.workspace.join("keep.txt"), "kept\n").unwrap();
    let client = ScriptedClient::new([]);
    let runner = f.runner().with_client(client.clone());
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let result = runner
        .review_streamed(
            Arc::new(reviewer(&f.agent("coder"))),
            &f.thread_id,
            review(),
            &events,
            interrupt,
        )
        .await
        .unwrap();
    assert_eq!(result.status, RunStatus::Completed);
    assert!(f.workspace.join("keep.txt").exists());
    assert!(client.asked().is_empty(), "a review never asks a person");
    let sent = outputs(&f.request_bodies()[1]);
    assert!(
        sent[0].1.contains("approval policy is never"),
        "{}",
        sent[0].1
    );
}

#[tokio::test]
async fn an_interrupted_review_exits_with_no_findings() {
    let f = Fixture::new(vec![message_response("r1", &["never read"])]).await;
    let runner = f.runner();
    let (events, _) = mpsc::unbounded_channel();
    let (stop, interrupt) = watch::channel(false);
    stop.send(true).unwrap();
    let result = runner
        .review_streamed(
            Arc::new(reviewer(&f.agent("coder"))),
            &f.thread_id,
            review(),
            &events,
            interrupt,
        )
        .await
        .unwrap();
    assert_eq!(result.status, RunStatus::Interrupted);
    let records = f.store.items(&f.thread_id, View::All).await.unwrap();
    assert!(matches!(
        &records.last().unwrap().item,
        ThreadItem::ExitedReviewMode { review, .. } if review.is_empty()
    ));
    let view = f
        .store
        .llm_view(&f.thread_id, LlmViewOptions::default())
        .await
        .unwrap();
    assert!(view.input.is_empty(), "{:?}", view.input);
    let log = log(&f).await;
    let methods: Vec<_> = log.iter().map(|e| e.payload.method()).collect();
    let exited = methods
        .iter()
        .rposition(|m| *m == "item/completed")
        .unwrap();
    // The turn ends, then the thread goes idle.
    assert_eq!(
        methods[methods.len() - 2..],
        ["turn/completed", "thread/status/changed"]
    );
    assert!(exited < methods.len() - 2);
}
