//! A provider that replays scripted responses, for tests of everything
//! above the provider boundary.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::{StreamExt, stream};
use serde_json::Value;
use spool_protocol::TokenUsageBreakdown;
use spool_protocol::responses::{KnownResponseItem, ResponseItem};

use crate::{ModelError, ModelEvent, ModelProvider, ModelRequest, ModelStream};

/// One scripted response: the items its stream yields, in order.
pub type Script = Vec<Result<ModelEvent, ModelError>>;

/// Returns its scripts in order, one per `stream` call, and records every
/// request. Clones share the scripts and the record, so a test can keep one
/// handle and give another to the code under test.
///
/// A script is yielded up to and including its first terminal item
/// (`Completed` or `Err`). A script without one stays open after its last
/// event, as a stalled provider does: use that to test interrupts and
/// timeouts. Once the scripts run out, `stream` yields one error.
#[derive(Debug, Clone, Default)]
pub struct ScriptedProvider {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    scripts: VecDeque<Script>,
    requests: Vec<ModelRequest>,
}

impl ScriptedProvider {
    pub fn new(scripts: Vec<Script>) -> Self {
        ScriptedProvider {
            inner: Arc::new(Mutex::new(Inner {
                scripts: scripts.into(),
                requests: Vec::new(),
            })),
        }
    }

    /// Queue one more script after the existing ones.
    pub fn push(&self, script: Script) {
        self.lock().scripts.push_back(script);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// Scripts not yet used.
    pub fn remaining(&self) -> usize {
        self.lock().scripts.len()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A test that panicked while holding the lock has already failed;
        // the data is still fine to read.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A complete response with one assistant message streamed as `deltas`.
    pub fn text_response(response_id: &str, deltas: &[&str]) -> Script {
        let item_id = format!("msg_{response_id}");
        let text: String = deltas.concat();
        let mut events = vec![
            Ok(ModelEvent::Created {
                response_id: Some(response_id.into()),
            }),
            Ok(ModelEvent::OutputItemAdded {
                output_index: 0,
                item: ResponseItem::Known(KnownResponseItem::Message {
                    id: Some(item_id.clone()),
                    role: "assistant".into(),
                    content: Vec::new(),
                    status: Some("in_progress".into()),
                }),
            }),
        ];
        events.extend(deltas.iter().map(|d| {
            Ok(ModelEvent::OutputTextDelta {
                item_id: item_id.clone(),
                output_index: 0,
                delta: (*d).to_owned(),
            })
        }));
        events.push(Ok(done(
            0,
            ResponseItem::assistant_text(Some(item_id), text),
        )));
        events.push(Ok(completed(response_id)));
        events
    }

    /// A complete response with one function call, its arguments in one delta.
    pub fn function_call_response(
        response_id: &str,
        call_id: &str,
        name: &str,
        arguments: &str,
    ) -> Script {
        let item = |args: &str, status: &str| {
            ResponseItem::Known(KnownResponseItem::FunctionCall {
                id: Some(format!("fc_{call_id}")),
                call_id: call_id.into(),
                name: name.into(),
                arguments: args.into(),
                status: Some(status.into()),
            })
        };
        vec![
            Ok(ModelEvent::Created {
                response_id: Some(response_id.into()),
            }),
            Ok(ModelEvent::OutputItemAdded {
                output_index: 0,
                item: item("", "in_progress"),
            }),
            Ok(ModelEvent::FunctionCallArgumentsDelta {
                item_id: format!("fc_{call_id}"),
                output_index: 0,
                delta: arguments.into(),
            }),
            Ok(done(0, item(arguments, "completed"))),
            Ok(completed(response_id)),
        ]
    }
}

fn done(output_index: usize, item: ResponseItem) -> ModelEvent {
    let raw = serde_json::to_value(&item).unwrap_or(Value::Null);
    ModelEvent::OutputItemDone {
        output_index,
        item,
        raw,
    }
}

fn completed(response_id: &str) -> ModelEvent {
    ModelEvent::Completed {
        response_id: Some(response_id.into()),
        usage: Some(TokenUsageBreakdown {
            total_tokens: 15,
            input_tokens: 10,
            cached_input_tokens: 0,
            cache_write_input_tokens: 0,
            output_tokens: 5,
            reasoning_output_tokens: 0,
        }),
        incomplete_reason: None,
    }
}

impl ModelProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let script = {
            let mut inner = self.lock();
            inner.requests.push(request);
            inner.scripts.pop_front()
        };
        let Some(script) = script else {
            let n = self.lock().requests.len();
            return Box::pin(stream::iter([Err(ModelError::scripted(format!(
                "no scripted response left for request #{n}"
            )))]));
        };
        let end = script
            .iter()
            .position(|item| item.as_ref().map_or(true, ModelEvent::is_terminal));
        match end {
            Some(last) => Box::pin(stream::iter(script.into_iter().take(last + 1))),
            None => Box::pin(stream::iter(script).chain(stream::pending())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replays_in_order_and_records_requests() {
        let provider = ScriptedProvider::new(vec![
            ScriptedProvider::text_response("r1", &["Hel", "lo"]),
            vec![Err(ModelError::scripted("boom")), Ok(completed("never"))],
        ]);
        let handle = provider.clone();
        let first: Vec<_> = provider
            .stream(ModelRequest {
                model: "a".into(),
                ..ModelRequest::default()
            })
            .collect()
            .await;
        assert_eq!(first.len(), 6);
        assert!(matches!(
            first.last(),
            Some(Ok(ModelEvent::Completed { .. }))
        ));
        let second: Vec<_> = provider.stream(ModelRequest::default()).collect().await;
        assert_eq!(second, vec![Err(ModelError::scripted("boom"))]);
        let third: Vec<_> = provider.stream(ModelRequest::default()).collect().await;
        assert!(matches!(&third[..], [Err(ModelError::Scripted { .. })]));
        let models: Vec<String> = handle.requests().into_iter().map(|r| r.model).collect();
        assert_eq!(models, vec!["a", "", ""]);
    }

    #[tokio::test]
    async fn a_script_without_terminal_stays_open() {
        let provider =
            ScriptedProvider::new(vec![vec![Ok(ModelEvent::Created { response_id: None })]]);
        let mut stream = provider.stream(ModelRequest::default());
        assert!(stream.next().await.is_some());
        let next = tokio::time::timeout(std::time::Duration::from_millis(20), stream.next()).await;
        assert!(next.is_err(), "the stream should still be open");
    }
}
