//! What the trace viewer stands on, through the real binary: its page
//! served on `/` with headers that keep it to itself, behind the guard but
//! not the token; a thread's items and event log one page at a time;
//! threads listed with filters, turns listed, forks and reverts over HTTP;
//! and `spool trace`, which serves it all with a fresh token and prints
//! the page's URL.

mod serve_net;
mod support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use serve_net::{Server, Sse, http, new_thread, run_turn};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

async fn http_server(home: &Home, model: &ScriptedServer, extra: &[&str]) -> Server {
    let mut args = vec!["--listen", "http://127.0.0.1:0"];
    args.extend_from_slice(extra);
    Server::start(home, &model.url(), &args, 1).await
}

async fn get(addr: &str, path: &str) -> Value {
    let response = http(addr, "GET", path, &[], None).await;
    assert_eq!(response.status, 200, "GET {path}: {}", response.body);
    response.json()
}

async fn post(addr: &str, path: &str, body: Value) -> serve_net::Response {
    http(addr, "POST", path, &[], Some(&body)).await
}

/// A thread with `texts.len()` finished turns (the model answers each).
async fn thread_with_turns(addr: &str, texts: &[&str]) -> String {
    let thread_id = new_thread(addr, json!({})).await;
    for text in texts {
        run_turn(addr, &thread_id, text).await;
    }
    thread_id
}

fn scripted(turns: usize) -> Vec<spool_testkit::ScriptedResponse> {
    (0..turns)
        .map(|i| message_response(&format!("r{i}"), &["Answer ", &format!("number {i}.")]))
        .collect()
}

#[tokio::test]
async fn the_viewer_page_is_served_with_headers_that_keep_it_to_itself() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let server = Server::start(
        &home,
        &model.url(),
        &[
            "--listen",
            "http://127.0.0.1:0",
            "--listen",
            "ws://127.0.0.1:0",
        ],
        2,
    )
    .await;
    let addr = server.addr("http");

    let page = http(&addr, "GET", "/", &[], None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page.body.to_lowercase().contains("<html"), "{}", page.body);
    assert_eq!(page.header("content-security-policy"), Some(CSP));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let etag = page.header("etag").expect("an ETag").to_owned();

    let script = http(&addr, "GET", "/viewer/main.js", &[], None).await;
    assert_eq!(script.status, 200);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(!script.body.is_empty());
    assert_eq!(script.header("content-security-policy"), Some(CSP));
    assert_ne!(
        script.header("etag"),
        Some(etag.as_str()),
        "one ETag per file"
    );
    let style = http(&addr, "GET", "/viewer/style.css", &[], None).await;
    assert_eq!(
        style.header("content-type"),
        Some("text/css; charset=utf-8")
    );

    let missing = http(&addr, "GET", "/viewer/nope.js", &[], None).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "not_found");
    let outside = http(&addr, "GET", "/viewer/../Cargo.toml", &[], None).await;
    assert_eq!(outside.status, 404);

    // Revalidation: the same ETag is 304 without a body; another is 200.
    let same = http(&addr, "GET", "/", &[("If-None-Match", &etag)], None).await;
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());
    assert_eq!(same.header("etag"), Some(etag.as_str()));
    let stale = http(&addr, "GET", "/", &[("If-None-Match", "\"0\"")], None).await;
    assert_eq!(stale.status, 200);

    // The guard stands in front of the page: a foreign origin or host is
    // refused.
    let foreign = http(
        &addr,
        "GET",
        "/",
        &[("Origin", "http://evil.example")],
        None,
    )
    .await;
    assert_eq!(foreign.status, 403);
    assert_eq!(foreign.json()["error"]["code"], "forbidden_origin");
    let own_origin = format!("http://{addr}");
    let same_origin = http(&addr, "GET", "/", &[("Origin", &own_origin)], None).await;
    assert_eq!(same_origin.status, 200);
    let rebound = http(&addr, "GET", "/", &[("Host", "attacker.example")], None).await;
    assert_eq!(rebound.status, 421);

    // A ws:// listener serves no page.
    let ws_page = http(&server.addr("ws"), "GET", "/", &[], None).await;
    assert_ne!(ws_page.status, 200);
    assert!(!ws_page.body.to_lowercase().contains("<html"));
}

