//! Where Codex clients notice how a server behaves, spool behaves as
//! Codex's app server does: a steer reaches the running turn's model in
//! that turn; `turn/start` during a turn feeds the running turn; thread
//! status changes are announced; reverts and unarchives are announced;
//! opted-out notifications are not sent; `turn/completed` carries the
//! turn's items; oversized input is refused; a wrong turn id names the
//! running turn.

mod support;

use serde_json::{Value, json};
use spool_testkit::responses_api::{message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

fn text(thread_id: &str, text: &str) -> Value {
    json!({"threadId": thread_id, "input": [{"type": "text", "text": text}]})
}

/// A model whose first answer streams "Working", waits for `gate`, then
/// ends; its second answer is "Steered.".
async fn gated_model(gate: &Gate) -> ScriptedServer {
    ScriptedServer::with_responses([
        paced_message_response(
            "r1",
            &["Working"],
            gate,
            &[" on it."],
            std::time::Duration::from_millis(1),
        ),
        message_response("r2", &["Steered."]),
    ])
    .await
    .unwrap()
}

/// Starts a thread and a turn on the gated model; returns the thread and
/// turn ids once the first delta arrived (the model is answering).
async fn turn_in_progress(client: &mut Client) -> (String, String) {
    client.initialize(json!({})).await;
    let thread_id = thread_id_of(&client.call(1, "thread/start", json!({})).await);
    let started = client
        .call(2, "turn/start", text(&thread_id, "start"))
        .await;
    let turn_id = started["result"]["turn"]["id"].as_str().unwrap().to_owned();
    client
        .until(|m| method_of(m) == "item/agentMessage/delta")
        .await;
    (thread_id, turn_id)
}

fn assert_second_request_carries(model: &ScriptedServer, said: &str) {
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one more model call in the same turn");
    let second = requests[1].body_text();
    assert!(second.contains(said), "{second}");
}

#[tokio::test]
async fn a_steer_while_the_model_answers_reaches_the_model_in_the_same_turn() {
    let gate = Gate::new();
    let model = gated_model(&gate).await;
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    let (thread_id, turn_id) = turn_in_progress(&mut client).await;
    let steered = client
        .call(
            3,
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": turn_id,
                   "input": [{"type": "text", "text": "and mind the steer"}]}),
        )
        .await;
    assert_eq!(steered["result"]["turnId"], turn_id.as_str(), "{steered}");
    gate.open();
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["id"], turn_id.as_str());
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert_second_request_carries(&model, "and mind the steer");
    let completions = client
        .seen
        .iter()
        .filter(|m| method_of(m) == "turn/completed")
        .count();
    assert_eq!(completions, 1);
    client.close().await;
}
