//! Every failure path of the HTTP providers, on a real socket: what the
//! error says, how it is classified, and whether it was retried.

mod common;

use std::time::{Duration, Instant};

use common::{collect, config, request, split, streamed_text};
use serde_json::{Value, json};
use spool_model::{
    ChatProvider, ModelError, ModelEvent, ModelProvider, ProviderConfig, ResponsesProvider,
    RetryPolicy, TimeoutPhase,
};
use spool_protocol::CodexErrorInfo;
use spool_testkit::{ScriptedResponse, ScriptedServer};

fn ev(name: &str, mut data: Value) -> (String, Value) {
    data["type"] = json!(name);
    (name.to_owned(), data)
}

/// A complete Responses stream with one message saying `text`.
fn ok_stream(text: &str) -> ScriptedResponse {
    ScriptedResponse::sse([
        ev("response.created", json!({"response": {"id": "resp_ok"}})),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message",
            "id": "m", "role": "assistant", "content": []}}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "m", "output_index": 0, "delta": text}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "message",
            "id": "m", "role": "assistant", "content": [{"type": "output_text", "text": text}]}}),
        ),
        ev("response.completed", json!({"response": {"id": "resp_ok"}})),
    ])
}

/// The start of a stream: created, a message added, two deltas.
fn partial_stream() -> ScriptedResponse {
    ScriptedResponse::sse([
        ev("response.created", json!({"response": {"id": "resp_p"}})),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message",
            "id": "m", "role": "assistant", "content": []}}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "m", "output_index": 0, "delta": "Hel"}),
        ),
        ev(
            "response.output_text.delta",
            json!({"item_id": "m", "output_index": 0, "delta": "lo"}),
        ),
    ])
}

async fn run_responses(config: ProviderConfig) -> (Vec<ModelEvent>, Option<ModelError>) {
    let provider = ResponsesProvider::new(config);
    split(collect(provider.stream(request())).await)
}

#[tokio::test]
async fn http_400_surfaces_the_provider_message_without_retry() -> anyhow::Result<()> {
    let body = json!({"error": {"message": "Invalid value for 'model': nope.",
        "type": "invalid_request_error", "code": "model_not_found"}});
    let server = ScriptedServer::with_responses([ScriptedResponse::json(400, &body)]).await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert!(events.is_empty());
    let error = error.expect("an error");
    assert!(
        matches!(&error, ModelError::Http { status: 400, code: Some(c), .. } if c == "model_not_found")
    );
    let text = error.to_string();
    assert_eq!(
        text,
        format!(
            "test-provider: POST {}/responses failed with HTTP 400: Invalid value for 'model': nope.",
            server.url()
        )
    );
    assert!(!error.is_retryable());
    assert_eq!(error.codex_error_info(), CodexErrorInfo::BadRequest);
    assert_eq!(server.requests().len(), 1, "a 400 must not be retried");
    Ok(())
}

#[tokio::test]
async fn http_500_then_200_is_retried_and_succeeds() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([
        ScriptedResponse::text(500, "upstream exploded"),
        ok_stream("fine"),
    ])
    .await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert_eq!(error, None);
    assert_eq!(streamed_text(&events), "fine");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.requests()[0].body, server.requests()[1].body);
    Ok(())
}

#[tokio::test]
async fn http_429_honors_retry_after() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([
        ScriptedResponse::json(429, &json!({"error": {"message": "Rate limit reached"}}))
            .header("retry-after", "1"),
        ok_stream("after the wait"),
    ])
    .await?;
    let started = Instant::now();
    // The computed backoff is 1 ms, so only Retry-After explains a wait.
    let (events, error) = run_responses(config(&server.url())).await;
    assert_eq!(error, None);
    assert_eq!(streamed_text(&events), "after the wait");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn persistent_503_gives_up_after_max_attempts() -> anyhow::Result<()> {
    let busy = || ScriptedResponse::json(503, &json!({"error": {"message": "overloaded"}}));
    let server = ScriptedServer::with_responses([busy(), busy(), busy(), busy()]).await?;
    let config = config(&server.url()).with_retry(RetryPolicy::fast(3));
    let (events, error) = run_responses(config).await;
    assert!(events.is_empty());
    let error = error.expect("an error");
    let ModelError::RetriesExhausted { attempts: 3, last } = &error else {
        panic!("expected RetriesExhausted after 3 attempts, got {error:?}");
    };
    assert!(matches!(**last, ModelError::Http { status: 503, .. }));
    assert!(
        error
            .to_string()
            .starts_with("gave up after 3 attempts: test-provider: POST")
    );
    assert!(error.to_string().ends_with("HTTP 503: overloaded"));
    assert_eq!(
        error.codex_error_info(),
        CodexErrorInfo::ResponseTooManyFailedAttempts {
            http_status_code: Some(503)
        }
    );
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.remaining(), 1);
    Ok(())
}

