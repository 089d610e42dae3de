//! The compacting session against a Responses server on a real socket and
//! a real store file: past its threshold it summarizes itself, `get_items`
//! then gives the summary and the newer items (the plain session over the
//! same store too), and the log keeps every item the caller added.

use std::sync::Arc;

use serde_json::{Value, json};
use spool_core::View;
use spool_core::llm::COMPACTION_PREFIX;
use spool_model::{ProviderConfig, ResponsesProvider, RetryPolicy};
use spool_protocol::{ItemStatus, ThreadItem};
use spool_runtime::{Agent, CompactingSession, CompactionPolicy, RunStatus, Runner};
use spool_store::{Session, SqliteStore, Store, StoreOptions};
use spool_testkit::{Reply, StatefulResponses};

/// Compacts past 500 tokens; a summarizing call takes up to 1,000.
const POLICY: CompactionPolicy = CompactionPolicy {
    context_window: 2000,
    compact_at: 0.25,
};

struct Setup {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    server: StatefulResponses,
}

async fn setup(replies: Vec<Reply>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
    let server = StatefulResponses::start(replies).await.unwrap();
    Setup {
        _dir: dir,
        store,
        server,
    }
}

impl Setup {
    async fn session(&self, policy: Option<CompactionPolicy>) -> CompactingSession<SqliteStore> {
        let config =
            ProviderConfig::new("stateful", self.server.url()).with_retry(RetryPolicy::none());
        let mut runner = Runner::new(self.store.clone(), Arc::new(ResponsesProvider::new(config)));
        runner.compaction = policy;
        let agent = Arc::new(Agent::new("assistant", "/tmp").with_model("stateful-model"));
        CompactingSession::open(runner, agent, "conversation-1")
            .await
            .unwrap()
    }
}

/// About `words` o200k_base tokens of text.
fn long(label: &str, words: usize) -> String {
    let mut text = format!("{label}:");
    for n in 0..words {
        text.push_str(&format!(" w{n}"));
    }
    text
}

/// Items as an Agents SDK caller adds them (the shorthand message shape).
fn said(role: &str, text: &str) -> Value {
    json!({"role": role, "content": text})
}

fn summary(text: &str) -> Value {
    json!({"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": format!("{COMPACTION_PREFIX}{text}")}]})
}

#[tokio::test]
async fn past_its_threshold_a_session_gives_the_summary_and_the_newer_items() {
    let setup = setup(vec![Reply::message(
        "SUMMARY: a long question, a long answer.",
    )])
    .await;
    let session = setup.session(Some(POLICY)).await;
    let question = said("user", &long("first question", 200));
    let answer = said("assistant", &long("first answer", 150));

    // Under the threshold: kept as given, no model call.
    assert!(
        session
            .add_items(vec![question.clone()])
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        session.get_items(None).await.unwrap(),
        std::slice::from_ref(&question)
    );
    assert!(setup.server.exchanges().is_empty());

    // Past it: compacted, as a turn of its own.
    let compacted = session.add_items(vec![answer.clone()]).await.unwrap();
    assert_eq!(
        compacted.expect("a compaction").status,
        RunStatus::Completed
    );
    let exchanges = setup.server.exchanges();
    assert_eq!(exchanges.len(), 1);
    let sent = exchanges[0].body["input"].as_array().unwrap().clone();
    // The summarizing call gets the items as they were added, then the
    // request to summarize.
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[0]["content"], question["content"]);
    assert_eq!(sent[1]["content"], answer["content"]);
    assert!(
        sent[2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Summarize")
    );

    let summarized = summary("SUMMARY: a long question, a long answer.");
    assert_eq!(
        session.get_items(None).await.unwrap(),
        std::slice::from_ref(&summarized)
    );

    // Newer items follow the summary, exactly as given; windows count the
    // summary as an item.
    let next = vec![said("user", "and now?"), said("assistant", "now this.")];
    assert!(session.add_items(next.clone()).await.unwrap().is_none());
    let mut expected = vec![summarized.clone()];
    expected.extend(next.iter().cloned());
    assert_eq!(session.get_items(None).await.unwrap(), expected);
    assert_eq!(session.get_items(Some(2)).await.unwrap(), next);
    assert_eq!(session.get_items(Some(5)).await.unwrap(), expected);
    // As JSON text: the same items, the summary (a converted row) too.
    let raw: Vec<serde_json::Value> = session
        .get_items_raw(None)
        .await
        .unwrap()
        .iter()
        .map(|item| serde_json::from_str(item.get()).unwrap())
        .collect();
    assert_eq!(raw, expected);

    // The plain session over the same store reads the same; a fresh
    // handle (a restart) too.
    let plain = Session::open(setup.store.clone(), "conversation-1")
        .await
        .unwrap();
    assert_eq!(plain.get_items(None).await.unwrap(), expected);

    // Nothing was deleted: the `all` view has every item the caller added,
    // and the compaction with the seqs it replaces.
    let all = setup
        .store
        .items("conversation-1", View::All)
        .await
        .unwrap();
    let raw: Vec<&Value> = all
        .iter()
        .filter_map(spool_core::llm::raw_input_item)
        .collect();
    assert_eq!(raw, [&question, &answer, &next[0], &next[1]]);
    let compaction = all
        .iter()
        .find(|record| matches!(record.item, ThreadItem::ContextCompaction { .. }))
        .expect("a compaction item");
    assert_eq!(compaction.envelope.status, ItemStatus::Completed);
    let ThreadItem::ContextCompaction { replaces, .. } = &compaction.item else {
        unreachable!()
    };
    let replaces = replaces.as_ref().expect("the range it replaces");
    assert_eq!(replaces.from_seq, 1);
    assert!(replaces.through_seq < compaction.seq);
}

