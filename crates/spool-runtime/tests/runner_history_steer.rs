//! Steer input in each history mode: a user message logged into the
//! running turn from outside (as `turn/steer` logs it) goes to the model
//! with the next request exactly once, in the delta the provider lacks
//! when it holds the history.

mod history_support;

use std::sync::Arc;

use history_support::*;
use serde_json::{Value, json};
use spool_model::RetryPolicy;
use spool_protocol::{
    HistoryMode, ItemCompletedNotification, ItemEnvelope, ItemStartedNotification, ItemStatus,
    ServerNotification, ThreadItem, UserInput,
};
use spool_runtime::{Agent, RunStatus, Tool};
use spool_store::{SqliteStore, Store};
use spool_testkit::Reply;
use spool_tools::function::FunctionTool;
use tokio::sync::watch;

const STEER: &str = "also: bring an umbrella?";

/// The events `turn/steer` logs: a finished user message of the turn.
fn steer_events(thread_id: &str, turn_id: &str) -> Vec<ServerNotification> {
    let item = ThreadItem::user_message(format!("steer-{turn_id}"), vec![UserInput::text(STEER)]);
    let open = ItemEnvelope::started("user", item.kind().default_audience(), 1);
    let done = ItemEnvelope {
        status: ItemStatus::Completed,
        completed_at_ms: Some(1),
        ..open.clone()
    };
    vec![
        ServerNotification::ItemStarted(ItemStartedNotification {
            item: item.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            started_at_ms: 1,
            envelope: Some(open),
        }),
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item,
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            completed_at_ms: 1,
            envelope: Some(done),
        }),
    ]
}

/// An agent whose `weather` tool, while it runs, has a client steer the
/// turn: the message is logged in the running turn and the run is told.
fn steered_agent(
    store: SqliteStore,
    thread_id: String,
    input: Arc<watch::Sender<u64>>,
) -> Arc<Agent> {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let weather = FunctionTool::new("weather", "the weather", schema, move |_, _| {
        let (store, thread_id, input) = (store.clone(), thread_id.clone(), input.clone());
        async move {
            let turns = store.turns(&thread_id).await.unwrap();
            let turn = turns.last().unwrap();
            store
                .append(&thread_id, steer_events(&thread_id, &turn.id))
                .await
                .unwrap();
            input.send_modify(|count| *count += 1);
            Ok("rain in Oslo".to_owned())
        }
    })
    .unwrap();
    Arc::new(
        Agent::new("assistant", "/tmp")
            .with_model("stateful-model")
            .with_tool(Tool::Function(weather)),
    )
}

async fn steered_turn(mode: HistoryMode) -> Setup {
    let replies = vec![
        Reply::call("call_1", "weather", json!({"city": "Oslo"})),
        Reply::message("Rain in Oslo: yes, take one."),
        Reply::message("Any time."),
    ];
    let setup = setup(mode, replies).await;
    let (input, watched) = watch::channel(0);
    let mut runner = setup.runner(RetryPolicy::none());
    runner.more_input = Some(watched);
    let agent = steered_agent(
        setup.store.clone(),
        setup.thread_id.clone(),
        Arc::new(input),
    );
    let result = setup.run(&runner, agent.clone(), "weather in Oslo?").await;
    assert_eq!(result.status, RunStatus::Completed);
    // The next turn carries nothing of the steered one again.
    assert_eq!(
        setup.run(&runner, agent, "thanks").await.status,
        RunStatus::Completed
    );
    setup
}

/// In a server-managed mode each request carries only what the server
/// lacks: the steer goes with the tool's output, once.
fn expected_deltas() -> Vec<Vec<Value>> {
    vec![
        vec![user("weather in Oslo?")],
        vec![output("call_1", "rain in Oslo"), user(STEER)],
        vec![user("thanks")],
    ]
}

#[tokio::test]
async fn previous_response_id_sends_a_steer_once_with_the_next_delta() {
    let setup = steered_turn(HistoryMode::PreviousResponseId).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    let deltas: Vec<Vec<Value>> = exchanges.iter().map(input).collect();
    assert_eq!(deltas, expected_deltas());
    assert_eq!(
        exchanges[1].body["previous_response_id"],
        json!(exchanges[0].response_id.clone().unwrap())
    );
    // The server's whole history has the steer once, after the output.
    assert_eq!(
        shapes(&exchanges[2].context),
        [
            "user: weather in Oslo?",
            "call call_1",
            "output call_1",
            &format!("user: {STEER}"),
            "assistant: Rain in Oslo: yes, take one.",
            "user: thanks",
        ]
    );
}

#[tokio::test]
async fn a_conversation_gets_a_steer_once_with_the_next_delta() {
    let setup = steered_turn(HistoryMode::ConversationId).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    let deltas: Vec<Vec<Value>> = exchanges.iter().map(input).collect();
    assert_eq!(deltas, expected_deltas());
}

#[tokio::test]
async fn replay_sends_a_steer_in_its_place_in_the_history() {
    let setup = steered_turn(HistoryMode::Replay).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    assert_eq!(
        shapes(&input(&exchanges[1])),
        [
            "user: weather in Oslo?",
            "call call_1",
            "output call_1",
            &format!("user: {STEER}"),
        ]
    );
}