#[tokio::test]
async fn malformed_data_line_is_an_error() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([partial_stream()
        .chunk("event: response.output_text.delta\ndata: {\"item_id\": \"m\", \"delta\": \n\n")])
    .await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert_eq!(streamed_text(&events), "Hello");
    let error = error.expect("an error");
    assert!(
        matches!(error, ModelError::MalformedStream { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("undecodable JSON in `response.output_text.delta`")
    );
    assert_eq!(error.codex_error_info(), CodexErrorInfo::Other);
    assert_eq!(server.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn connection_dropped_after_deltas_is_final() -> anyhow::Result<()> {
    // A second response is queued: using it would be a wrong retry.
    let server =
        ScriptedServer::with_responses([partial_stream().abort(), ok_stream("retried")]).await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert!(matches!(events[0], ModelEvent::Created { .. }));
    assert_eq!(
        streamed_text(&events),
        "Hello",
        "the deltas arrive before the error"
    );
    let error = error.expect("an error");
    assert!(
        matches!(error, ModelError::StreamDropped { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("dropped before the response completed")
    );
    assert_eq!(
        error.codex_error_info(),
        CodexErrorInfo::ResponseStreamDisconnected {
            http_status_code: None
        }
    );
    assert_eq!(server.requests().len(), 1, "output streamed, so no retry");
    Ok(())
}

#[tokio::test]
async fn body_ending_without_completed_is_a_dropped_stream() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([partial_stream()]).await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert_eq!(streamed_text(&events), "Hello");
    assert!(
        matches!(error, Some(ModelError::StreamDropped { .. })),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn drop_right_after_created_is_still_retried() -> anyhow::Result<()> {
    let created_only = ScriptedResponse::sse([ev(
        "response.created",
        json!({"response": {"id": "resp_x"}}),
    )])
    .abort();
    let server = ScriptedServer::with_responses([created_only, ok_stream("second try")]).await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert_eq!(error, None);
    let created: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::Created { .. }))
        .collect();
    assert_eq!(
        created,
        vec![&ModelEvent::Created {
            response_id: Some("resp_ok".into())
        }]
    );
    assert_eq!(streamed_text(&events), "second try");
    assert_eq!(server.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn response_failed_event() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([partial_stream().sse_event(
        "response.failed",
        &json!({"type": "response.failed", "response": {"id": "resp_p", "status": "failed",
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window."}}}),
    )])
    .await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert_eq!(streamed_text(&events), "Hello");
    let error = error.expect("an error");
    assert_eq!(
        error.to_string(),
        format!(
            "test-provider: response from {}/responses failed: Your input exceeds the context window. (context_length_exceeded)",
            server.url()
        )
    );
    assert_eq!(
        error.codex_error_info(),
        CodexErrorInfo::ContextWindowExceeded
    );
    assert!(!error.is_retryable());
    Ok(())
}

#[tokio::test]
async fn error_event() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([ScriptedResponse::sse([ev(
        "error",
        json!({"code": "server_error", "message": "Something went wrong.", "param": null}),
    )])])
    .await?;
    let (events, error) = run_responses(config(&server.url())).await;
    assert!(events.is_empty());
    let error = error.expect("an error");
    assert!(
        matches!(&error, ModelError::ResponseFailed { message, .. } if message == "Something went wrong.")
    );
    assert_eq!(
        error.codex_error_info(),
        CodexErrorInfo::InternalServerError
    );
    assert_eq!(server.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn connect_error_when_nothing_listens() -> anyhow::Result<()> {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let provider = ResponsesProvider::new(config(&url).with_retry(RetryPolicy::none()));
    let (_, error) = split(collect(provider.stream(request())).await);
    let error = error.expect("an error");
    assert!(matches!(error, ModelError::Connect { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with(&format!(
            "test-provider: could not connect to {url}/responses"
        )),
        "{error}"
    );
    assert_eq!(
        error.codex_error_info(),
        CodexErrorInfo::HttpConnectionFailed {
            http_status_code: None
        }
    );

    // With retries, connect errors are retried and then given up on.
    let provider = ResponsesProvider::new(config(&url).with_retry(RetryPolicy::fast(2)));
    let (_, error) = split(collect(provider.stream(request())).await);
    assert!(matches!(
        error,
        Some(ModelError::RetriesExhausted { attempts: 2, ref last }) if matches!(**last, ModelError::Connect { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn idle_stream_times_out() -> anyhow::Result<()> {
    let server =
        ScriptedServer::with_responses([partial_stream().delay(Duration::from_secs(5))]).await?;
    let mut config = config(&server.url()).with_retry(RetryPolicy::none());
    config.idle_timeout = Duration::from_millis(200);
    let (events, error) = run_responses(config).await;
    assert_eq!(streamed_text(&events), "Hello");
    assert!(
        matches!(
            error,
            Some(ModelError::Timeout {
                phase: TimeoutPhase::Idle,
                ..
            })
        ),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_reported() -> anyhow::Result<()> {
    let server =
        ScriptedServer::with_responses([ScriptedResponse::json(200, &json!({"id": "resp"}))])
            .await?;
    let (_, error) = run_responses(config(&server.url())).await;
    let error = error.expect("an error");
    assert!(
        error.to_string().contains("expected an SSE stream"),
        "{error}"
    );
    Ok(())
}

// --- Chat Completions ---

async fn run_chat(server: &ScriptedServer) -> (Vec<ModelEvent>, Option<ModelError>) {
    let provider = ChatProvider::new(config(&server.url()));
    split(collect(provider.stream(request())).await)
}

fn content(text: &str) -> String {
    json!({"id": "c", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
}

#[tokio::test]
async fn chat_http_error_and_retry() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([
        ScriptedResponse::json(502, &json!({"error": {"message": "bad gateway"}})),
        ScriptedResponse::json(
            401,
            &json!({"error": {"message": "Incorrect API key provided"}}),
        ),
    ])
    .await?;
    let (_, error) = run_chat(&server).await;
    let error = error.expect("an error");
    assert!(
        matches!(&error, ModelError::Http { status: 401, message, .. } if message == "Incorrect API key provided")
    );
    assert!(
        error
            .to_string()
            .contains("/v1/chat/completions failed with HTTP 401")
    );
    assert_eq!(error.codex_error_info(), CodexErrorInfo::Unauthorized);
    assert_eq!(server.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn chat_stream_without_finish_or_done_is_dropped() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([
        ScriptedResponse::sse_data([content("Par"), content("is")]),
        ScriptedResponse::sse_data(["[DONE]"]),
    ])
    .await?;
    let (events, error) = run_chat(&server).await;
    assert_eq!(streamed_text(&events), "Paris");
    assert!(
        matches!(error, Some(ModelError::StreamDropped { .. })),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn chat_error_chunk_and_malformed_chunk() -> anyhow::Result<()> {
    let server = ScriptedServer::with_responses([
        ScriptedResponse::sse_data([
            content("Hi"),
            json!({"error": {"message": "the model crashed", "type": "server_error"}}).to_string(),
        ]),
        ScriptedResponse::sse_lines(["data: {\"id\": \"c\", \"choices\": [", ""]),
    ])
    .await?;
    let (events, error) = run_chat(&server).await;
    assert_eq!(streamed_text(&events), "Hi");
    assert!(
        matches!(&error, Some(ModelError::ResponseFailed { message, .. }) if message == "the model crashed")
    );

    let (events, error) = run_chat(&server).await;
    assert!(events.is_empty());
    assert!(
        matches!(error, Some(ModelError::MalformedStream { .. })),
        "{error:?}"
    );
    Ok(())
}
