//! What the trace viewer's browser tests share: a thread and its turns
//! through the HTTP API, what the server stored, the thread opened in the
//! page, and where screenshots go.

#![allow(dead_code)] // each test binary uses a part

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::browser::Browser;
use crate::serve_net::{Sse, http};

/// `$CARGO_TARGET_TMPDIR/viewer/`, where each test leaves a screenshot.
pub fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("viewer");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub async fn new_thread(addr: &str, params: Value) -> String {
    let created = http(addr, "POST", "/v1/threads", &[], Some(&params)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["thread"]["id"].as_str().unwrap().to_owned()
}

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

pub async fn run_turn(addr: &str, thread_id: &str, text: &str) {
    start_turn(addr, thread_id, text)
        .await
        .until(|e| e.event == "turn/completed")
        .await;
}

/// The texts of the thread's agent messages as the server stores them.
pub async fn stored_messages(addr: &str, thread_id: &str) -> Vec<String> {
    stored_message_ids(addr, thread_id)
        .await
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// The ids and texts of the thread's agent messages as stored.
pub async fn stored_message_ids(addr: &str, thread_id: &str) -> Vec<(String, String)> {
    let items = http(
        addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=all"),
        &[],
        None,
    )
    .await
    .json();
    items["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["item"]["type"] == "agentMessage")
        .map(|r| {
            let item = &r["item"];
            (
                item["id"].as_str().unwrap().to_owned(),
                item["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The agent messages' texts as the page shows them in the timeline.
pub const PAGE_MESSAGES: &str = "return [...document.querySelectorAll('.item-row[data-kind=agentMessage] .label')]\
     .map(e => e.textContent)";

pub async fn open_thread(browser: &Browser, addr: &str, thread_id: &str) {
    browser
        .goto(&format!("http://{addr}/#thread={thread_id}"))
        .await;
    browser
        .until(
            "the thread shown",
            "return document.body.dataset.threadShown === arguments[0]",
            vec![json!(thread_id)],
        )
        .await;
}
