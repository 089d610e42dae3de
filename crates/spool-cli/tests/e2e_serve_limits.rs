//! No flood of connections holds the server: 1,500 connections that send
//! half a header and stop are closed after the header timeout, those past
//! the listener's cap are refused at once (503), and meanwhile a client
//! already connected keeps working — with a descriptor limit low enough
//! that, uncapped, they would starve the store.

mod serve_net;
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_net::{Server, Upgrade, WebSocket, http};
use spool_testkit::ScriptedServer;
use support::Home;
use support::peer::Peer;
use support::rpc::thread_id_of;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HALF_OPEN: usize = 1_500;

/// Reads until the server closes `stream`; answers what it sent, or `None`
/// if it was still open at `deadline`.
async fn read_until_closed(stream: &mut TcpStream, deadline: Instant) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_are_closed_and_cannot_starve_the_store() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    // 1,024 descriptors: the default cap (1,024 per listener) no longer
    // fits beside the store's files, so the server lowers it.
    let args = ["--listen", "http://127.0.0.1:0", "--header-timeout", "2"];
    let server = Server::start_with_descriptors(&home, &model.url(), &args, 1, 1_024).await;
    let addr = server.addr("http");
    let mut client = match WebSocket::connect(&addr, "/ws", &[]).await {
        Upgrade::Open(ws) => ws,
        Upgrade::Refused(r) => panic!("upgrade refused: {} {}", r.status, r.body),
    };
    client.initialize(json!({})).await;

    let half_header = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nAccept: */");
    let flooded_at = Instant::now();
    let mut flood = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        let mut stream = TcpStream::connect(&addr).await.expect("connect");
        stream.write_all(half_header.as_bytes()).await.unwrap();
        flood.push(stream);
    }

    // The client that was there keeps working: its store has descriptors.
    let started = client.call(1, "thread/start", json!({})).await;
    assert!(
        started["result"]["thread"].is_object(),
        "thread/start during the flood: {started}"
    );
    let thread_id = thread_id_of(&started);
    let read = client
        .call(2, "thread/read", json!({"threadId": thread_id}))
        .await;
    assert!(read["result"]["thread"].is_object(), "{read}");

    // Every half-open connection is gone soon after the 2 s timeout: the
    // ones past the cap at once, with a 503 saying why.
    let deadline = flooded_at + Duration::from_secs(10);
    let (mut refused, mut timed_out) = (0, 0);
    for (index, stream) in flood.iter_mut().enumerate() {
        let answer = read_until_closed(stream, deadline)
            .await
            .unwrap_or_else(|| panic!("connection {index} still open after 10 s"));
        if answer.starts_with("HTTP/1.1 503") {
            assert!(answer.contains("too_many_connections"), "{answer}");
            refused += 1;
        } else {
            timed_out += 1;
        }
    }
    assert!(refused > 0, "the cap refused none of {HALF_OPEN}");
    assert!(timed_out > 0, "none was served up to the cap");
    let stderr = server.stderr_text();
    assert!(
        stderr.contains("lowered"),
        "the cap was lowered to fit 1,024 descriptors: {stderr}"
    );
    drop(flood);

    // A WebSocket session is not an idle HTTP connection: still served.
    let list = client.call(3, "thread/list", json!({})).await;
    assert_eq!(list["result"]["data"][0]["id"], thread_id, "{list}");
    // And the listener serves new requests again.
    let health = http(&addr, "GET", "/healthz", &[], None).await;
    assert_eq!(health.status, 200);
    eprintln!("{refused} refused at the cap, {timed_out} closed by the header timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_idle_past_the_timeout_is_closed() {
    let model = ScriptedServer::with_responses([]).await.unwrap();
    let home = Home::new();
    let args = ["--listen", "http://127.0.0.1:0", "--header-timeout", "1"];
    let server = Server::start(&home, &model.url(), &args, 1).await;
    let addr = server.addr("http");
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    // One answer, then nothing more asked: the server closes it.
    let answer = read_until_closed(&mut stream, Instant::now() + Duration::from_secs(10))
        .await
        .expect("the idle connection is closed within 10 s");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
