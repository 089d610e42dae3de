//! The runner against a scripted SSE server on a real socket and a real
//! SQLite store: what is stored when a response succeeds, fails, drops or
//! is interrupted. Every turn ends with exactly one `turn/completed`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use spool_model::{ProviderConfig, ResponsesProvider, RetryPolicy};
use spool_protocol::*;
use spool_runtime::{Agent, RunResult, RunStatus, Runner};
use spool_store::{Appended, NewThread, SqliteStore, Store, StoreOptions};
use spool_testkit::{Gate, ScriptedResponse, ScriptedServer};
use tokio::sync::{mpsc, watch};

fn ev(name: &str, mut data: Value) -> (String, Value) {
    data["type"] = json!(name);
    (name.to_owned(), data)
}

fn added(index: usize, item: Value) -> (String, Value) {
    ev(
        "response.output_item.added",
        json!({"output_index": index, "item": item}),
    )
}

fn done(index: usize, item: Value) -> (String, Value) {
    ev(
        "response.output_item.done",
        json!({"output_index": index, "item": item}),
    )
}

fn text_delta(id: &str, delta: &str) -> (String, Value) {
    ev(
        "response.output_text.delta",
        json!({"item_id": id, "output_index": 0, "delta": delta}),
    )
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    thread_id: String,
    server: ScriptedServer,
}

async fn fixture(responses: Vec<ScriptedResponse>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
    let thread = store
        .create_thread(NewThread::new("scripted", "/tmp"))
        .await
        .unwrap();
    let server = ScriptedServer::with_responses(responses).await.unwrap();
    Fixture {
        _dir: dir,
        store,
        thread_id: thread.thread.id,
        server,
    }
}

/// An agent with no tools on the scripted model.
fn agent() -> Arc<Agent> {
    Arc::new(Agent::new("assistant", "/tmp").with_model("scripted-model"))
}

fn runner(f: &Fixture, retry: RetryPolicy) -> Runner<SqliteStore> {
    let provider =
        ResponsesProvider::new(ProviderConfig::new("scripted", f.server.url()).with_retry(retry));
    Runner::new(f.store.clone(), Arc::new(provider))
}

/// Runs one turn; returns its result and every event streamed.
async fn turn(f: &Fixture, stop: watch::Receiver<bool>) -> (RunResult, Vec<Appended>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let outcome = runner(f, RetryPolicy::fast(2))
        .run_streamed(
            agent(),
            &f.thread_id,
            vec![UserInput::text("hi")],
            &tx,
            stop,
        )
        .await
        .unwrap();
    drop(tx);
    let mut streamed = Vec::new();
    while let Some(e) = rx.recv().await {
        streamed.push(e);
    }
    (outcome, streamed)
}

fn never() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    std::mem::forget(tx);
    rx
}

/// Checks the log of the thread: gap-free, exactly one turn/completed, the
/// streamed events are exactly the stored ones; returns the stored events.
async fn check_log(f: &Fixture, streamed: &[Appended]) -> Vec<ThreadEvent> {
    f.store.flush().await.unwrap();
    let events = f.store.events_after(&f.thread_id, 0, 10_000).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let completions = events
        .iter()
        .filter(|e| matches!(e.payload, ServerNotification::TurnCompleted(_)))
        .count();
    assert_eq!(completions, 1, "exactly one turn/completed");
    let logged: Vec<&ThreadEvent> = streamed.iter().filter_map(Appended::event).collect();
    assert_eq!(
        logged,
        events.iter().skip(1).collect::<Vec<_>>(),
        "streamed = stored"
    );
    events
}

