//! Compaction against a Responses server that keeps what it is sent: a
//! thread past its threshold is summarized, as a turn of its own, before
//! the next turn; the request after it carries the summary and nothing it
//! replaced, and fits the budget; every original item stays in the log.

mod history_support;

use history_support::*;
use serde_json::{Value, json};
use spool_core::View;
use spool_core::llm::{COMPACTION_PREFIX, LlmViewOptions};
use spool_model::RetryPolicy;
use spool_protocol::{HistoryMode, ItemStatus, ThreadItem};
use spool_runtime::{CompactionPolicy, RunStatus};
use spool_store::Store;
use spool_testkit::Reply;

/// Compacts past 500 tokens; a summarizing call takes up to 1,000.
const POLICY: CompactionPolicy = CompactionPolicy {
    context_window: 2000,
    compact_at: 0.25,
};

fn summary_message(summary: &str) -> Value {
    user(&format!("{COMPACTION_PREFIX}{summary}"))
}

async fn compacted_conversation(mode: HistoryMode, compact_endpoint: bool) -> Setup {
    let mut replies = vec![Reply::message(&long("first answer", 150))];
    if !compact_endpoint || mode != HistoryMode::PreviousResponseId {
        replies.push(Reply::message(
            "SUMMARY: the user sent a long first message.",
        ));
    }
    replies.push(Reply::message("Second answer."));
    let setup = setup(mode, replies).await;
    setup.server.serve_compact_endpoint(compact_endpoint);
    let mut runner = setup.runner(RetryPolicy::none());
    runner.compaction = Some(POLICY);
    assert_eq!(
        setup.turn(&runner, &long("first question", 200)).await,
        RunStatus::Completed
    );
    assert_eq!(
        setup.turn(&runner, "second question").await,
        RunStatus::Completed
    );
    setup
}

#[tokio::test]
async fn a_thread_past_its_threshold_is_compacted_before_the_next_turn() {
    let setup = compacted_conversation(HistoryMode::Replay, true).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    assert_eq!(exchanges.len(), 3);

    // The summarizing call: the history, then the request to summarize;
    // its own instructions, no tools.
    let summarizing = &exchanges[1];
    let sent = shapes(&input(summarizing));
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[0].starts_with("user: first question"));
    assert!(sent[1].starts_with("assistant: first answer"));
    assert!(sent[2].starts_with("user: Summarize"));
    assert!(
        summarizing.body["instructions"]
            .as_str()
            .unwrap()
            .contains("compacting a conversation")
    );
    assert_eq!(summarizing.body.get("tools"), None);

    // The next turn's request: the summary and the new input, nothing the
    // summary replaced; within the threshold.
    let next = input(&exchanges[2]);
    assert_eq!(
        next,
        [
            summary_message("SUMMARY: the user sent a long first message."),
            user("second question")
        ]
    );
    let tokens = spool_core::tokens::count_text(&serde_json::to_string(&next).unwrap());
    assert!(tokens < POLICY.threshold(), "{tokens} tokens");

    // The log keeps everything: three turns, the first one's items intact,
    // the compaction with the range it replaces.
    let turns = setup.store.turns(&setup.thread_id).await.unwrap();
    assert_eq!(turns.len(), 3);
    let all = setup
        .store
        .items(&setup.thread_id, View::All)
        .await
        .unwrap();
    assert!(all.iter().any(|r| matches!(&r.item,
        ThreadItem::UserMessage { .. } if r.turn_id == turns[0].id)));
    let compaction = all
        .iter()
        .find(|r| matches!(r.item, ThreadItem::ContextCompaction { .. }))
        .expect("a compaction item");
    assert_eq!(compaction.turn_id, turns[1].id);
    assert_eq!(compaction.envelope.status, ItemStatus::Completed);
    let ThreadItem::ContextCompaction {
        summary, replaces, ..
    } = &compaction.item
    else {
        unreachable!()
    };
    assert_eq!(
        summary.as_deref(),
        Some("SUMMARY: the user sent a long first message.")
    );
    let replaces = replaces.expect("the replaced range");
    assert_eq!(replaces.from_seq, 1);
    assert_eq!(replaces.through_seq, turns[1].ordinal - 1);
    assert!(turns[0].seq <= replaces.through_seq);

    // `llm` shows what the model gets: the summary first.
    let view = setup
        .store
        .llm_view(&setup.thread_id, LlmViewOptions::default())
        .await
        .unwrap();
    let view: Vec<Value> = view
        .input
        .iter()
        .map(|item| serde_json::to_value(item).unwrap())
        .collect();
    assert_eq!(
        view[0],
        summary_message("SUMMARY: the user sent a long first message.")
    );
    assert_eq!(view.len(), 3, "summary, second question, second answer");
}

