//! Both HTTP providers against the real local llama-server, through a
//! recording proxy so the test also sees what the server was sent.
//!
//! Needs `SPOOL_LOCAL_MODEL_URL` (e.g. `http://127.0.0.1:18080/v1`); the
//! test fails without it rather than passing vacuously.

mod common;

use common::{collect, split, streamed_text, usage_of};
use spool_model::{
    ChatProvider, ModelEvent, ModelProvider, ModelRequest, ProviderConfig, ResponsesProvider,
};
use spool_protocol::responses::{ContentItem, KnownResponseItem, ResponseItem};
use spool_testkit::RecordingProxy;

fn local_model_url() -> String {
    std::env::var("SPOOL_LOCAL_MODEL_URL").unwrap_or_else(|_| {
        panic!(
            "SPOOL_LOCAL_MODEL_URL is not set. Run the tests with `scripts/test.sh`, or start \
             the local model with `scripts/local-model.sh start` and export \
             SPOOL_LOCAL_MODEL_URL=http://127.0.0.1:PORT/v1"
        )
    })
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "local".into(),
        instructions: Some("Answer in one short sentence.".into()),
        input: vec![ResponseItem::user_text("What is the capital of France?")],
        // Bounded so a rambling 135M model cannot stretch the test.
        max_output_tokens: Some(24),
        temperature: Some(0.0),
        ..ModelRequest::default()
    }
}

/// The text of the completed assistant message(s).
fn final_text(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::OutputItemDone {
                item: ResponseItem::Known(KnownResponseItem::Message { content, .. }),
                ..
            } => Some(content),
            _ => None,
        })
        .flatten()
        .filter_map(|c| match c {
            ContentItem::OutputText { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

async fn check(provider: &dyn ModelProvider, proxy: &RecordingProxy, path: &str) {
    let (events, error) = split(collect(provider.stream(request())).await);
    assert_eq!(error, None, "the local model failed: {events:#?}");
    let streamed = streamed_text(&events);
    assert!(!streamed.trim().is_empty(), "no text streamed: {events:#?}");
    assert_eq!(
        streamed,
        final_text(&events),
        "deltas and the final item disagree"
    );
    let usage = usage_of(&events).expect("usage on completion");
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    assert!(usage.total_tokens >= usage.input_tokens + usage.output_tokens);

    let sent = proxy.requests();
    let last = sent.last().expect("the proxy saw the request");
    assert!(last.path.ends_with(path), "{}", last.path);
    assert_eq!(last.body["stream"], true);
}

#[tokio::test]
async fn responses_api_against_local_model() -> anyhow::Result<()> {
    let proxy = RecordingProxy::start(&local_model_url()).await?;
    let provider = ResponsesProvider::new(ProviderConfig::new("local", proxy.url()));
    check(&provider, &proxy, "/responses").await;
    let body = &proxy.requests()[0].body;
    assert_eq!(
        body["input"][0]["content"][0]["text"],
        "What is the capital of France?"
    );
    assert_eq!(body["max_output_tokens"], 24);
    Ok(())
}

#[tokio::test]
async fn chat_completions_against_local_model() -> anyhow::Result<()> {
    let proxy = RecordingProxy::start(&local_model_url()).await?;
    let provider = ChatProvider::new(ProviderConfig::new("local", proxy.url()));
    check(&provider, &proxy, "/chat/completions").await;
    let body = &proxy.requests()[0].body;
    assert_eq!(
        body["messages"][1]["content"],
        "What is the capital of France?"
    );
    assert_eq!(body["max_tokens"], 24);
    Ok(())
}
