//! The trace viewer in a real headless Chromium, against a real `spool
//! serve` with a scripted model: the thread list, a message growing live,
//! an approval answered from the page (and the page at a phone's width),
//! and the model's view under a budget. Resuming a broken stream is in
//! `e2e_viewer_resume.rs`, a 10,000-item thread in `e2e_viewer_big.rs`.
//!
//! Each test leaves a screenshot in `$CARGO_TARGET_TMPDIR/viewer/`.

#[path = "support/browser.rs"]
mod browser;
mod serve_net;
mod support;
#[path = "support/viewer.rs"]
mod viewer;

use std::time::Duration;

use browser::Browser;
use serde_json::json;
use serve_net::{Server, http, new_thread, start_turn};
use spool_testkit::responses_api::{calls_response, message_response, paced_message_response};
use spool_testkit::{Gate, ScriptedServer};
use support::*;
use viewer::*;

#[tokio::test]
async fn the_list_shows_a_new_thread_and_a_message_grows_live() {
    let gate = Gate::new();
    // Far enough apart that the page can be seen between two words, even on
    // a busy machine.
    let pace = Duration::from_millis(150);
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
    thread_shown(&browser, &thread_id).await;

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
    // The message's deltas, read back from the log and replayed in order,
    // make the stored text again.
    browser.click(".item-row[data-kind=agentMessage]").await;
    browser
        .click("[data-testid=detail] button.load-deltas")
        .await;
    let loaded = browser
        .until(
            "the deltas",
            "const d = document.querySelector('[data-testid=detail] .deltas'); \
             return d.querySelector('button.replay') && d.firstChild.textContent",
            vec![],
        )
        .await;
    assert!(loaded.as_str().unwrap().starts_with("8 deltas"), "{loaded}");
    browser.click("[data-testid=detail] button.replay").await;
    browser
        .until(
            "the replay's end",
            "const p = document.querySelector('[data-testid=detail] pre.message'); \
             return p && !p.classList.contains('replaying') && p.textContent === arguments[0]",
            vec![json!(full)],
        )
        .await;
    browser.screenshot(&shots(), "live-message").await;
    browser.close().await;
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
    let served = answered_thread(&[
        ("first question", "Alpha answer."),
        ("second question", "Bravo answer."),
        ("third question", "Charlie answer."),
    ])
    .await;
    let (addr, thread_id) = (served.addr.clone(), served.thread_id.clone());
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

#[tokio::test]
async fn a_turns_buttons_fork_and_revert_and_the_tree_and_log_show_the_thread() {
    let served = answered_thread(&[("q1", "One."), ("q2", "Two."), ("q3", "Three.")]).await;
    let (addr, thread_id) = (served.addr.clone(), served.thread_id.clone());
    let turns = http(
        &addr,
        "GET",
        &format!("/v1/threads/{thread_id}/turns?sortDirection=asc"),
        &[],
        None,
    )
    .await
    .json();
    let turn_ids: Vec<String> = turns["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(turn_ids.len(), 3);
    let browser = Browser::start().await;
    open_thread(&browser, &addr, &thread_id).await;

    // The tree: a branch per turn, the newest open, its items under the
    // agents that made them.
    browser.click("button.tab-tree").await;
    let branch = browser
        .until(
            "the newest turn's branch",
            "const open = document.querySelectorAll('.tree-turn[open]'); \
             return document.querySelectorAll('.tree-turn').length === 3 && open.length === 1 && \
               [...open[0].querySelectorAll('.agent-name, .node')].map(e => e.textContent)",
            vec![],
        )
        .await;
    let branch: Vec<&str> = branch
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        branch,
        [
            "agent: user",
            "userMessage q3",
            "agent: assistant",
            "agentMessage Three."
        ],
        "{branch:?}"
    );

    // The log, filtered to one method: the three turns' completions.
    browser.click("button.tab-log").await;
    browser
        .until(
            "the log read",
            "return document.querySelectorAll('.log-row').length > 0",
            vec![],
        )
        .await;
    let completions = browser
        .until(
            "the filtered log",
            "const f = document.querySelector('[data-testid=log-filter]'); \
             if (f.value !== 'turn/completed') { f.value = 'turn/completed'; \
               f.dispatchEvent(new Event('change')); } \
             const rows = [...document.querySelectorAll('.log-row')]; \
             return rows.length === 3 && rows.every(r => r.dataset.method === 'turn/completed') && \
               rows.map(r => Number(r.dataset.seq))",
            vec![],
        )
        .await;
    let seqs: Vec<u64> = serde_json::from_value(completions).unwrap();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // Fork from the second turn: the page opens the new thread, which has
    // the first two turns.
    browser.click("button.tab-timeline").await;
    browser
        .click(&format!(
            ".turn-row[data-turn='{}'] button.fork",
            turn_ids[1]
        ))
        .await;
    let fork = browser
        .until(
            "the fork shown",
            "const shown = document.body.dataset.threadShown; \
             return shown && shown !== arguments[0] && \
               document.querySelectorAll('.turn-row').length === 2 && shown",
            vec![json!(thread_id)],
        )
        .await;
    let fork = fork.as_str().unwrap().to_owned();
    let fork_turns = |id: String| {
        let addr = addr.clone();
        async move {
            http(&addr, "GET", &format!("/v1/threads/{id}/turns"), &[], None)
                .await
                .json()["data"]
                .as_array()
                .unwrap()
                .len()
        }
    };
    assert_eq!(fork_turns(fork.clone()).await, 2);
    assert_eq!(stored_messages(&addr, &fork).await, vec!["One.", "Two."]);

    // Revert the fork to before its second turn, once the page asked.
    browser
        .click(&format!(
            ".turn-row[data-turn='{}'] button.revert",
            turn_ids[1]
        ))
        .await;
    browser.accept_dialog().await;
    browser
        .until(
            "one turn left",
            "return document.querySelectorAll('.turn-row').length === 1 && \
               document.querySelectorAll('.item-row').length === 2",
            vec![],
        )
        .await;
    assert_eq!(fork_turns(fork.clone()).await, 1);
    assert_eq!(
        fork_turns(thread_id.clone()).await,
        3,
        "the source is untouched"
    );
    browser.screenshot(&shots(), "after-fork-and-revert").await;
    browser.close().await;
}
