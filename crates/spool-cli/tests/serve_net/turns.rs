//! Threads and turns over the HTTP API, for tests that need one to look at
//! something else.

use serde_json::{Value, json};

use super::{Sse, http};

/// A thread made with `POST /v1/threads` (`thread/start`'s params).
pub async fn new_thread(addr: &str, params: Value) -> String {
    let created = http(addr, "POST", "/v1/threads", &[], Some(&params)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["thread"]["id"].as_str().unwrap().to_owned()
}

/// A turn started with `POST /v1/threads/{id}/turns`: its SSE stream.
pub async fn start_turn(addr: &str, thread_id: &str, text: &str) -> Sse {
    let sse = Sse::open(
        addr,
        "POST",
        &format!("/v1/threads/{thread_id}/turns"),
        &[],
        Some(&json!({"input": [{"type": "text", "text": text}]})),
    )
    .await;
    assert_eq!(sse.body.status, 200);
    sse
}

/// A turn run to its end, which must be `completed`.
pub async fn run_turn(addr: &str, thread_id: &str, text: &str) {
    let events = start_turn(addr, thread_id, text)
        .await
        .until(|e| e.event == "turn/completed")
        .await;
    let completed = &events.last().unwrap().data["params"]["turn"];
    assert_eq!(completed["status"], "completed", "{completed}");
}
