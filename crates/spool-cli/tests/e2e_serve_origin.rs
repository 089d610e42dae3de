//! Who may connect to `spool serve`'s network listeners, as a browser tab
//! would try: a foreign `Origin` is refused (403) on every route and
//! WebSocket upgrade, with or without a token; a state change that is not
//! JSON is refused (415); a `Host` that is not the listener's (DNS
//! rebinding) is refused (421); `--allow-origin` / `--allow-host` let
//! exactly what they name in; the probes stay open; clients that send no
//! `Origin` work as before. Every refusal creates nothing.

mod serve_net;
mod support;

use serde_json::{Value, json};
use serve_net::{Body, Response, Server, Upgrade, WebSocket, http, http_text};
use spool_testkit::ScriptedServer;
use support::*;

const EVIL: &str = "https://evil.example";

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "t", "version": "1"}}})
}

/// Upgrades and answers `initialize`, or panics with the refusal.
async fn initialized(addr: &str, path: &str, headers: &[(&str, &str)]) -> Value {
    match WebSocket::connect(addr, path, headers).await {
        Upgrade::Open(mut ws) => {
            ws.send(&initialize()).await;
            let reply = ws.next().await.expect("initialize is answered");
            assert!(reply["result"]["userAgent"].is_string(), "{reply}");
            reply
        }
        Upgrade::Refused(r) => panic!("{addr}{path} {headers:?}: refused {} {}", r.status, r.body),
    }
}

/// The refusal of an upgrade that must not happen.
async fn upgrade_refused(addr: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    match WebSocket::connect(addr, path, headers).await {
        Upgrade::Refused(response) => response,
        Upgrade::Open(_) => panic!("{addr}{path} {headers:?}: upgraded"),
    }
}

/// Asserts the JSON error of a refusal and returns its message.
fn refusal(response: &Response, status: u16, code: &str) -> String {
    assert_eq!(response.status, status, "{}", response.body);
    let body = response.json();
    assert_eq!(body["error"]["code"], code, "{body}");
    // No CORS header, ever: a browser's preflight fails, its page reads
    // nothing.
    assert!(
        !response
            .headers
            .iter()
            .any(|(k, _)| k.to_ascii_lowercase().starts_with("access-control-")),
        "{:?}",
        response.headers
    );
    body["error"]["message"].as_str().unwrap().to_owned()
}

async fn thread_ids(addr: &str, headers: &[(&str, &str)]) -> Vec<String> {
    let list = http(addr, "GET", "/v1/threads?limit=100", headers, None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    list.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn create_thread(addr: &str, headers: &[(&str, &str)]) -> String {
    let created = http(addr, "POST", "/v1/threads", headers, Some(&json!({}))).await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["thread"]["id"].as_str().unwrap().to_owned()
}

/// A server with a WebSocket and an HTTP listener on loopback.
async fn serve(home: &Home, model: &ScriptedServer, extra: &[&str]) -> Server {
    let mut args = vec![
        "--listen",
        "ws://127.0.0.1:0",
        "--listen",
        "http://127.0.0.1:0",
        "--tools",
        "shell",
    ];
    args.extend_from_slice(extra);
    Server::start(home, &model.url(), &args, 2).await
}

#[tokio::test]
async fn a_foreign_origin_is_refused_everywhere_and_creates_nothing() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let mut server = serve(&home, &model, &[]).await;
    let ws = server.addr("ws");
    let api = server.addr("http");

    // WebSocket upgrades: the ws:// listener on any path, /ws on http://.
    for origin in [EVIL, "null", "http://localhost.evil.example"] {
        let from = [("Origin", origin)];
        for (addr, path) in [(&ws, "/"), (&ws, "/anything"), (&api, "/ws")] {
            let response = upgrade_refused(addr, path, &from).await;
            let message = refusal(&response, 403, "forbidden_origin");
            assert!(
                message.contains(&format!("{origin:?}")) && message.contains("--allow-origin"),
                "{message}"
            );
        }
    }
    // HTTP: a browser's simple cross-site POST (text/plain, no preflight),
    // a JSON one, a read, a preflight, an unknown route, the document.
    let from = [("Origin", EVIL)];
    let plain = [("Origin", EVIL), ("Content-Type", "text/plain")];
    let simple = http_text(&api, "POST", "/v1/threads", &plain, Some("{}")).await;
    refusal(&simple, 403, "forbidden_origin");
    let posted = http(&api, "POST", "/v1/threads", &from, Some(&json!({}))).await;
    refusal(&posted, 403, "forbidden_origin");
    let turn = json!({"input": [{"type": "text", "text": "run"}]});
    let turned = http(&api, "POST", "/v1/threads/x/turns", &from, Some(&turn)).await;
    refusal(&turned, 403, "forbidden_origin");
    for path in ["/v1/threads", "/v1/openapi.json", "/v1/nowhere"] {
        refusal(
            &http(&api, "GET", path, &from, None).await,
            403,
            "forbidden_origin",
        );
    }
    let preflight = [
        ("Origin", EVIL),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type"),
    ];
    let options = http(&api, "OPTIONS", "/v1/threads", &preflight, None).await;
    refusal(&options, 403, "forbidden_origin");

    // Not JSON, without an Origin: 415 before anything is created.
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let headers = [("Content-Type", content_type)];
        let response = http_text(&api, "POST", "/v1/threads", &headers, Some("{}")).await;
        let message = refusal(&response, 415, "unsupported_media_type");
        assert!(message.contains("application/json"), "{message}");
    }
    let bare = http(&api, "POST", "/v1/threads", &[], None).await;
    refusal(&bare, 415, "unsupported_media_type");

    // The probes answer whoever asks: they reveal nothing.
    for addr in [&ws, &api] {
        for path in ["/healthz", "/readyz"] {
            let probe = http(addr, "GET", path, &from, None).await;
            assert_eq!(probe.status, 200, "{addr}{path}: {}", probe.body);
        }
    }

    // Nothing was created; a client without Origin works as before.
    assert_eq!(thread_ids(&api, &[]).await, Vec::<String>::new());
    let charset = [("Content-Type", "application/json; charset=UTF-8")];
    let created = http_text(&api, "POST", "/v1/threads", &charset, Some("{}")).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let thread_id = created.json()["thread"]["id"].as_str().unwrap().to_owned();
    initialized(&ws, "/", &[]).await;
    initialized(&api, "/ws", &[]).await;

    assert!(server.terminate().await.success());
    let (listed, _) = home
        .spool_ok(&model.url(), &["threads", "list", "--json"])
        .await;
    let ids: Vec<Value> = json_lines(&listed)
        .iter()
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(
        ids,
        [json!(thread_id)],
        "only the thread of the plain client"
    );
    let log = server.stderr_text();
    assert!(
        log.contains("refused a cross-origin request") && log.contains("evil.example"),
        "{log}"
    );
}

