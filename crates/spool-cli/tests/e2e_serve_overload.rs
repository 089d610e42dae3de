//! Bounded queues: requests that find a connection's queue full are
//! answered -32001 (overloaded) at once; every request still gets exactly
//! one reply, and the server keeps serving.

mod support;

use std::collections::HashMap;

use serde_json::{Value, json};
use support::rpc::Client;
use support::*;

#[tokio::test]
async fn a_flood_of_requests_gets_overloaded_replies_and_one_reply_each() {
    let home = Home::new();
    let mut client = Client::start_with_env(
        &home,
        "http://127.0.0.1:9/v1",
        &[],
        &[("SPOOL_SERVE_MAX_QUEUED", "2")],
    );
    client.initialize(json!({})).await;
    // One write holding many requests: the server reads them faster than
    // it answers them.
    let burst: String = (1..=300)
        .map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "thread/list", "params": {}}).to_string()
                + "\n"
        })
        .collect();
    client.send_raw(burst.trim_end()).await;
    let mut replies: HashMap<i64, Value> = HashMap::new();
    while replies.len() < 300 {
        let message = client.next().await;
        let id = message["id"].as_i64().expect("a reply with an id");
        assert!(
            replies.insert(id, message).is_none(),
            "one reply per request"
        );
    }
    let overloaded = replies
        .values()
        .filter(|r| r["error"]["code"] == -32001)
        .count();
    let served = replies.values().filter(|r| r["result"].is_object()).count();
    assert!(overloaded > 0, "some requests found the queue full");
    assert!(served > 0, "the queue's requests were served");
    assert_eq!(overloaded + served, 300);
    // Still serving.
    let after = client.call(1000, "thread/list", json!({})).await;
    assert!(after["result"]["data"].is_array(), "{after}");
    client.close().await;
}
