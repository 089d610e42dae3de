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
                // Room to finish: the model answers this in 8–10 tokens, but
                // it samples (temperature 0.2), and with a limit of 48 one CI
                // run ended the answer `incomplete`, as it should at a limit.
                "--max-output-tokens",
                "256",
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
    assert_eq!(answer["envelope"]["status"], "completed", "{answer:#}");
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

/// About 600 o200k_base tokens of notes, numbered from `from`.
fn notes(from: usize) -> String {
    (from..from + 40)
        .map(|n| {
            format!(
                "Note {n}: shelf {n} in the Lyon depot holds {} boxes.",
                n * 3
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The local model's window is 2,048 tokens a request. Five turns of ~650
/// tokens each are more than one and a half times that: without
/// compaction the later
/// requests could not fit. With it (on by default for the local model),
/// every turn answers, the thread holds a `contextCompaction` with its
/// summary, and no request's prompt passes the window.
#[tokio::test]
async fn a_conversation_longer_than_the_context_window_keeps_answering() {
    let proxy = RecordingProxy::start(&local_model_url()).await.unwrap();
    let url = proxy.url();
    let home = Home::new();
    let mut thread: Option<String> = None;
    let mut sent = 0;
    for turn in 0..5 {
        let prompt = format!(
            "{} Which shelf did note {} mention?",
            notes(turn * 40),
            turn * 40
        );
        sent += spool_core::tokens::count_text(&prompt);
        let mut args = vec!["run", "--max-output-tokens", "32"];
        if let Some(thread) = &thread {
            args.extend(["--thread", thread.as_str()]);
        }
        args.push(&prompt);
        let (answer, stderr) = home.spool_ok(&url, &args).await;
        assert!(!answer.trim().is_empty(), "turn {turn} answered: {stderr}");
        thread = Some(thread_id_from(&stderr));
    }
    assert!(
        sent > 3 * 2048 / 2,
        "the conversation outgrew the window: {sent} tokens"
    );
    let thread = thread.unwrap();

    let (items, _) = home
        .spool_ok(
            &url,
            &["threads", "show", &thread, "--view", "all", "--json"],
        )
        .await;
    let compactions: Vec<Value> = json_lines(&items)
        .into_iter()
        .filter(|i| i["item"]["type"] == "contextCompaction")
        .collect();
    assert!(!compactions.is_empty(), "the thread was compacted");
    for compaction in &compactions {
        assert_eq!(
            compaction["envelope"]["status"], "completed",
            "{compaction}"
        );
        let summary = compaction["item"]["summary"].as_str().unwrap_or_default();
        assert!(!summary.trim().is_empty(), "{compaction}");
        assert!(
            compaction["item"]["replaces"]["throughSeq"]
                .as_u64()
                .is_some()
        );
    }
    // Every original user message is still in the log.
    let users = json_lines(&items)
        .iter()
        .filter(|i| i["item"]["type"] == "userMessage")
        .count();
    assert_eq!(users, 5);

    // What the server counted for each request stayed within its window.
    let (events, _) = home.spool_ok(&url, &["threads", "events", &thread]).await;
    let inputs: Vec<i64> = json_lines(&events)
        .iter()
        .filter(|e| e["method"] == "thread/tokenUsage/updated")
        .filter_map(|e| e["params"]["tokenUsage"]["last"]["inputTokens"].as_i64())
        .collect();
    assert!(inputs.len() >= 5, "{inputs:?}");
    assert!(inputs.iter().all(|&n| n < 2048), "prompt tokens {inputs:?}");
    assert!(proxy.requests().len() > 5, "a summarizing request was made");

    // The control: the same server as a provider with no known window
    // (so no compaction) cannot go on past the third turn.
    let control = Home::new();
    std::fs::write(
        control.path().join("spool.toml"),
        format!(
            "provider = \"plain\"\n[providers.plain]\nbase_url = \"{}\"\n\
             model = \"SmolLM2-135M-Instruct\"\n",
            local_model_url()
        ),
    )
    .unwrap();
    let mut thread: Option<String> = None;
    let mut refused = None;
    for turn in 0..3 {
        let prompt = format!(
            "{} Which shelf did note {} mention?",
            notes(turn * 40),
            turn * 40
        );
        let mut args = vec!["run", "--max-output-tokens", "32"];
        if let Some(thread) = &thread {
            args.extend(["--thread", thread.as_str()]);
        }
        args.push(&prompt);
        let out = control.spool(&url, &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            refused = Some(stderr);
            break;
        }
        thread = Some(thread_id_from(&stderr));
    }
    let refused = refused.expect("without compaction the conversation outgrows the window");
    assert!(refused.contains("context size"), "{refused}");
}