#[tokio::test]
async fn a_host_that_is_not_the_listener_is_refused() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let mut server = serve(&home, &model, &[]).await;
    let ws = server.addr("ws");
    let api = server.addr("http");
    let port = api.rsplit_once(':').unwrap().1;
    let rebound = format!("attacker.example:{port}");
    let wrong_port = "127.0.0.1:1".to_owned();

    for host in [&rebound, &wrong_port] {
        let to = [("Host", host.as_str())];
        for (addr, path) in [(&ws, "/"), (&api, "/ws")] {
            let response = upgrade_refused(addr, path, &to).await;
            let message = refusal(&response, 421, "misdirected_request");
            assert!(message.contains("--allow-host"), "{message}");
        }
        let read = http(&api, "GET", "/v1/threads", &to, None).await;
        refusal(&read, 421, "misdirected_request");
        let create = http(&api, "POST", "/v1/threads", &to, Some(&json!({}))).await;
        refusal(&create, 421, "misdirected_request");
    }
    // The rebinding page's own origin does not help it.
    let same_site = format!("http://{rebound}");
    let rebinding = [("Host", rebound.as_str()), ("Origin", same_site.as_str())];
    let create = http(&api, "POST", "/v1/threads", &rebinding, Some(&json!({}))).await;
    refusal(&create, 421, "misdirected_request");
    // No Host at all.
    let hostless = "POST /v1/threads HTTP/1.1\r\nConnection: close\r\n\
                    Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    let response = Body::open_raw(&api, hostless).await.read_to_end().await;
    refusal(&response, 421, "misdirected_request");

    // Its own names work, and a page of its own origin may use it.
    let localhost = format!("localhost:{port}");
    let own_origin = format!("http://{localhost}");
    let same_origin = [
        ("Host", localhost.as_str()),
        ("Origin", own_origin.as_str()),
    ];
    let thread_id = create_thread(&api, &same_origin).await;
    initialized(&api, "/ws", &same_origin).await;
    let ws_port = ws.rsplit_once(':').unwrap().1;
    let ws_localhost = format!("localhost:{ws_port}");
    initialized(&ws, "/", &[("Host", ws_localhost.as_str())]).await;
    // localhost's origin is not 127.0.0.1's.
    let crossed = [("Origin", own_origin.as_str())];
    refusal(
        &http(&api, "GET", "/v1/threads", &crossed, None).await,
        403,
        "forbidden_origin",
    );

    assert_eq!(thread_ids(&api, &[]).await, [thread_id]);
    assert!(server.terminate().await.success());
    let log = server.stderr_text();
    assert!(log.contains("refused a request for another host"), "{log}");
    assert!(log.contains("attacker.example"), "{log}");
}

