//! The test servers themselves, driven by a real HTTP client.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use spool_testkit::{Gate, RecordingProxy, ScriptedResponse, ScriptedServer};

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Fails the test instead of hanging it when an await never finishes.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test]
async fn serves_in_order_records_requests_and_reports_an_empty_queue() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([
        ScriptedResponse::json(201, &json!({"ok": true})).header("x-test", "1"),
        ScriptedResponse::sse_data(["{\"a\":1}", "[DONE]"]),
    ])
    .await?;
    let client = client();
    let first = client
        .post(format!("{}/things?x=1", server.url()))
        .header("authorization", "Bearer k")
        .json(&json!({"hello": "world"}))
        .send()
        .await?;
    assert_eq!(first.status(), 201);
    assert_eq!(first.headers()["x-test"], "1");
    assert_eq!(
        first.json::<serde_json::Value>().await?,
        json!({"ok": true})
    );

    let second = client.get(server.url()).send().await?.text().await?;
    assert_eq!(second, "data: {\"a\":1}\n\ndata: [DONE]\n\n");

    let third = client.get(server.origin()).send().await?;
    assert_eq!(third.status(), 500);
    assert!(
        third
            .text()
            .await?
            .contains("no scripted response left for GET /")
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/things?x=1");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer k"));
    assert_eq!(requests[0].body, json!({"hello": "world"}));
    assert_eq!(requests[1].body, serde_json::Value::Null);
    Ok(())
}

#[tokio::test]
async fn a_standing_answer_serves_every_match_and_leaves_the_queue_alone() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([ScriptedResponse::text(200, "queued")]).await?;
    server.answer_matching(
        |r| r.body_text().contains("title"),
        ScriptedResponse::text(200, "standing"),
    );
    let client = client();
    let post = |body: &'static str| client.post(server.url()).body(body).send();
    assert_eq!(post("a title, please").await?.text().await?, "standing");
    assert_eq!(post("the turn").await?.text().await?, "queued");
    assert_eq!(post("another title").await?.text().await?, "standing");
    assert_eq!(server.remaining(), 0);
    assert_eq!(server.requests().len(), 3);
    Ok(())
}

#[tokio::test]
async fn abort_breaks_the_body_mid_stream() -> anyhow::Result<()> {
    let server =
        ScriptedServer::with_responses([ScriptedResponse::sse_data(["{\"a\":1}"]).abort()]).await?;
    let response = client().get(server.url()).send().await?;
    let mut body = response.bytes_stream();
    let first = within("first chunk", body.next()).await;
    assert_eq!(&first.expect("a chunk")?[..], b"data: {\"a\":1}\n\n");
    let end = within("end of body", body.next()).await;
    assert!(
        matches!(end, Some(Err(_))),
        "expected a body error, got {end:?}"
    );
    Ok(())
}

#[tokio::test]
async fn proxy_streams_chunk_by_chunk_and_records() -> anyhow::Result<()> {
    let gate = Gate::new();
    let upstream = ScriptedServer::with_responses([ScriptedResponse::sse_data(["one"])
        .wait_for(&gate)
        .chunk("data: two\n\n")])
    .await?;
    let proxy = RecordingProxy::start(&upstream.url()).await?;
    assert!(proxy.url().ends_with("/v1"));

    let response = client()
        .post(format!("{}/chat/completions", proxy.url()))
        .json(&json!({"model": "m"}))
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();
    // The upstream has not sent "two" yet and will not until the gate
    // opens: a buffering proxy would never deliver "one" here.
    let first = within("first chunk through the proxy", body.next()).await;
    assert_eq!(&first.expect("a chunk")?[..], b"data: one\n\n");
    gate.open();
    let mut rest = Vec::new();
    while let Some(chunk) = within("rest of the body", body.next()).await {
        rest.extend_from_slice(&chunk?);
    }
    assert_eq!(rest, b"data: two\n\n");

    let seen = proxy.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].body, json!({"model": "m"}));
    assert_eq!(upstream.requests()[0].body, json!({"model": "m"}));
    Ok(())
}

#[tokio::test]
async fn proxy_answers_502_when_the_upstream_is_down() -> anyhow::Result<()> {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let proxy = RecordingProxy::start(&format!("http://127.0.0.1:{port}/v1")).await?;
    let response = client()
        .post(format!("{}/responses", proxy.url()))
        .body("{}")
        .send()
        .await?;
    assert_eq!(response.status(), 502);
    assert_eq!(proxy.requests().len(), 1);
    Ok(())
}
