//! The trace viewer in a real headless Chromium, against a real `spool
//! serve` with a scripted model: the thread list, a message growing live,
//! resuming after the server restarts, an approval answered from the page,
//! the model's view under a budget, and a 10,000-item thread.
//!
//! Each test leaves a screenshot in `$CARGO_TARGET_TMPDIR/viewer/`.

#[path = "support/browser.rs"]
mod browser;
mod serve_net;
mod support;

use std::path::PathBuf;
use std::time::Duration;

use browser::Browser;
use serde_json::{Value, json};
use serve_net::{Server, Sse, http};
use spool_testkit::responses_api::{calls_response, message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::*;

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("viewer");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn new_thread(addr: &str, params: Value) -> String {
    let created = http(addr, "POST", "/v1/threads", &[], Some(&params)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["thread"]["id"].as_str().unwrap().to_owned()
}

async fn start_turn(addr: &str, thread_id: &str, text: &str) -> Sse {
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

async fn run_turn(addr: &str, thread_id: &str, text: &str) {
    start_turn(addr, thread_id, text)
        .await
        .until(|e| e.event == "turn/completed")
        .await;
}

/// The texts of the thread's agent messages as the server stores them.
async fn stored_messages(addr: &str, thread_id: &str) -> Vec<String> {
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
        .map(|r| r["item"]["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The ids and texts of the thread's agent messages as stored.
async fn stored_message_ids(addr: &str, thread_id: &str) -> Vec<(String, String)> {
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
const PAGE_MESSAGES: &str = "return [...document.querySelectorAll('.item-row[data-kind=agentMessage] .label')]\
     .map(e => e.textContent)";

async fn open_thread(browser: &Browser, addr: &str, thread_id: &str) {
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

#[tokio::test]
async fn the_list_shows_a_new_thread_and_a_message_grows_live() {
    let gate = Gate::new();
    let pace = Duration::from_millis(80);
    let model = ScriptedServer::with_responses([paced_message_response(
        "r1",
        &["Once ", "upon ", "a "],
        &gate,
        &["time ", "there ", "was ", "a ", "log."],
        pace,
    )])
    .await
    .unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "http://127.0.0.1:0"], 1).await;
    let addr = server.addr("http");
    let browser = Browser::start().await;
    browser.goto(&format!("http://{addr}/")).await;
    browser
        .until(
            "an empty list",
            "return document.querySelector('.threads .empty') !== null",
            vec![],
        )
        .await;

    // Created through the API while the page is open: the list shows it.
    let thread_id = new_thread(&addr, json!({})).await;
    let link = format!("a.thread[data-thread='{thread_id}']");
    browser.click(&link).await;
    browser
        .until(
            "the thread shown",
            "return document.body.dataset.threadShown === arguments[0]",
            vec![json!(thread_id)],
        )
        .await;

    let mut sse = start_turn(&addr, &thread_id, "Tell a story").await;
    // The model is held mid-message: what the page shows came live.
    let first = browser
        .until(
            "the first words",
            "const l = document.querySelector('.item-row[data-kind=agentMessage] .label'); \
             return l && l.textContent === 'Once upon a' && l.textContent",
            vec![],
        )
        .await;
    let running = browser
        .js(
            "return document.querySelector('.turn-row').dataset.status",
            vec![],
        )
        .await;
    assert_eq!(running, "inProgress", "the turn is still running");
    gate.open();
    let mut seen = vec![first.as_str().unwrap().to_owned()];
    let full = "Once upon a time there was a log.";
    while seen.last().map(String::as_str) != Some(full) {
        let now = browser.js(PAGE_MESSAGES, vec![]).await;
        if let Some(text) = now[0].as_str()
            && seen.last().map(String::as_str) != Some(text)
        {
            seen.push(text.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(seen.len() < 100, "{seen:?}");
    }
    // It grew step by step, each text a prefix of the next.
    assert!(seen.len() >= 3, "the message grew in steps: {seen:?}");
    for pair in seen.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "{seen:?}");
    }
    sse.until(|e| e.event == "turn/completed").await;
    assert_eq!(stored_messages(&addr, &thread_id).await, vec![full]);
    browser
        .until(
            "the turn completed",
            "return document.querySelector('.turn-row').dataset.status === 'completed'",
            vec![],
        )
        .await;
    browser.screenshot(&shots(), "live-message").await;
    browser.close().await;
}

#[tokio::test]
async fn after_a_server_restart_the_page_resumes_without_gap_or_duplicate() {
    let gate = Gate::new();
    let model = ScriptedServer::with_responses([
        paced_message_response(
            "r1",
            &["Alpha ", "beta ", "gamma "],
            &gate,
            &["never sent"],
            Duration::from_millis(30),
        ),
        message_response("r2", &["After ", "the ", "restart."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("http://127.0.0.1:{port}");
    let mut server = Server::start(&home, &model.url(), &["--listen", &listen], 1).await;
    let addr = server.addr("http");
    let thread_id = new_thread(&addr, json!({})).await;
    let browser = Browser::start().await;
    open_thread(&browser, &addr, &thread_id).await;
    let _turn = start_turn(&addr, &thread_id, "Count").await;
    browser
        .until(
            "the words before the cut",
            "const l = document.querySelector('.item-row[data-kind=agentMessage] .label'); \
             return l && l.textContent === 'Alpha beta gamma'",
            vec![],
        )
        .await;

    // The server goes away mid-turn (it interrupts the turn as it stops)
    // and comes back on the same address.
    assert!(server.terminate().await.success());
    browser
        .until(
            "the page to notice",
            "return document.querySelector('[data-testid=stream-state]').textContent === 'reconnecting'",
            vec![],
        )
        .await;
    let server = Server::start(&home, &model.url(), &["--listen", &listen], 1).await;
    browser
        .until(
            "the stream back",
            "return document.querySelector('[data-testid=stream-state]').textContent === 'live'",
            vec![],
        )
        .await;
    run_turn(&addr, &thread_id, "Again").await;
    browser
        .until(
            "the second message",
            "return document.querySelectorAll('.item-row[data-kind=agentMessage]').length === 2 && \
             document.querySelectorAll('.turn-row[data-status=completed]').length === 1",
            vec![],
        )
        .await;
    // What the page shows is what the server stored: nothing twice,
    // nothing missing, the same items once each.
    let stored = stored_messages(&addr, &thread_id).await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(stored[1], "After the restart.");
    assert!(stored[0].starts_with("Alpha beta gamma"), "{stored:?}");
    // The list shows each message on one line; the item panel shows it
    // exactly.
    let page = browser.js(PAGE_MESSAGES, vec![]).await;
    let one_line: Vec<String> = stored
        .iter()
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(page, json!(one_line), "the page and the store agree");
    for (id, text) in stored_message_ids(&addr, &thread_id).await {
        browser.click(&format!(".item-row[data-item='{id}']")).await;
        let shown = browser
            .until(
                "the message's panel",
                "const d = document.querySelector('[data-testid=detail]'); \
                 return !d.hidden && d.querySelector('h3 code').textContent === arguments[0] && \
                   d.querySelector('.detail-body pre').textContent",
                vec![json!(id)],
            )
            .await;
        assert_eq!(shown, json!(text), "exactly the stored text");
    }
    let rows = browser
        .js(
            "const ids = [...document.querySelectorAll('.item-row')].map(e => e.dataset.item); \
             return [ids.length, new Set(ids).size]",
            vec![],
        )
        .await;
    let all = http(
        &addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=all"),
        &[],
        None,
    )
    .await
    .json();
    let count = all["data"].as_array().unwrap().len();
    assert_eq!(rows, json!([count, count]), "each stored item once");
    let statuses = browser
        .js(
            "return [...document.querySelectorAll('.turn-row')].map(e => e.dataset.status)",
            vec![],
        )
        .await;
    assert_eq!(statuses, json!(["interrupted", "completed"]));
    browser.screenshot(&shots(), "after-restart").await;
    browser.close().await;
    drop(server);
}

#[tokio::test]
async fn an_approval_is_accepted_from_the_page_and_the_command_runs_once() {
    let call = (
        "call_1",
        "shell",
        json!({"command": ["sh", "-c", "echo ran >> ran.txt"],
               "sandbox_permissions": "require_escalated"}),
    );
    let model = ScriptedServer::with_responses([
        calls_response("r1", &[call]),
        message_response("r2", &["Done."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let server = Server::start(
        &home,
        &model.url(),
        &["--listen", "http://127.0.0.1:0", "--tools", "shell"],
        1,
    )
    .await;
    let addr = server.addr("http");
    let thread_id = new_thread(&addr, approval_settings()).await;
    let browser = Browser::start().await;
    open_thread(&browser, &addr, &thread_id).await;
    let mut sse = start_turn(&addr, &thread_id, "write the file").await;
    let command = browser
        .until(
            "the approval on the page",
            "const c = document.querySelector('.request .command'); return c && c.textContent",
            vec![],
        )
        .await;
    assert!(
        command.as_str().unwrap().contains("echo ran >> ran.txt"),
        "{command}"
    );
    assert!(
        !home.path().join("ran.txt").exists(),
        "not before the answer"
    );
    browser.screenshot(&shots(), "approval").await;
    browser.click(".request button.answer.accept").await;
    sse.until(|e| e.event == "turn/completed").await;
    browser
        .until(
            "the approval gone",
            "return document.querySelector('[data-testid=approvals]').hidden",
            vec![],
        )
        .await;
    let ran = std::fs::read_to_string(home.path().join("ran.txt")).unwrap();
    assert_eq!(ran, "ran\n", "the command ran once");
    browser
        .until(
            "the command's exit code",
            "const r = document.querySelector('.item-row[data-kind=commandExecution]'); \
             return r && r.dataset.status === 'completed'",
            vec![],
        )
        .await;
    assert_eq!(stored_messages(&addr, &thread_id).await, vec!["Done."]);

    // At a phone's width, in the dark theme: the command's panel covers
    // the screen with its exit code and output, and nothing is wider than
    // the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser
        .js(
            "document.dispatchEvent(new KeyboardEvent('keydown', {key: 't'}))",
            vec![],
        )
        .await;
    browser.click(".item-row[data-kind=commandExecution]").await;
    let exit = browser
        .until(
            "the command's panel",
            "const d = document.querySelector('[data-testid=detail]'); \
             return !d.hidden && d.querySelector('.exit-code') && d.querySelector('.exit-code').textContent",
            vec![],
        )
        .await;
    assert_eq!(exit, "0");
    let layout = browser
        .js(
            "const d = document.querySelector('[data-testid=detail]').getBoundingClientRect(); \
             return [document.documentElement.scrollWidth <= window.innerWidth, \
                     Math.round(d.width) === window.innerWidth, \
                     document.documentElement.dataset.theme]",
            vec![],
        )
        .await;
    assert_eq!(
        layout,
        json!([true, true, "dark"]),
        "phone width, dark theme"
    );
    browser.screenshot(&shots(), "phone-dark-command").await;
    browser.close().await;
}

#[tokio::test]
async fn the_llm_view_under_a_small_budget_shows_only_the_newest_turns() {
    let model = ScriptedServer::with_responses([
        message_response("r1", &["Alpha answer."]),
        message_response("r2", &["Bravo answer."]),
        message_response("r3", &["Charlie answer."]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let server = Server::start(&home, &model.url(), &["--listen", "http://127.0.0.1:0"], 1).await;
    let addr = server.addr("http");
    let thread_id = new_thread(&addr, json!({})).await;
    for question in ["first question", "second question", "third question"] {
        run_turn(&addr, &thread_id, question).await;
    }
    let browser = Browser::start().await;
    open_thread(&browser, &addr, &thread_id).await;
    browser.click("button.tab-views").await;
    const ENTRIES: &str =
        "return [...document.querySelectorAll('.llm-entry')].map(e => e.textContent).join('\\n')";
    let whole = browser
        .until(
            "the whole model view",
            "const t = [...document.querySelectorAll('.llm-entry')].map(e => e.textContent).join('\\n'); \
             return t.includes('first question') && t.includes('Charlie answer.') && t",
            vec![],
        )
        .await;
    assert!(whole.as_str().unwrap().contains("Bravo answer."), "{whole}");
    // The API's own answer for the same budget is what the page must show.
    let budget = 1;
    let expected = http(
        &addr,
        "GET",
        &format!("/v1/threads/{thread_id}/items?view=llm&tokens={budget}"),
        &[],
        None,
    )
    .await
    .json();
    assert_eq!(expected["turnsIncluded"], 1, "{expected}");
    browser
        .js(
            "const b = document.querySelector('[data-testid=llm-budget]'); \
             b.value = String(arguments[0]); b.dispatchEvent(new Event('input'));",
            vec![json!(budget)],
        )
        .await;
    browser
        .until(
            "the budgeted view",
            "return document.querySelector('[data-testid=llm-summary]').textContent.includes('1 turns included')",
            vec![],
        )
        .await;
    let shown = browser.js(ENTRIES, vec![]).await;
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("third question") && shown.contains("Charlie answer."),
        "{shown}"
    );
    for older in [
        "first question",
        "Alpha answer.",
        "second question",
        "Bravo answer.",
    ] {
        assert!(
            !shown.contains(older),
            "{older} is not in a 1-turn view: {shown}"
        );
    }
    let entries = browser
        .js(
            "return document.querySelectorAll('.llm-entry').length",
            vec![],
        )
        .await;
    assert_eq!(entries, json!(expected["data"].as_array().unwrap().len()));
    browser.screenshot(&shots(), "llm-budget").await;
    browser.close().await;
}
