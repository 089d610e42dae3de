//! Helpers shared by the provider tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use spool_model::{
    ModelError, ModelEvent, ModelRequest, ModelStream, ProviderConfig, RetryPolicy, ToolSpec,
};
use spool_protocol::responses::ResponseItem;

pub type Item = Result<ModelEvent, ModelError>;

/// A config for `url` that retries fast, so retry tests take milliseconds.
pub fn config(url: &str) -> ProviderConfig {
    ProviderConfig::new("test-provider", url)
        .with_api_key("sk-test")
        .with_retry(RetryPolicy::fast(4))
}

pub fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        instructions: Some("Be helpful.".into()),
        input: vec![ResponseItem::user_text("What is the weather in Paris?")],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather for a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }],
        parallel_tool_calls: true,
        ..ModelRequest::default()
    }
}

/// Every item of `stream`, checking the contract on the way: exactly one
/// terminal item, and it is the last one.
pub async fn collect(stream: ModelStream) -> Vec<Item> {
    let items: Vec<Item> = tokio::time::timeout(Duration::from_secs(20), stream.collect())
        .await
        .expect("the stream did not end within 20s");
    let terminals = items
        .iter()
        .filter(|i| i.as_ref().map_or(true, ModelEvent::is_terminal))
        .count();
    assert_eq!(
        terminals, 1,
        "expected exactly one terminal item: {items:#?}"
    );
    assert!(
        items
            .last()
            .is_some_and(|i| i.as_ref().map_or(true, ModelEvent::is_terminal)),
        "the terminal item must be last: {items:#?}"
    );
    items
}

/// The events before the terminal, and the terminal error if there is one.
pub fn split(items: Vec<Item>) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    for item in items {
        match item {
            Ok(e) => events.push(e),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

pub fn item(value: Value) -> ResponseItem {
    serde_json::from_value(value).expect("a response item")
}

pub fn usage_of(events: &[ModelEvent]) -> Option<spool_protocol::TokenUsageBreakdown> {
    events.iter().find_map(|e| match e {
        ModelEvent::Completed { usage, .. } => *usage,
        _ => None,
    })
}

/// The concatenated text deltas of a stream.
pub fn streamed_text(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::OutputTextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}