#[tokio::test]
async fn the_page_needs_no_token_but_the_api_does() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "viewer-s3cret\n").unwrap();
    let server = http_server(
        &home,
        &model,
        &["--auth-token-file", token_file.to_str().unwrap()],
    )
    .await;
    let addr = server.addr("http");
    assert_eq!(http(&addr, "GET", "/", &[], None).await.status, 200);
    let script = http(&addr, "GET", "/viewer/main.js", &[], None).await;
    assert_eq!(script.status, 200);
    let refused = http(&addr, "GET", "/v1/threads", &[], None).await;
    assert_eq!(refused.status, 401);
    assert!(!refused.body.contains("<html"));
    let right = [("Authorization", "Bearer viewer-s3cret")];
    assert_eq!(
        http(&addr, "GET", "/v1/threads", &right, None).await.status,
        200
    );
    for path in [
        "/v1/threads/x/log",
        "/v1/threads/x/turns",
        "/v1/threads/x/items",
    ] {
        assert_eq!(
            http(&addr, "GET", path, &[], None).await.status,
            401,
            "{path}"
        );
    }
}

/// Every page of `path` (a query string included) from the start, `after`
/// set to each page's `nextCursor`, until it is null.
async fn pages(addr: &str, path: &str) -> (Vec<Value>, usize) {
    let mut data = Vec::new();
    let mut after: Option<u64> = None;
    let mut count = 0;
    loop {
        let url = match after {
            Some(after) => format!("{path}&after={after}"),
            None => path.to_owned(),
        };
        let page = get(addr, &url).await;
        count += 1;
        assert!(count < 1_000, "paging never ends");
        data.extend(page["data"].as_array().unwrap().iter().cloned());
        match &page["nextCursor"] {
            Value::Null => return (data, count),
            next => {
                let next = next.as_u64().unwrap_or_else(|| panic!("a number: {page}"));
                assert!(
                    after.is_none_or(|after| next > after),
                    "the cursor moves on"
                );
                after = Some(next);
            }
        }
    }
}