#[tokio::test]
async fn reasoning_message_and_function_call_become_items() {
    let f = fixture(vec![ScriptedResponse::sse([
        ev("response.created", json!({"response": {"id": "resp_1"}})),
        added(0, json!({"type": "reasoning", "id": "rs_1", "summary": []})),
        ev(
            "response.reasoning_summary_text.delta",
            json!({"item_id": "rs_1", "summary_index": 0, "delta": "Thinking"}),
        ),
        done(
            0,
            json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Thinking hard"}]}),
        ),
        added(1, json!({"type": "message", "id": "m_1", "role": "assistant", "content": []})),
        text_delta("m_1", "Let me "),
        text_delta("m_1", "check."),
        done(
            1,
            json!({"type": "message", "id": "m_1", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]}),
        ),
        added(
            2,
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "lookup", "arguments": ""}),
        ),
        ev(
            "response.function_call_arguments.delta",
            json!({"item_id": "fc_1", "output_index": 2, "delta": "{\"q\":1}"}),
        ),
        done(
            2,
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "lookup", "arguments": "{\"q\":1}"}),
        ),
        ev(
            "response.completed",
            json!({"response": {"id": "resp_1", "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}}}),
        ),
    ]),
    // The failed call goes back to the model, which answers.
    ScriptedResponse::sse([
        added(0, json!({"type": "message", "id": "m_2", "role": "assistant", "content": []})),
        text_delta("m_2", "No such tool."),
        done(
            0,
            json!({"type": "message", "id": "m_2", "role": "assistant", "content": [{"type": "output_text", "text": "No such tool."}]}),
        ),
        ev(
            "response.completed",
            json!({"response": {"id": "resp_2", "usage": {"input_tokens": 20, "output_tokens": 2, "total_tokens": 22}}}),
        ),
    ])])
    .await;
    let (outcome, streamed) = turn(&f, never()).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.final_output(), Some("No such tool."));
    assert_eq!(outcome.usage.unwrap().total_tokens, 18 + 22);
    check_log(&f, &streamed).await;

    let items = f
        .store
        .items(&f.thread_id, spool_core::View::All)
        .await
        .unwrap();
    let kinds: Vec<ItemKind> = items.iter().map(|r| r.item.kind()).collect();
    assert_eq!(
        kinds,
        [
            ItemKind::UserMessage,
            ItemKind::Reasoning,
            ItemKind::AgentMessage,
            ItemKind::FunctionCall,
            ItemKind::AgentMessage
        ]
    );
    assert!(
        matches!(&items[1].item, ThreadItem::Reasoning { summary, .. } if summary == &["Thinking hard"])
    );
    let ThreadItem::FunctionCall {
        call_id,
        arguments,
        status,
        output,
        ..
    } = &items[3].item
    else {
        unreachable!()
    };
    assert_eq!(
        (call_id.as_str(), arguments.as_str()),
        ("call_9", "{\"q\":1}")
    );
    // The agent has no such tool: the call is answered as failed, and says
    // why.
    assert_eq!(*status, FunctionCallStatus::Failed);
    assert!(
        output
            .as_deref()
            .unwrap()
            .contains("no tool named `lookup`")
    );
    assert_eq!(
        items[2].envelope.provider_data.as_ref().unwrap()["id"],
        json!("m_1"),
        "the provider's ids stay in providerData"
    );
    let turns = f.store.turns(&f.thread_id).await.unwrap();
    assert_eq!(turns[0].token_usage.unwrap().total_tokens, 18 + 22);
}

#[tokio::test]
async fn a_dropped_stream_fails_the_turn_and_keeps_the_partial_text() {
    let f = fixture(vec![
        ScriptedResponse::sse([
            ev("response.created", json!({"response": {"id": "resp_1"}})),
            added(
                0,
                json!({"type": "message", "id": "m_1", "role": "assistant", "content": []}),
            ),
            text_delta("m_1", "Half an "),
            text_delta("m_1", "answer"),
        ])
        .abort(),
    ])
    .await;
    let (outcome, streamed) = turn(&f, never()).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        matches!(
            error.codex_error_info,
            Some(CodexErrorInfo::ResponseStreamDisconnected { .. })
        ),
        "{error:?}"
    );
    let events = check_log(&f, &streamed).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.payload, ServerNotification::Error(n) if !n.will_retry))
    );
    let items = f
        .store
        .items(&f.thread_id, spool_core::View::All)
        .await
        .unwrap();
    let answer = &items[1];
    assert_eq!(answer.envelope.status, ItemStatus::Incomplete);
    assert!(
        matches!(&answer.item, ThreadItem::AgentMessage { text, .. } if text == "Half an answer")
    );
    assert_eq!(
        f.server.requests().len(),
        1,
        "no retry after output streamed"
    );
}

#[tokio::test]
async fn an_http_error_fails_the_turn_with_the_providers_message() {
    let f = fixture(vec![ScriptedResponse::json(
        400,
        &json!({"error": {"message": "Unknown model scripted-model"}}),
    )])
    .await;
    let (outcome, streamed) = turn(&f, never()).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.message.contains("Unknown model scripted-model"),
        "{}",
        error.message
    );
    assert_eq!(error.codex_error_info, Some(CodexErrorInfo::BadRequest));
    check_log(&f, &streamed).await;
    let turns = f.store.turns(&f.thread_id).await.unwrap();
    assert_eq!(turns[0].status, TurnStatus::Failed);
    assert_eq!(turns[0].error.as_ref().unwrap().message, error.message);
}

#[tokio::test]
async fn an_interrupt_mid_stream_ends_the_turn_interrupted() {
    let gate = Gate::new();
    let f = fixture(vec![
        ScriptedResponse::sse([
            ev("response.created", json!({"response": {"id": "resp_1"}})),
            added(
                0,
                json!({"type": "message", "id": "m_1", "role": "assistant", "content": []}),
            ),
            text_delta("m_1", "Stream"),
        ])
        .wait_for(&gate),
    ])
    .await;
    let (stop_tx, stop_rx) = watch::channel(false);
    let runner = runner(&f, RetryPolicy::default());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let run = runner.run_streamed(
        agent(),
        &f.thread_id,
        vec![UserInput::text("hi")],
        &tx,
        stop_rx,
    );
    let watcher = async {
        let mut seen = Vec::new();
        while let Some(e) = rx.recv().await {
            let is_delta = matches!(e.notification(), ServerNotification::AgentMessageDelta(_));
            seen.push(e);
            if is_delta {
                stop_tx.send(true).unwrap();
                break;
            }
        }
        seen
    };
    let (outcome, mut streamed) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(run, watcher)
    })
    .await
    .expect("the interrupt ends the turn");
    let outcome = outcome.unwrap();
    drop(tx);
    while let Some(e) = rx.recv().await {
        streamed.push(e);
    }
    assert_eq!(outcome.status, RunStatus::Interrupted);
    check_log(&f, &streamed).await;
    let items = f
        .store
        .items(&f.thread_id, spool_core::View::All)
        .await
        .unwrap();
    assert_eq!(items[1].envelope.status, ItemStatus::Incomplete);
    assert!(matches!(&items[1].item, ThreadItem::AgentMessage { text, .. } if text == "Stream"));
}

