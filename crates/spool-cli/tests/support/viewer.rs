//! What the trace viewer's browser tests share: a thread and its turns
//! through the HTTP API, what the server stored, the thread opened in the
//! page, and where screenshots go.

#![allow(dead_code)] // each test binary uses a part

use std::path::PathBuf;

use serde_json::{Value, json};

use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;

use crate::browser::Browser;
use crate::serve_net::{Server, http, new_thread, run_turn};
use crate::support::Home;

/// `$CARGO_TARGET_TMPDIR/viewer/`, where each test leaves a screenshot.
pub fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("viewer");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The thread's item records (`view=all`) as the server stores them.
pub async fn stored_items(addr: &str, thread_id: &str) -> Vec<Value> {
    let items = http(
        addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=all"),
        &[],
        None,
    )
    .await
    .json();
    items["data"].as_array().unwrap().clone()
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
    stored_items(addr, thread_id)
        .await
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
    thread_shown(browser, thread_id).await;
}

/// Waits until the page shows the thread (its first rows are drawn).
pub async fn thread_shown(browser: &Browser, thread_id: &str) {
    browser
        .until(
            "the thread shown",
            "return document.body.dataset.threadShown === arguments[0]",
            vec![json!(thread_id)],
        )
        .await;
}

/// A `spool serve` on loopback HTTP with one thread, whose turns asked
/// each question and got its answer from the scripted model.
pub struct Answered {
    pub model: ScriptedServer,
    pub home: Home,
    pub server: Server,
    pub addr: String,
    pub thread_id: String,
}

pub async fn answered_thread(turns: &[(&str, &str)]) -> Answered {
    let responses = turns
        .iter()
        .enumerate()
        .map(|(i, (_, answer))| message_response(&format!("r{i}"), &[answer]));
    let model = ScriptedServer::with_responses(responses).await.unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "http://127.0.0.1:0"], 1).await;
    let addr = server.addr("http");
    let thread_id = new_thread(&addr, json!({})).await;
    for (question, _) in turns {
        run_turn(&addr, &thread_id, question).await;
    }
    Answered {
        model,
        home,
        server,
        addr,
        thread_id,
    }
}