#[tokio::test]
async fn items_and_the_log_come_in_pages_that_add_up_to_the_whole() {
    let model = ScriptedServer::with_responses(scripted(3)).await.unwrap();
    let home = Home::new();
    let server = http_server(&home, &model, &[]).await;
    let addr = server.addr("http");
    let thread = thread_with_turns(&addr, &["one", "two", "three"]).await;
    let items = format!("/v1/threads/{thread}/items");

    for view in ["all", "client"] {
        let whole = get(&addr, &format!("{items}?view={view}")).await;
        assert!(whole.get("nextCursor").is_none(), "unpaged as before");
        let whole = whole["data"].as_array().unwrap().clone();
        assert!(whole.len() >= 6, "{view}: {whole:?}");
        let (paged, count) = pages(&addr, &format!("{items}?view={view}&limit=2")).await;
        assert_eq!(paged, whole, "{view}: pages of 2");
        assert!(count >= whole.len() / 2, "{view}: {count} pages");
        let ordinals: Vec<u64> = paged
            .iter()
            .map(|r| r["ordinal"].as_u64().unwrap())
            .collect();
        assert!(ordinals.windows(2).all(|w| w[0] < w[1]), "{ordinals:?}");
        // A cursor past the middle gives the rest.
        let middle = ordinals[2];
        let rest = get(&addr, &format!("{items}?view={view}&after={middle}")).await;
        assert_eq!(rest["data"].as_array().unwrap()[..], whole[3..]);
        assert_eq!(rest["nextCursor"], Value::Null);
    }
    for bad in [
        "?view=llm&limit=2",
        "?view=llm&after=3",
        "?limit=0",
        "?limit=1001",
        "?after=x",
        "?view=all&tokens=5",
    ] {
        let response = http(&addr, "GET", &format!("{items}{bad}"), &[], None).await;
        assert_eq!(response.status, 400, "{bad}: {}", response.body);
        assert_eq!(response.json()["error"]["code"], "bad_request");
    }
    let unknown = http(&addr, "GET", "/v1/threads/nope/items?limit=2", &[], None).await;
    assert_eq!(unknown.status, 404);

    // The log: pages add up to one big read, seqs 1, 2, 3, … without a
    // gap, each event as the SSE stream's data: carries it.
    let log = format!("/v1/threads/{thread}/log");
    let whole = get(&addr, &format!("{log}?limit=2000")).await;
    assert_eq!(whole["nextCursor"], Value::Null);
    let whole = whole["data"].as_array().unwrap().clone();
    let seqs: Vec<u64> = whole
        .iter()
        .map(|e| e["params"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(whole[0]["method"], "thread/started");
    assert!(whole.iter().all(|e| e["jsonrpc"] == "2.0"));
    let (paged, count) = pages(&addr, &format!("{log}?limit=5")).await;
    assert_eq!(paged, whole);
    assert_eq!(
        count,
        whole.len().div_ceil(5) + usize::from(whole.len() % 5 == 0)
    );
    let last = *seqs.last().unwrap();
    let mut replay = Sse::open(
        &addr,
        "GET",
        &format!("/v1/threads/{thread}/events"),
        &[],
        None,
    )
    .await;
    let streamed: Vec<Value> = replay
        .until(|e| e.id == Some(last))
        .await
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(streamed, whole, "the log is the SSE replay");
    let tail = get(&addr, &format!("{log}?after={}&limit=10", last - 3)).await;
    assert_eq!(
        tail["data"].as_array().unwrap()[..],
        whole[whole.len() - 3..]
    );
    for bad in ["?limit=0", "?limit=2001", "?after=-1"] {
        let response = http(&addr, "GET", &format!("{log}{bad}"), &[], None).await;
        assert_eq!(response.status, 400, "{bad}: {}", response.body);
    }
    assert_eq!(
        http(&addr, "GET", "/v1/threads/nope/log", &[], None)
            .await
            .status,
        404
    );
}

fn turn_ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn threads_turns_forks_and_reverts_over_http() {
    let model = ScriptedServer::with_responses(scripted(3)).await.unwrap();
    let home = Home::new();
    let server = http_server(&home, &model, &[]).await;
    let addr = server.addr("http");
    let thread = thread_with_turns(&addr, &["alpha question", "beta", "gamma"]).await;
    let turns_path = format!("/v1/threads/{thread}/turns");

    let oldest_first = get(
        &addr,
        &format!("{turns_path}?sortDirection=asc&itemsView=full"),
    )
    .await;
    let turns = turn_ids(&oldest_first);
    assert_eq!(turns.len(), 3, "{oldest_first}");
    let first_items = oldest_first["data"][0]["items"].as_array().unwrap();
    assert!(
        first_items.iter().any(|i| i["type"] == "userMessage"),
        "{first_items:?}"
    );
    let newest_first = get(&addr, &format!("{turns_path}?itemsView=notLoaded&limit=2")).await;
    assert_eq!(
        turn_ids(&newest_first),
        [turns[2].clone(), turns[1].clone()]
    );
    assert!(
        newest_first["data"][0]["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let cursor = newest_first["nextCursor"].as_str().unwrap().to_owned();
    let older = get(&addr, &format!("{turns_path}?cursor={cursor}")).await;
    assert_eq!(turn_ids(&older), [turns[0].clone()]);
    for bad in ["?sortDirection=up", "?itemsView=most", "?limit=x"] {
        let response = http(&addr, "GET", &format!("{turns_path}{bad}"), &[], None).await;
        assert_eq!(response.status, 400, "{bad}: {}", response.body);
    }
    assert_eq!(
        http(&addr, "GET", "/v1/threads/nope/turns", &[], None)
            .await
            .status,
        404
    );

    // A fork of the first turn: a new thread, listed, with that turn only.
    let forked = post(
        &addr,
        &format!("/v1/threads/{thread}/fork"),
        json!({"lastTurnId": turns[0]}),
    )
    .await;
    assert_eq!(forked.status, 201, "{}", forked.body);
    let fork_id = forked.json()["thread"]["id"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, thread);
    let listed = get(&addr, "/v1/threads").await;
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(ids.contains(&fork_id.as_str()) && ids.contains(&thread.as_str()));
    let fork_turns = get(&addr, &format!("/v1/threads/{fork_id}/turns")).await;
    assert_eq!(turn_ids(&fork_turns), [turns[0].clone()]);
    let unknown_fork = post(&addr, "/v1/threads/nope/fork", json!({})).await;
    assert_eq!(unknown_fork.status, 404);

    // The list's filters and order.
    assert!(
        get(&addr, "/v1/threads?archived=true").await["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let searched = get(&addr, "/v1/threads?search=alpha").await;
    assert!(
        searched["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == thread.as_str()),
        "{searched}"
    );
    let nothing = get(&addr, "/v1/threads?search=no-such-words").await;
    assert!(nothing["data"].as_array().unwrap().is_empty(), "{nothing}");
    let by_update = get(&addr, "/v1/threads?sortKey=updated_at&limit=1").await;
    assert_eq!(by_update["data"].as_array().unwrap().len(), 1);
    for bad in ["?sortKey=name", "?archived=maybe"] {
        let response = http(&addr, "GET", &format!("/v1/threads{bad}"), &[], None).await;
        assert_eq!(response.status, 400, "{bad}: {}", response.body);
    }

    // A revert from the second turn leaves the first alone.
    let reverted = post(
        &addr,
        &format!("/v1/threads/{thread}/revert"),
        json!({"beforeTurnId": turns[1]}),
    )
    .await;
    assert_eq!(reverted.status, 200, "{}", reverted.body);
    assert_eq!(reverted.json()["thread"]["id"], thread);
    let kept = get(&addr, &format!("{turns_path}?sortDirection=asc")).await;
    assert_eq!(turn_ids(&kept), [turns[0].clone()]);
    let items = get(
        &addr,
        &format!("/v1/threads/{thread}/items?view=all&limit=100"),
    )
    .await;
    assert!(
        items["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["turnId"] == turns[0].as_str()),
        "{items}"
    );
    let no_body = post(&addr, &format!("/v1/threads/{thread}/revert"), json!({})).await;
    assert_eq!(no_body.status, 400, "{}", no_body.body);
    let unknown_revert = post(
        &addr,
        "/v1/threads/nope/revert",
        json!({"beforeTurnId": turns[0]}),
    )
    .await;
    assert_eq!(unknown_revert.status, 404);
}

/// A running `spool trace ARGS` and the URL it printed.
struct Trace {
    child: tokio::process::Child,
    url: String,
}

impl Trace {
    async fn start(home: &Home, model_url: &str, args: &[&str]) -> Trace {
        let mut child = trace_command(home, model_url, args)
            .spawn()
            .expect("spool trace starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("spool trace prints its URL")
            .unwrap()
            .expect("a line on stdout");
        Trace { child, url }
    }

    /// `host:port` of the URL.
    fn addr(&self) -> String {
        let rest = self.url.strip_prefix("http://").expect("an http URL");
        rest.split('/').next().unwrap().to_owned()
    }

    /// The fragment's `key=value` parts.
    fn fragment(&self) -> Vec<(String, String)> {
        let (_, fragment) = self.url.split_once('#').unwrap_or((&self.url, ""));
        fragment
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    fn token(&self) -> Option<String> {
        self.fragment()
            .into_iter()
            .find_map(|(k, v)| (k == "token").then_some(v))
    }

    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().unwrap().to_string();
        let killed = tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap();
        assert!(killed.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("spool trace exits after SIGTERM")
            .unwrap()
    }
}

fn trace_command(home: &Home, model_url: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_spool"));
    serve_net::server_command(&mut command, "trace", home, model_url, args);
    command
        // Closed at once: the trace server must keep serving.
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn spool_trace_serves_the_viewer_behind_a_fresh_token_and_prints_its_url() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let trace = Trace::start(&home, &model.url(), &[]).await;
    assert!(trace.url.starts_with("http://127.0.0.1:"), "{}", trace.url);
    let token = trace.token().expect("a token in the URL");
    assert_eq!(token.len(), 64, "32 random bytes as hex: {token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(trace.fragment().len(), 1, "no thread: {}", trace.url);
    let addr = trace.addr();
    // Standard input is closed; the server is still there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(http(&addr, "GET", "/", &[], None).await.status, 200);
    assert_eq!(
        http(&addr, "GET", "/v1/threads", &[], None).await.status,
        401
    );
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    assert_eq!(
        http(&addr, "GET", "/v1/threads", &auth, None).await.status,
        200
    );
    let created = http(&addr, "POST", "/v1/threads", &auth, Some(&json!({}))).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let thread = created.json()["thread"]["id"].as_str().unwrap().to_owned();
    assert!(trace.terminate().await.success());

    // With a thread: it is in the URL; a new run has a new token.
    let again = Trace::start(&home, &model.url(), &[&thread]).await;
    assert_eq!(
        again.fragment()[1],
        ("thread".to_owned(), thread.clone()),
        "{}",
        again.url
    );
    assert_ne!(again.token().unwrap(), token);
    assert!(again.terminate().await.success());

    // Without a token: none in the URL, none asked for.
    let open = Trace::start(&home, &model.url(), &["--no-token"]).await;
    assert_eq!(open.url, format!("http://{}/", open.addr()));
    assert_eq!(
        http(&open.addr(), "GET", "/v1/threads", &[], None)
            .await
            .status,
        200
    );
    assert!(open.terminate().await.success());
}

#[tokio::test]
async fn spool_trace_of_an_unknown_thread_fails_before_listening() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let out = home.spool(&model.url(), &["trace", "no-such-thread"]).await;
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no URL printed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no thread no-such-thread"), "{stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
}