#[tokio::test]
async fn a_previous_response_id_thread_compacts_through_the_compact_endpoint() {
    let setup = compacted_conversation(HistoryMode::PreviousResponseId, true).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    // No summarizing call: the provider compacted its own history.
    assert_eq!(exchanges.len(), 2);
    let compacts = setup.server.other_requests();
    assert_eq!(compacts.len(), 1);
    assert!(compacts[0].path.ends_with("/responses/compact"));
    let asked: Value = serde_json::from_str(&compacts[0].body_text()).unwrap();
    assert_eq!(
        asked["previous_response_id"],
        json!(exchanges[0].response_id.clone().unwrap())
    );
    // The next request starts over from the compaction item, which the
    // provider expands to the history it stands for.
    let next = &exchanges[1];
    assert_eq!(next.body.get("previous_response_id"), None);
    let sent = input(next);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0]["type"], "compaction");
    assert_eq!(sent[1], user("second question"));
    let seen = shapes(&next.context);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen[0].starts_with("user: first question"));
    assert!(seen[1].starts_with("assistant: first answer"));
    assert_eq!(seen[2], "user: second question");
    // The record says what happened; the views still hold the originals.
    let all = setup
        .store
        .items(&setup.thread_id, View::All)
        .await
        .unwrap();
    let compaction = all
        .iter()
        .find(|r| matches!(r.item, ThreadItem::ContextCompaction { .. }))
        .unwrap();
    let held = &compaction.envelope.provider_data.as_ref().unwrap()["compactedOutput"];
    assert_eq!(held[0]["type"], "compaction");
}

#[tokio::test]
async fn without_the_compact_endpoint_a_previous_response_id_thread_summarizes() {
    let setup = compacted_conversation(HistoryMode::PreviousResponseId, false).await;
    assert!(
        setup.server.other_requests()[0]
            .path
            .ends_with("/responses/compact"),
        "the endpoint was tried first"
    );
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    // The summarizing call replays (the provider's copy is what is being
    // replaced), and the next request continues from nothing the
    // provider stored before: the summary and the new input only.
    assert_eq!(exchanges[1].body.get("previous_response_id"), None);
    assert_eq!(exchanges[2].body.get("previous_response_id"), None);
    assert_eq!(exchanges[2].body["store"], json!(true));
    assert_eq!(
        input(&exchanges[2]),
        [
            summary_message("SUMMARY: the user sent a long first message."),
            user("second question")
        ]
    );
    let cursor = setup
        .store
        .history(&setup.thread_id)
        .await
        .unwrap()
        .unwrap()
        .cursor;
    assert_eq!(cursor.previous_response_id, exchanges[2].response_id);
}

#[tokio::test]
async fn a_short_thread_is_not_compacted() {
    let replies = vec![Reply::message("One."), Reply::message("Two.")];
    let setup = setup(HistoryMode::Replay, replies).await;
    let mut runner = setup.runner(RetryPolicy::none());
    runner.compaction = Some(POLICY);
    assert_eq!(setup.turn(&runner, "one").await, RunStatus::Completed);
    assert_eq!(setup.turn(&runner, "two").await, RunStatus::Completed);
    assert_eq!(setup.server.exchanges().len(), 2);
    assert_eq!(setup.store.turns(&setup.thread_id).await.unwrap().len(), 2);
}
