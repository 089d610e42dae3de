//! Who owns the conversation: in each history mode, against a Responses
//! server that keeps what it is sent (and refuses an item twice or an
//! output without its call), every request carries exactly what the
//! server lacks — nothing twice, nothing missing.

mod history_support;

use history_support::*;
use serde_json::{Value, json};
use spool_model::RetryPolicy;
use spool_protocol::HistoryMode;
use spool_runtime::RunStatus;
use spool_store::Store;
use spool_testkit::Reply;

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
