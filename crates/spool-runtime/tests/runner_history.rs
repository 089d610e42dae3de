//! Who owns the conversation: in each history mode, against a Responses
//! server that keeps what it is sent (and refuses an item twice or an
//! output without its call), every request carries exactly what the
//! server lacks — nothing twice, nothing missing.

use std::sync::Arc;

use serde_json::{Value, json};
use spool_model::{ProviderConfig, ResponsesProvider, RetryPolicy};
use spool_protocol::{HistoryMode, UserInput};
use spool_runtime::{Agent, RunStatus, Runner, Tool};
use spool_store::{NewThread, SqliteStore, Store, StoreOptions};
use spool_testkit::{Exchange, Reply, StatefulResponses};
use spool_tools::function::FunctionTool;

struct Setup {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    thread_id: String,
    server: StatefulResponses,
}

async fn setup(mode: HistoryMode, replies: Vec<Reply>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
    let mut new = NewThread::new("stateful", "/tmp");
    new.history_mode = mode;
    let thread = store.create_thread(new).await.unwrap();
    let server = StatefulResponses::start(replies).await.unwrap();
    Setup {
        _dir: dir,
        store,
        thread_id: thread.thread.id,
        server,
    }
}

impl Setup {
    fn runner(&self, retry: RetryPolicy) -> Runner<SqliteStore> {
        let config = ProviderConfig::new("stateful", self.server.url()).with_retry(retry);
        Runner::new(self.store.clone(), Arc::new(ResponsesProvider::new(config)))
    }

    async fn turn(&self, runner: &Runner<SqliteStore>, text: &str) -> RunStatus {
        runner
            .run(agent(), &self.thread_id, vec![UserInput::text(text)])
            .await
            .unwrap()
            .status
    }
}

