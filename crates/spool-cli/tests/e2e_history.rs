//! `spool run --history-mode`: a thread whose history the Responses API
//! keeps sends only what is new, across processes; a provider that keeps
//! none is refused before anything runs.

mod support;

use serde_json::json;
use spool_testkit::{Reply, StatefulResponses};
use support::peer::Peer;
use support::rpc::Client;
use support::{Home, thread_id_from};

#[tokio::test]
async fn a_second_run_on_the_thread_continues_the_stored_response() {
    let server = StatefulResponses::start([Reply::message("Hi."), Reply::message("Bye.")])
        .await
        .unwrap();
    let home = Home::new();
    let url = server.url();
    let common = ["--base-url", url.as_str(), "--wire-api", "responses"];
    let first: Vec<&str> = common
        .iter()
        .copied()
        .chain(["run", "--history-mode", "previous-response-id", "hello"])
        .collect();
    let (_, stderr) = home.spool_ok(&url, &first).await;
    let thread = thread_id_from(&stderr);
    let second: Vec<&str> = common
        .iter()
        .copied()
        .chain(["run", "--thread", thread.as_str(), "goodbye"])
        .collect();
    home.spool_ok(&url, &second).await;

    let exchanges = server.exchanges();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(exchanges[1].status, 200, "{:?}", exchanges[1].error);
    assert_eq!(
        exchanges[1].body["previous_response_id"],
        json!(exchanges[0].response_id.clone().unwrap())
    );
    assert_eq!(
        exchanges[1].body["input"],
        json!([{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "goodbye"}]}])
    );

    // The mode is the thread's for life.
    let switch: Vec<&str> = common
        .iter()
        .copied()
        .chain([
            "run",
            "--thread",
            thread.as_str(),
            "--history-mode",
            "replay",
            "x",
        ])
        .collect();
    let out = home.spool(&url, &switch).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("fixed when it starts"), "{stderr}");
    assert_eq!(server.exchanges().len(), 2, "nothing was sent");
}

#[tokio::test]
async fn chat_completions_cannot_own_a_history() {
    let server = StatefulResponses::start([]).await.unwrap();
    let home = Home::new();
    let url = server.url();
    let args = [
        "--base-url",
        url.as_str(),
        "--wire-api",
        "chat",
        "run",
        "--history-mode",
        "conversation-id",
        "hello",
    ];
    let out = home.spool(&url, &args).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs the Responses API"), "{stderr}");
    assert!(server.exchanges().is_empty() && server.other_requests().is_empty());
}

#[tokio::test]
async fn thread_start_takes_the_history_owner_and_refuses_one_the_provider_cannot_keep() {
    let server = StatefulResponses::start([]).await.unwrap();
    let home = Home::new();
    let url = server.url();
    for (wire, accepted) in [("chat", false), ("responses", true)] {
        let mut client = Client::start(&home, &url, &["--base-url", &url, "--wire-api", wire]);
        client.initialize(json!({"spool": {"seq": true}})).await;
        let reply = client
            .call(
                1,
                "thread/start",
                json!({"historyMode": "previousResponseId"}),
            )
            .await;
        if accepted {
            let thread = &reply["result"]["thread"];
            assert_eq!(thread["historyOwner"], "previousResponseId", "{reply}");
        } else {
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
            let message = reply["error"]["message"].as_str().unwrap();
            assert!(message.contains("Chat Completions"), "{message}");
        }
        // Codex's own values of the name still mean paging.
        let paging = client
            .call(2, "thread/start", json!({"historyMode": "paginated"}))
            .await;
        assert_eq!(
            paging["result"]["thread"]["historyOwner"], "replay",
            "{paging}"
        );
        client.close().await;
    }
}