#[tokio::test]
async fn allow_origin_lets_exactly_that_origin_in() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let app = "http://app.example:8080";
    let server = serve(
        &home,
        &model,
        &["--allow-origin", app, "--allow-host", "spool.internal"],
    )
    .await;
    let ws = server.addr("ws");
    let api = server.addr("http");

    let from_app = [("Origin", app)];
    initialized(&ws, "/", &from_app).await;
    initialized(&api, "/ws", &from_app).await;
    let thread_id = create_thread(&api, &from_app).await;
    for origin in [
        "http://app.example:8081",
        "https://app.example:8080",
        "http://app.example",
        "http://evil.app.example:8080",
    ] {
        let from = [("Origin", origin)];
        refusal(
            &upgrade_refused(&ws, "/", &from).await,
            403,
            "forbidden_origin",
        );
        let posted = http(&api, "POST", "/v1/threads", &from, Some(&json!({}))).await;
        refusal(&posted, 403, "forbidden_origin");
    }
    // --allow-host names, and the allowed origin's host, may be addressed.
    for host in ["spool.internal:443", "spool.internal", "app.example:8080"] {
        let ids = thread_ids(&api, &[("Host", host)]).await;
        assert_eq!(ids, std::slice::from_ref(&thread_id), "{host}");
    }
    let other = [("Host", "other.internal")];
    refusal(
        &http(&api, "GET", "/v1/threads", &other, None).await,
        421,
        "misdirected_request",
    );

    // The same from the environment, comma-separated.
    let env_home = Home::new();
    let from_env = Server::start_with_env(
        &env_home,
        &model.url(),
        &["--listen", "ws://127.0.0.1:0"],
        1,
        &[(
            "SPOOL_ALLOW_ORIGIN",
            "http://a.example, https://B.example:8443",
        )],
    )
    .await;
    let env_ws = from_env.addr("ws");
    for origin in ["http://a.example:80", "https://b.example:8443"] {
        initialized(&env_ws, "/", &[("Origin", origin)]).await;
    }
    let refused = upgrade_refused(&env_ws, "/", &[("Origin", "http://c.example")]).await;
    refusal(&refused, 403, "forbidden_origin");

    // A malformed rule stops the server before it starts, saying why.
    for (flag, value, says) in [
        ("--allow-origin", "http://app.example/app", "no path"),
        ("--allow-origin", "app.example:8080", "no scheme"),
        ("--allow-origin", "null", "cannot be allowed"),
        ("--allow-origin", "http://app.example:99999", "65535"),
        ("--allow-host", "http://spool.internal", "NAME[:PORT]"),
        ("--allow-host", "spool internal", "characters"),
    ] {
        let args = ["serve", "--listen", "http://127.0.0.1:0", flag, value];
        let out = home.spool(&model.url(), &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value}");
        assert!(
            stderr.contains(value) && stderr.contains(says),
            "{flag} {value}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_valid_token_does_not_let_a_foreign_origin_in() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "t0ps3cret-origin-token\n").unwrap();
    let mut server = serve(
        &home,
        &model,
        &["--auth-token-file", token_file.to_str().unwrap()],
    )
    .await;
    let ws = server.addr("ws");
    let api = server.addr("http");
    let bearer = ("Authorization", "Bearer t0ps3cret-origin-token");

    let from = [bearer, ("Origin", EVIL)];
    refusal(
        &upgrade_refused(&ws, "/", &from).await,
        403,
        "forbidden_origin",
    );
    refusal(
        &upgrade_refused(&api, "/ws", &from).await,
        403,
        "forbidden_origin",
    );
    let posted = http(&api, "POST", "/v1/threads", &from, Some(&json!({}))).await;
    refusal(&posted, 403, "forbidden_origin");
    refusal(
        &http(&api, "GET", "/v1/threads", &from, None).await,
        403,
        "forbidden_origin",
    );
    let rebound = [bearer, ("Host", "attacker.example")];
    refusal(
        &http(&api, "GET", "/v1/threads", &rebound, None).await,
        421,
        "misdirected_request",
    );
    let plain = [bearer, ("Content-Type", "text/plain")];
    let simple = http_text(&api, "POST", "/v1/threads", &plain, Some("{}")).await;
    refusal(&simple, 415, "unsupported_media_type");
    // The guard answers before the token is looked at: without one, a
    // foreign origin still hears 403, a plain client 401.
    let tokenless = [("Origin", EVIL)];
    refusal(
        &http(&api, "GET", "/v1/threads", &tokenless, None).await,
        403,
        "forbidden_origin",
    );
    refusal(
        &http(&api, "GET", "/v1/threads", &[], None).await,
        401,
        "unauthorized",
    );
    assert_eq!(
        http(&api, "GET", "/healthz", &tokenless, None).await.status,
        200
    );

    assert_eq!(thread_ids(&api, &[bearer]).await, Vec::<String>::new());
    let thread_id = create_thread(&api, &[bearer]).await;
    initialized(&ws, "/", &[bearer]).await;
    assert_eq!(thread_ids(&api, &[bearer]).await, [thread_id]);

    assert!(server.terminate().await.success());
    let log = server.stderr_text();
    assert!(log.contains("refused a cross-origin request"), "{log}");
    assert!(!log.contains("t0ps3cret"), "{log}");
}