/// An agent with a `weather` tool that answers at once.
fn agent() -> Arc<Agent> {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let weather = FunctionTool::new("weather", "the weather", schema, |args, _| async move {
        Ok(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
    })
    .unwrap();
    Arc::new(
        Agent::new("assistant", "/tmp")
            .with_model("stateful-model")
            .with_tool(Tool::Function(weather)),
    )
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": text}]})
}

fn output(call_id: &str, text: &str) -> Value {
    json!({"type": "function_call_output", "call_id": call_id, "output": text})
}

fn input(exchange: &Exchange) -> Vec<Value> {
    exchange.body["input"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Three turns, the first two with a tool call each.
fn three_turns() -> Vec<Reply> {
    vec![
        Reply::call("call_1", "weather", json!({"city": "Paris"})),
        Reply::message("Sunny in Paris."),
        Reply::call("call_2", "weather", json!({"city": "Rome"})),
        Reply::message("Sunny in Rome."),
        Reply::message("You are welcome."),
    ]
}

async fn converse(setup: &Setup) {
    let runner = setup.runner(RetryPolicy::none());
    for text in ["weather in Paris?", "and Rome?", "thanks"] {
        assert_eq!(setup.turn(&runner, text).await, RunStatus::Completed);
    }
}

/// What the server holds once the conversation is over, each item by
/// type and text or call id.
fn shapes(context: &[Value]) -> Vec<String> {
    context
        .iter()
        .map(|item| match item["type"].as_str() {
            Some("function_call") => format!("call {}", item["call_id"].as_str().unwrap()),
            Some("function_call_output") => {
                format!("output {}", item["call_id"].as_str().unwrap())
            }
            _ => {
                let role = item["role"].as_str().unwrap_or("?");
                let text = item["content"][0]["text"].as_str().unwrap_or("?");
                format!("{role}: {text}")
            }
        })
        .collect()
}

const WHOLE: [&str; 11] = [
    "user: weather in Paris?",
    "call call_1",
    "output call_1",
    "assistant: Sunny in Paris.",
    "user: and Rome?",
    "call call_2",
    "output call_2",
    "assistant: Sunny in Rome.",
    "user: thanks",
    "assistant: You are welcome.",
    "",
];

fn assert_every_request_accepted(exchanges: &[Exchange]) {
    for (n, exchange) in exchanges.iter().enumerate() {
        assert_eq!(exchange.status, 200, "request {n}: {:?}", exchange.error);
    }
}

/// The deltas of a server-managed history: what the server lacked.
fn expected_deltas() -> Vec<Vec<Value>> {
    vec![
        vec![user("weather in Paris?")],
        vec![output("call_1", "sunny in Paris")],
        vec![user("and Rome?")],
        vec![output("call_2", "sunny in Rome")],
        vec![user("thanks")],
    ]
}

#[tokio::test]
async fn previous_response_id_sends_only_what_the_server_lacks() {
    let setup = setup(HistoryMode::PreviousResponseId, three_turns()).await;
    converse(&setup).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    let deltas: Vec<Vec<Value>> = exchanges.iter().map(input).collect();
    assert_eq!(deltas, expected_deltas());
    for (n, exchange) in exchanges.iter().enumerate() {
        assert_eq!(exchange.body["store"], json!(true), "request {n}");
        let previous = exchange.body.get("previous_response_id").cloned();
        let expected = n
            .checked_sub(1)
            .map(|before| json!(exchanges[before].response_id.clone().unwrap()));
        assert_eq!(previous, expected, "request {n} continues the one before");
    }
    let last = exchanges.last().unwrap();
    assert_eq!(shapes(&last.context), WHOLE[..9]);
    let stored = setup
        .store
        .history(&setup.thread_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.cursor.previous_response_id, last.response_id,
        "the next turn continues from the last response"
    );
}

#[tokio::test]
async fn a_conversation_id_is_created_once_and_named_by_every_request() {
    let setup = setup(HistoryMode::ConversationId, three_turns()).await;
    converse(&setup).await;
    let created = setup.server.other_requests();
    assert_eq!(created.len(), 1, "one conversation created");
    assert!(created[0].path.ends_with("/conversations"));
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    let deltas: Vec<Vec<Value>> = exchanges.iter().map(input).collect();
    assert_eq!(deltas, expected_deltas());
    let conversation = exchanges[0].body["conversation"].clone();
    assert!(conversation.as_str().unwrap().starts_with("conv_"));
    for exchange in &exchanges {
        assert_eq!(exchange.body["conversation"], conversation);
        assert_eq!(exchange.body.get("previous_response_id"), None);
    }
    assert_eq!(shapes(&exchanges.last().unwrap().context), WHOLE[..9]);
}

#[tokio::test]
async fn replay_sends_the_whole_history_each_time() {
    let setup = setup(HistoryMode::Replay, three_turns()).await;
    converse(&setup).await;
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    for exchange in &exchanges {
        assert_eq!(exchange.body.get("previous_response_id"), None);
        assert_eq!(exchange.body.get("conversation"), None);
    }
    assert_eq!(shapes(&input(exchanges.last().unwrap())), WHOLE[..9]);
}

#[tokio::test]
async fn a_retried_request_is_the_failed_one_and_a_failed_turn_loses_nothing() {
    let replies = vec![
        Reply::message("Hello."),
        // The transport retries the second request once: same body.
        Reply::Fail(500),
        Reply::message("Two."),
        // The third turn fails outright (no retry left).
        Reply::Fail(500),
        Reply::Fail(500),
        Reply::message("Four."),
    ];
    let setup = setup(HistoryMode::PreviousResponseId, replies).await;
    let runner = setup.runner(RetryPolicy::fast(2));
    assert_eq!(setup.turn(&runner, "one").await, RunStatus::Completed);
    assert_eq!(setup.turn(&runner, "two").await, RunStatus::Completed);
    assert_eq!(setup.turn(&runner, "three").await, RunStatus::Failed);
    assert_eq!(setup.turn(&runner, "four").await, RunStatus::Completed);
    let exchanges = setup.server.exchanges();
    assert_eq!(exchanges.len(), 6);
    assert_eq!(exchanges[1].status, 500);
    assert_eq!(
        exchanges[2].body, exchanges[1].body,
        "the retry is the same request"
    );
    assert_eq!(input(&exchanges[2]), [user("two")]);
    // Turn three never reached the server: turn four carries it too,
    // chained to turn two's response.
    assert_eq!(input(&exchanges[5]), [user("three"), user("four")]);
    assert_eq!(
        exchanges[5].body["previous_response_id"],
        json!(exchanges[2].response_id.clone().unwrap())
    );
    assert_eq!(exchanges[5].status, 200, "{:?}", exchanges[5].error);
}

#[tokio::test]
async fn a_response_without_an_id_does_not_break_the_chain() {
    let replies = vec![
        Reply::message("One."),
        Reply::MessageWithoutId("Two.".into()),
        Reply::message("Three."),
    ];
    let setup = setup(HistoryMode::PreviousResponseId, replies).await;
    let runner = setup.runner(RetryPolicy::none());
    for text in ["one", "two", "three"] {
        assert_eq!(setup.turn(&runner, text).await, RunStatus::Completed);
    }
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    // The third request continues from the first response, and carries
    // what the second (unstored) exchange said.
    assert_eq!(
        exchanges[2].body["previous_response_id"],
        json!(exchanges[0].response_id.clone().unwrap())
    );
    assert_eq!(
        shapes(&input(&exchanges[2])),
        ["user: two", "assistant: Two.", "user: three"]
    );
    assert_eq!(
        shapes(&exchanges[2].context),
        [
            "user: one",
            "assistant: One.",
            "user: two",
            "assistant: Two.",
            "user: three"
        ]
    );
}
