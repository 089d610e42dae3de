//! The trace viewer's live stream in a real headless Chromium when it
//! breaks: the server restarted mid-turn, and the network between the page
//! and the server cut while a reply streams. Either way the page picks up
//! where it stopped (`Last-Event-ID`) and shows exactly what the server
//! stored: no text twice, none missing, every item once.

#[path = "support/browser.rs"]
mod browser;
mod serve_net;
mod support;
#[path = "support/viewer.rs"]
mod viewer;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use browser::Browser;
use serde_json::json;
use serve_net::{Server, new_thread, run_turn, start_turn};
use spool_testkit::responses_api::{message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::*;
use tokio::net::{TcpListener, TcpStream};
use viewer::*;

/// Checks that the page shows the thread's agent messages as stored: on one
/// line each in the timeline, exactly in each item's panel, and every
/// stored item as one row.
async fn page_matches_store(browser: &Browser, addr: &str, thread_id: &str) {
    let stored = stored_messages(addr, thread_id).await;
    let page = browser.js(PAGE_MESSAGES, vec![]).await;
    let one_line: Vec<String> = stored
        .iter()
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(page, json!(one_line), "the page and the store agree");
    for (id, text) in stored_message_ids(addr, thread_id).await {
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
    let count = stored_items(addr, thread_id).await.len();
    assert_eq!(rows, json!([count, count]), "each stored item once");
}

async fn stream_state(browser: &Browser, state: &str) {
    browser
        .until(
            &format!("the stream {state}"),
            "return document.querySelector('[data-testid=stream-state]').textContent === arguments[0]",
            vec![json!(state)],
        )
        .await;
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
    stream_state(&browser, "reconnecting").await;
    let server = Server::start(&home, &model.url(), &["--listen", &listen], 1).await;
    stream_state(&browser, "live").await;
    run_turn(&addr, &thread_id, "Again").await;
    browser
        .until(
            "the second message",
            "return document.querySelectorAll('.item-row[data-kind=agentMessage]').length === 2 && \
             document.querySelectorAll('.turn-row[data-status=completed]').length === 1",
            vec![],
        )
        .await;
    // What the page shows is what the server stored.
    let stored = stored_messages(&addr, &thread_id).await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(stored[1], "After the restart.");
    assert!(stored[0].starts_with("Alpha beta gamma"), "{stored:?}");
    page_matches_store(&browser, &addr, &thread_id).await;
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

/// A TCP relay between the browser and the server whose connections the
/// test can cut (and refuse for a while), as a network would.
struct Cuttable {
    open: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Cuttable {
    fn start(listener: TcpListener, upstream: String) -> Cuttable {
        let open = Arc::new(AtomicBool::new(true));
        let links: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (o, l) = (open.clone(), links.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !o.load(Ordering::SeqCst) {
                    continue; // Dropped: the connection is closed at once.
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                l.lock().unwrap().push(link.abort_handle());
            }
        });
        Cuttable {
            open,
            links,
            accept,
        }
    }

    /// Closes every connection and refuses new ones.
    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Cuttable {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

#[tokio::test]
async fn a_network_cut_mid_reply_loses_and_repeats_nothing() {
    let gate = Gate::new();
    let words: Vec<String> = (1..=60).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let model = ScriptedServer::with_responses([paced_message_response(
        "r1",
        &words[..40],
        &gate,
        &words[40..],
        Duration::from_millis(25),
    )])
    .await
    .unwrap();
    let home = Home::new();
    // The page reaches the server through the relay, whose address the
    // server is told to answer to.
    let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_addr: SocketAddr = relay.local_addr().unwrap();
    let allow = relay_addr.to_string();
    let server = Server::start(
        &home,
        &model.url(),
        &["--listen", "http://127.0.0.1:0", "--allow-host", &allow],
        1,
    )
    .await;
    let addr = server.addr("http");
    let relay = Cuttable::start(relay, addr.clone());
    let thread_id = new_thread(&addr, json!({})).await;
    let browser = Browser::start().await;
    open_thread(&browser, &allow, &thread_id).await;
    stream_state(&browser, "live").await;

    let mut turn = start_turn(&addr, &thread_id, "Count to sixty").await;
    browser
        .until(
            "the first words",
            "const l = document.querySelector('.item-row[data-kind=agentMessage] .label'); \
             return l && l.textContent.split(' ').length >= 5",
            vec![],
        )
        .await;
    relay.cut();
    stream_state(&browser, "reconnecting").await;
    // While the page is cut off, the reply goes on: at least ten more
    // words reach the server's own clients.
    let during = turn
        .until(|e| e.event == "item/agentMessage/delta" && e.data["params"]["delta"] == "w20 ")
        .await;
    assert!(!during.is_empty());
    let shown_when_cut = browser.js(PAGE_MESSAGES, vec![]).await;
    assert!(
        !shown_when_cut[0].as_str().unwrap().contains("w40"),
        "the page was cut off before the end: {shown_when_cut}"
    );
    relay.restore();
    stream_state(&browser, "live").await;
    // The model is held after its 40th word: once the page has caught up,
    // it shows those 40 words exactly, none twice, none missing (checked
    // before the item completes, whose final text would hide a repeated
    // delta).
    browser
        .until(
            "the page caught up",
            "const l = document.querySelector('.item-row[data-kind=agentMessage] .label'); \
             return l && l.textContent.includes('w40')",
            vec![],
        )
        .await;
    let held = words[..40].concat();
    let caught_up = browser.js(PAGE_MESSAGES, vec![]).await;
    assert_eq!(caught_up, json!([held.trim_end()]), "one line");
    let id = stored_message_ids(&addr, &thread_id).await[0].0.clone();
    browser.click(&format!(".item-row[data-item='{id}']")).await;
    let exact = browser
        .js(
            "return document.querySelector('[data-testid=detail] .detail-body pre').textContent",
            vec![],
        )
        .await;
    assert_eq!(exact, json!(held), "exactly the 40 words, once each");
    gate.open();
    turn.until(|e| e.event == "turn/completed").await;
    browser
        .until(
            "the turn completed on the page",
            "return document.querySelector('.turn-row').dataset.status === 'completed'",
            vec![],
        )
        .await;
    let stored = stored_messages(&addr, &thread_id).await;
    assert_eq!(stored, vec![words.concat()]);
    page_matches_store(&browser, &allow, &thread_id).await;
    browser.screenshot(&shots(), "after-network-cut").await;
    browser.close().await;
}
