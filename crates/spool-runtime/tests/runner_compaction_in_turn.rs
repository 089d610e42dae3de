//! Compaction inside a turn: an agent whose tool outputs outgrow the
//! window within one turn is compacted before its next model call, by an
//! item of that turn, and goes on from the summary; in each history mode,
//! against a Responses server that keeps what it is sent.

mod history_support;

use std::sync::Arc;

use history_support::*;
use serde_json::{Value, json};
use spool_core::View;
use spool_core::llm::COMPACTION_PREFIX;
use spool_model::RetryPolicy;
use spool_protocol::{HistoryMode, ItemStatus, ServerNotification, ThreadItem};
use spool_runtime::{Agent, CompactionPolicy, RunStatus, Tool};
use spool_store::Store;
use spool_testkit::Reply;
use spool_tools::function::FunctionTool;

/// Compacts past 500 tokens; a summarizing call takes up to 1,000.
const POLICY: CompactionPolicy = CompactionPolicy {
    context_window: 2000,
    compact_at: 0.25,
};

/// Words in each file the agent reads: one file's output stays under the
/// threshold, two pass it.
const FILE_WORDS: usize = 150;

const SUMMARY: &str = "SUMMARY: the user asked for two files; both were read.";

/// An agent with a `read` tool whose every output is a long file.
fn reader() -> Arc<Agent> {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let read = FunctionTool::new("read", "read a file", schema, |args, _| async move {
        Ok(long(args["path"].as_str().unwrap_or("?"), FILE_WORDS))
    })
    .unwrap();
    Arc::new(
        Agent::new("assistant", "/tmp")
            .with_model("stateful-model")
            .with_tool(Tool::Function(read)),
    )
}

fn read(call_id: &str, path: &str) -> Reply {
    Reply::call(call_id, "read", json!({ "path": path }))
}

fn tokens(items: &[Value]) -> usize {
    spool_core::tokens::count_text(&serde_json::to_string(items).unwrap())
}

/// One turn: read `a`, read `b`, (summarize,) answer.
async fn reading_turn(mode: HistoryMode, replies: Vec<Reply>, endpoint: bool) -> Setup {
    let setup = setup(mode, replies).await;
    setup.server.serve_compact_endpoint(endpoint);
    let mut runner = setup.runner(RetryPolicy::none());
    runner.compaction = Some(POLICY);
    let result = setup.run(&runner, reader(), "read a then b").await;
    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);
    setup
}

/// The turn's compaction item, checked against the log around it, which
/// still holds all `reads`.
async fn compaction_of_the_turn(
    setup: &Setup,
    reads: usize,
) -> (ItemStatus, Option<String>, Value) {
    let turns = setup.store.turns(&setup.thread_id).await.unwrap();
    assert_eq!(turns.len(), 1, "compacted inside the turn, not by another");
    let all = setup
        .store
        .items(&setup.thread_id, View::All)
        .await
        .unwrap();
    // Nothing is deleted: every read is still in the log.
    let calls = all
        .iter()
        .filter(|r| matches!(&r.item, ThreadItem::FunctionCall { .. }))
        .count();
    assert_eq!(calls, reads, "{all:#?}");
    let compaction = all
        .iter()
        .find(|r| matches!(r.item, ThreadItem::ContextCompaction { .. }))
        .expect("a compaction item");
    assert_eq!(compaction.turn_id, turns[0].id);
    // It replaces everything before it, this turn's items included.
    let ThreadItem::ContextCompaction {
        summary, replaces, ..
    } = &compaction.item
    else {
        unreachable!()
    };
    if compaction.envelope.status == ItemStatus::Completed {
        let replaces = replaces.expect("the replaced range");
        assert_eq!(replaces.from_seq, 1);
        assert_eq!(replaces.through_seq, compaction.ordinal - 1);
    }
    let events = setup
        .store
        .events_after(&setup.thread_id, 0, 100_000)
        .await
        .unwrap();
    let compacted = events
        .iter()
        .any(|e| matches!(&e.payload, ServerNotification::ThreadCompacted(c) if c.turn_id == turns[0].id));
    let provider_data = compaction
        .envelope
        .provider_data
        .as_deref()
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        compacted,
        compaction.envelope.status == ItemStatus::Completed,
        "thread/compacted follows a compaction that completed"
    );
    (compaction.envelope.status, summary.clone(), provider_data)
}