#[tokio::test]
async fn without_a_policy_it_compacts_only_when_asked_and_a_failure_replaces_nothing() {
    let setup = setup(vec![
        Reply::Fail(500),
        Reply::message("SUMMARY: two things were said."),
    ])
    .await;
    let session = setup.session(None).await;
    let items = vec![
        said("user", &long("question", 400)),
        said("assistant", &long("answer", 400)),
    ];
    assert!(session.add_items(items.clone()).await.unwrap().is_none());
    assert!(setup.server.exchanges().is_empty());

    // The model call fails: the compaction is recorded as failed and
    // stands for nothing.
    let failed = session.compact().await.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert!(failed.error.is_some());
    assert_eq!(session.get_items(None).await.unwrap(), items);

    // Asked again, it succeeds.
    let done = session.compact().await.unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    let summarized = summary("SUMMARY: two things were said.");
    assert_eq!(
        session.get_items(None).await.unwrap(),
        std::slice::from_ref(&summarized)
    );

    // Popping the newest item (the compaction) undoes it; clearing clears
    // all.
    assert_eq!(session.pop_item().await.unwrap(), Some(summarized));
    assert_eq!(session.get_items(None).await.unwrap(), items);
    session.clear().await.unwrap();
    assert!(session.get_items(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_history_larger_than_one_summarizing_call_is_summarized_in_parts() {
    let setup = setup(vec![
        Reply::message("PART ONE: the first question."),
        Reply::message("PARTS ONE AND TWO: a question and its answer."),
    ])
    .await;
    // Compacts past 500 tokens; a summarizing call takes up to 500.
    let policy = CompactionPolicy {
        context_window: 1000,
        compact_at: 0.5,
    };
    let session = setup.session(Some(policy)).await;
    let question = said("user", &long("first question", 160));
    let answer = said("assistant", &long("first answer", 160));
    assert!(
        session
            .add_items(vec![question.clone(), answer.clone()])
            .await
            .unwrap()
            .is_some()
    );
    let exchanges = setup.server.exchanges();
    assert_eq!(exchanges.len(), 2);
    let texts = |n: usize| -> Vec<String> {
        exchanges[n].body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| match &item["content"] {
                Value::String(text) => text.clone(),
                content => content[0]["text"].as_str().unwrap().to_owned(),
            })
            .collect()
    };
    // The oldest part first; then the summary so far and the next part:
    // nothing the compaction replaces is left out of its summary.
    let first = texts(0);
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first[0].starts_with("first question"));
    assert!(first[1].starts_with("Summarize"));
    let second = texts(1);
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(
        second[0],
        format!("{COMPACTION_PREFIX}PART ONE: the first question.")
    );
    assert!(second[1].starts_with("first answer"));
    assert!(second[2].starts_with("Summarize"));
    assert_eq!(
        session.get_items(None).await.unwrap(),
        [summary("PARTS ONE AND TWO: a question and its answer.")]
    );
}
