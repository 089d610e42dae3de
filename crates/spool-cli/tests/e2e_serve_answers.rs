//! No answer leaves a turn waiting: an approval answered with a JSON-RPC
//! error is a decline, recorded as such; an answer of the wrong shape is
//! refused back with the answers the request takes, and the request stays
//! open for a right one.

mod support;

use serde_json::json;
use support::rpc::{Client, method_of};
use support::*;

/// Starts a turn whose command needs the client's approval; returns the
/// request.
async fn asked(client: &mut Client) -> serde_json::Value {
    let thread_id = client.approval_thread().await;
    client
        .call(
            2,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "touch it"}]}),
        )
        .await;
    client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await
}

#[tokio::test]
async fn an_error_answer_is_a_decline_and_the_turn_goes_on() {
    let model = model_touching("never.txt", "Fine, not touched.").await;
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let request = asked(&mut client).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"],
                     "error": {"code": -32000, "message": "the user closed the dialog"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert!(!home.path().join("never.txt").exists());
    let item = client
        .until(|m| {
            method_of(m) == "item/completed" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    assert_eq!(item["params"]["item"]["status"], "declined", "{item}");
    client.close().await;
}

#[tokio::test]
async fn a_wrong_answer_is_refused_back_and_a_right_one_still_counts() {
    let model = model_touching("touched.txt", "Touched.").await;
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let request = asked(&mut client).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "maybe"}}))
        .await;
    let refused = client
        .until(|m| m["id"] == request["id"] && m.get("error").is_some())
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("item/commandExecution/requestApproval")
            && message.contains("\"acceptForSession\"")
            && message.contains("\"decline\""),
        "names the answers it takes: {message}"
    );
    assert!(!home.path().join("touched.txt").exists());
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "accept"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert!(
        home.path().join("touched.txt").exists(),
        "the right answer ran it"
    );
    client.close().await;
}