#[tokio::test]
async fn a_replayed_turn_that_outgrows_the_window_is_compacted_before_its_next_call() {
    let replies = vec![
        read("c1", "a"),
        read("c2", "b"),
        Reply::message(SUMMARY),
        Reply::message("Both read."),
    ];
    let setup = reading_turn(HistoryMode::Replay, replies, false).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    assert_eq!(exchanges.len(), 4);
    // One file's output stays under the threshold...
    let second = input(&exchanges[1]);
    assert_eq!(shapes(&second)[1..], ["call c1", "output c1"]);
    assert!(tokens(&second) < POLICY.threshold(), "{}", tokens(&second));
    // ...two pass it: the summarizing call gets the whole turn so far.
    let summarizing = shapes(&input(&exchanges[2]));
    assert_eq!(summarizing.len(), 6, "{summarizing:?}");
    assert_eq!(summarizing[0], "user: read a then b");
    assert_eq!(
        summarizing[1..5],
        ["call c1", "output c1", "call c2", "output c2"]
    );
    assert!(summarizing[5].starts_with("user: Summarize"));
    // The call after it carries the summary and nothing it replaced.
    let next = input(&exchanges[3]);
    assert_eq!(next, [user(&format!("{COMPACTION_PREFIX}{SUMMARY}"))]);
    assert!(tokens(&next) < POLICY.threshold());
    let (status, summary, _) = compaction_of_the_turn(&setup, 2).await;
    assert_eq!(status, ItemStatus::Completed);
    assert_eq!(summary.as_deref(), Some(SUMMARY));
}

#[tokio::test]
async fn a_previous_response_id_turn_compacts_through_the_endpoint_inside_the_turn() {
    let replies = vec![
        read("c1", "a"),
        read("c2", "b"),
        Reply::message("Both read."),
    ];
    let setup = reading_turn(HistoryMode::PreviousResponseId, replies, true).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    assert_eq!(exchanges.len(), 3, "no summarizing call");
    // The compact request continues the stored response with the output
    // it did not have yet, so the compaction covers all of it.
    let compacts = setup.server.other_requests();
    assert_eq!(compacts.len(), 1);
    let asked: Value = serde_json::from_str(&compacts[0].body_text()).unwrap();
    assert_eq!(
        asked["previous_response_id"],
        json!(exchanges[1].response_id.clone().unwrap())
    );
    assert_eq!(shapes(asked["input"].as_array().unwrap()), ["output c2"]);
    // The last call starts over from the compaction item alone; the
    // provider expands it to everything, each item once.
    let last = &exchanges[2];
    assert_eq!(last.body.get("previous_response_id"), None);
    let sent = input(last);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["type"], "compaction");
    assert_eq!(
        shapes(&last.context)[1..],
        ["call c1", "output c1", "call c2", "output c2"]
    );
    let (status, _, provider_data) = compaction_of_the_turn(&setup, 2).await;
    assert_eq!(status, ItemStatus::Completed);
    assert_eq!(provider_data["compactedOutput"][0]["type"], "compaction");
    // The cursor continues from the last response.
    let cursor = setup
        .store
        .history(&setup.thread_id)
        .await
        .unwrap()
        .unwrap()
        .cursor;
    assert_eq!(cursor.previous_response_id, last.response_id);
}

#[tokio::test]
async fn a_conversation_turn_summarizes_inside_the_turn_and_starts_a_new_conversation() {
    let replies = vec![
        read("c1", "a"),
        read("c2", "b"),
        Reply::message(SUMMARY),
        Reply::message("Both read."),
    ];
    let setup = reading_turn(HistoryMode::ConversationId, replies, false).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    assert_eq!(exchanges.len(), 4);
    let first = exchanges[0].body["conversation"].clone();
    assert_eq!(exchanges[1].body["conversation"], first);
    // The summary goes to a new conversation, alone.
    let last = &exchanges[3];
    assert_ne!(last.body["conversation"], first);
    assert_eq!(
        input(last),
        [user(&format!("{COMPACTION_PREFIX}{SUMMARY}"))]
    );
    assert_eq!(last.context.len(), 1);
    let (status, summary, _) = compaction_of_the_turn(&setup, 2).await;
    assert_eq!(status, ItemStatus::Completed);
    assert_eq!(summary.as_deref(), Some(SUMMARY));
}

#[tokio::test]
async fn a_failed_compaction_inside_a_turn_is_recorded_and_the_turn_goes_on() {
    let replies = vec![
        read("c1", "a"),
        read("c2", "b"),
        Reply::Fail(500),
        read("c3", "c"),
        Reply::message("All read."),
    ];
    let setup = reading_turn(HistoryMode::Replay, replies, false).await;
    let exchanges = setup.server.exchanges();
    assert_eq!(exchanges.len(), 5);
    assert_eq!(exchanges[2].status, 500);
    // Not tried again in this turn: the history goes whole.
    assert_eq!(
        shapes(&input(&exchanges[4]))[1..],
        [
            "call c1",
            "output c1",
            "call c2",
            "output c2",
            "call c3",
            "output c3"
        ]
    );
    let (status, summary, _) = compaction_of_the_turn(&setup, 3).await;
    assert_eq!(status, ItemStatus::Failed);
    assert_eq!(summary, None);
}