#[tokio::test]
async fn the_second_turn_sends_the_first_as_history() {
    let reply = |text: &str| {
        ScriptedResponse::sse([
            added(
                0,
                json!({"type": "message", "id": "m", "role": "assistant", "content": []}),
            ),
            text_delta("m", text),
            done(
                0,
                json!({"type": "message", "id": "m", "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
            ),
            ev("response.completed", json!({"response": {"id": "r"}})),
        ])
    };
    let f = fixture(vec![reply("first answer"), reply("second answer")]).await;
    turn(&f, never()).await;
    turn(&f, never()).await;
    let requests = f.server.requests();
    let input = requests[1].body["input"].as_array().unwrap().clone();
    let texts: Vec<String> = input
        .iter()
        .map(|i| {
            i["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(texts, ["hi", "first answer", "hi"]);
    assert_eq!(input[1]["role"], "assistant");
}

#[tokio::test]
async fn an_index_past_any_real_response_fails_the_turn_instead_of_allocating() {
    let f = fixture(vec![ScriptedResponse::sse([
        ev("response.created", json!({"response": {"id": "resp_1"}})),
        added(0, json!({"type": "reasoning", "id": "rs_1", "summary": []})),
        ev(
            "response.reasoning_summary_text.delta",
            json!({"item_id": "rs_1", "summary_index": 1_000_000_000_000u64, "delta": "x"}),
        ),
    ])])
    .await;
    let (outcome, streamed) = turn(&f, never()).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.message.contains("summary_index") && error.message.contains("4096"),
        "{}",
        error.message
    );
    check_log(&f, &streamed).await;
}

/// One message, "The answer is", closed with `item_status`, then the
/// response's end: cut by the token limit (`cut`) or completed.
fn one_message(item_status: &str, cut: bool) -> ScriptedResponse {
    let end = match cut {
        true => ev(
            "response.incomplete",
            json!({"response": {"id": "resp_1", "status": "incomplete",
                                "incomplete_details": {"reason": "max_output_tokens"}}}),
        ),
        false => ev("response.completed", json!({"response": {"id": "resp_1"}})),
    };
    ScriptedResponse::sse([
        ev("response.created", json!({"response": {"id": "resp_1"}})),
        added(
            0,
            json!({"type": "message", "id": "m_1", "role": "assistant", "content": []}),
        ),
        text_delta("m_1", "The answer is"),
        done(
            0,
            json!({"type": "message", "id": "m_1", "role": "assistant", "status": item_status,
                   "content": [{"type": "output_text", "text": "The answer is"}]}),
        ),
        end,
    ])
}

/// The turn's answer as stored, after checking the log against the stream.
async fn answer_of(response: ScriptedResponse) -> spool_core::ItemRecord {
    let f = fixture(vec![response]).await;
    let (_, streamed) = turn(&f, never()).await;
    check_log(&f, &streamed).await;
    let items = f
        .store
        .items(&f.thread_id, spool_core::View::All)
        .await
        .unwrap();
    let answer = items[1].clone();
    assert!(
        matches!(&answer.item, ThreadItem::AgentMessage { text, .. } if text == "The answer is")
    );
    answer
}

#[tokio::test]
async fn a_reply_cut_by_the_token_limit_ends_its_message_incomplete() {
    let answer = answer_of(one_message("incomplete", true)).await;
    assert_eq!(answer.envelope.status, ItemStatus::Incomplete);
}

#[tokio::test]
async fn a_message_marked_done_before_the_response_says_it_was_cut_ends_incomplete() {
    // The provider closes the message as `completed`, and only the
    // response's end says the token limit cut it.
    let answer = answer_of(one_message("completed", true)).await;
    assert_eq!(answer.envelope.status, ItemStatus::Incomplete);
    let reason = answer
        .envelope
        .provider_data
        .as_ref()
        .and_then(|raw| raw.pointer("/incomplete_details/reason"))
        .cloned();
    assert_eq!(reason, Some(json!("max_output_tokens")));
}

#[tokio::test]
async fn a_message_of_a_response_that_completes_stays_completed() {
    let answer = answer_of(one_message("completed", false)).await;
    assert_eq!(answer.envelope.status, ItemStatus::Completed);
}
