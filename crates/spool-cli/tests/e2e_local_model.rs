//! End to end against the real local llama-server: `spool run` over both
//! wire APIs, what it stored, and history sent on `--thread`.

mod support;

use serde_json::Value;
use spool_testkit::RecordingProxy;
use support::*;

/// Runs one turn over `wire_api` and checks: streamed text = the completed
/// item's text = the concatenated deltas in the log; the thread, turn and
/// items are stored and `threads show` prints them.
async fn run_and_check(wire_api: &str) {
    let url = local_model_url();
    let home = Home::new();
    let (stdout, stderr) = home
        .spool_ok(
            &url,
            &[
                "run",
                "--max-output-tokens",
                "48",
                "--wire-api",
                wire_api,
                "What is the capital of France?",
            ],
        )
        .await;
    assert!(
        stderr.contains("using the local model server"),
        "says it fell back to the local model: {stderr}"
    );
    let thread = thread_id_from(&stderr);
    let streamed = stdout.strip_suffix('\n').unwrap_or(&stdout);
    assert!(!streamed.trim().is_empty(), "the model answered: {stderr}");
    assert!(home.db().exists(), "the store is at $SPOOL_HOME/spool.db");

    // The stored items.
    let (items, _) = home
        .spool_ok(
            &url,
            &["threads", "show", &thread, "--view", "all", "--json"],
        )
        .await;
    let items = json_lines(&items);
    let kinds: Vec<&str> = items
        .iter()
        .map(|i| i["item"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"userMessage"), "{items:#?}");
    let answer = items
        .iter()
        .rfind(|i| i["item"]["type"] == "agentMessage")
        .expect("an agentMessage was stored");
    assert_eq!(answer["envelope"]["status"], "completed");
    assert_eq!(answer["item"]["text"].as_str().unwrap(), streamed);

    // The log: deltas concatenate to the completed text; the turn completed.
    let (events, _) = home.spool_ok(&url, &["threads", "events", &thread]).await;
    let events = json_lines(&events);
    let item_id = answer["item"]["id"].as_str().unwrap();
    let deltas: String = events
        .iter()
        .filter(|e| e["method"] == "item/agentMessage/delta" && e["params"]["itemId"] == item_id)
        .map(|e| e["params"]["delta"].as_str().unwrap())
        .collect();
    assert!(
        events
            .iter()
            .filter(|e| e["method"] == "item/agentMessage/delta")
            .count()
            > 1,
        "the reply streamed in more than one delta"
    );
    assert_eq!(deltas, streamed);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "gap-free seqs"
    );
    let completed: Vec<&Value> = events
        .iter()
        .filter(|e| e["method"] == "turn/completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["params"]["turn"]["status"], "completed");
    assert!(
        events
            .iter()
            .any(|e| e["method"] == "thread/tokenUsage/updated"),
        "usage was recorded"
    );

    // The human form names both sides of the exchange.
    let (shown, _) = home.spool_ok(&url, &["threads", "show", &thread]).await;
    assert!(
        shown.contains("[user] What is the capital of France?"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("[assistant] {streamed}")),
        "{shown}"
    );
    let (listed, _) = home.spool_ok(&url, &["threads", "list"]).await;
    assert!(listed.contains(&thread), "{listed}");
}

#[tokio::test]
async fn run_over_the_responses_api() {
    run_and_check("responses").await;
}

#[tokio::test]
async fn run_over_chat_completions() {
    run_and_check("chat").await;
}

/// A second `run --thread` sends the first turn's question and answer to
/// the model, as seen by a proxy in front of the real server.
#[tokio::test]
async fn continuing_a_thread_sends_its_history() {
    for wire_api in ["responses", "chat"] {
        let proxy = RecordingProxy::start(&local_model_url()).await.unwrap();
        let url = proxy.url();
        let home = Home::new();
        let (first_answer, stderr) = home
            .spool_ok(
                &url,
                &[
                    "run",
                    "--max-output-tokens",
                    "48",
                    "--wire-api",
                    wire_api,
                    "Name one colour of the rainbow.",
                ],
            )
            .await;
        let thread = thread_id_from(&stderr);
        let (_, stderr2) = home
            .spool_ok(
                &url,
                &[
                    "run",
                    "--max-output-tokens",
                    "48",
                    "--wire-api",
                    wire_api,
                    "--thread",
                    &thread,
                    "And another one?",
                ],
            )
            .await;
        assert_eq!(thread_id_from(&stderr2), thread, "same thread");

        let requests = proxy.requests();
        assert_eq!(requests.len(), 2, "{wire_api}: one model request per turn");
        let second = requests[1].body_text();
        let first_answer = first_answer.trim();
        assert!(
            second.contains("Name one colour of the rainbow."),
            "{wire_api}: the first question is in the second request: {second}"
        );
        let answer_json = serde_json::to_string(first_answer).unwrap();
        assert!(
            second.contains(answer_json.trim_matches('"')),
            "{wire_api}: the first answer is in the second request: {second}"
        );
        assert!(second.contains("And another one?"));
        let first = requests[0].body_text();
        assert!(!first.contains("And another one?"));
        // The server counted more prompt tokens the second time.
        let (events, _) = home.spool_ok(&url, &["threads", "events", &thread]).await;
        let inputs: Vec<i64> = json_lines(&events)
            .iter()
            .filter(|e| e["method"] == "thread/tokenUsage/updated")
            .map(|e| {
                e["params"]["tokenUsage"]["last"]["inputTokens"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(inputs.len(), 2, "{wire_api}: usage per turn");
        assert!(inputs[1] > inputs[0], "{wire_api}: prompt grew: {inputs:?}");
    }
}
