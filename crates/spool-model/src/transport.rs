//! HTTP + SSE plumbing shared by the Responses and Chat providers: one
//! attempt ([`HttpTransport::open`]) and the retrying driver ([`drive`]) that
//! feeds SSE events to a wire parser and enforces the event contract.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::Value;

use crate::config::ProviderConfig;
use crate::error::{ModelError, TimeoutPhase, message_from_body, truncate};
use crate::sse::{SseEvent, SseStream, error_chain, sse_events};
use crate::{ModelEvent, ModelStream};

/// Where a request goes, carried into every error it can produce.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub provider: String,
    pub url: String,
}

impl Endpoint {
    pub fn malformed(&self, message: impl Into<String>) -> ModelError {
        ModelError::MalformedStream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: message.into(),
        }
    }

    pub fn dropped(&self, message: impl Into<String>) -> ModelError {
        ModelError::StreamDropped {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: message.into(),
        }
    }

    pub fn failed(&self, code: Option<String>, message: impl Into<String>) -> ModelError {
        ModelError::ResponseFailed {
            provider: self.provider.clone(),
            url: self.url.clone(),
            code,
            message: message.into(),
        }
    }
}

/// A configured HTTP client; built once per provider and shared by all its
/// streams, so connections are pooled.
#[derive(Debug)]
pub(crate) struct HttpTransport {
    /// A client that could not be built is kept as its error and reported
    /// by every stream, so constructing a provider never fails or panics.
    client: Result<reqwest::Client, ModelError>,
    pub config: ProviderConfig,
}

impl HttpTransport {
    pub fn new(config: ProviderConfig) -> Self {
        // reqwest is built without a default crypto provider (we want ring,
        // not aws-lc); installing it twice is harmless, so ignore the result.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("spool/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ModelError::Client {
                provider: config.name.clone(),
                message: error_chain(&e),
            });
        HttpTransport { client, config }
    }

    pub fn endpoint(&self, path: &str) -> Endpoint {
        Endpoint {
            provider: self.config.name.clone(),
            url: self.config.endpoint(path),
        }
    }

    /// `GET {base_url}/models` (OpenAI's list shape: `data[].id`), within
    /// the connect and request timeouts.
    pub async fn list_models(&self) -> Result<Vec<String>, ModelError> {
        let endpoint = self.endpoint("models");
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let response = self.send(&endpoint, client.get(&endpoint.url)).await?;
        let text = self.read_text(response).await;
        let list: Value = serde_json::from_str(&text)
            .map_err(|e| endpoint.malformed(format!("the model list is not JSON: {e}")))?;
        Ok(list["data"]
            .as_array()
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// POSTs `body` as JSON to `{base_url}/{path}` and reads the JSON
    /// answer, of at most [`MAX_JSON_ANSWER`] bytes: the provider's
    /// endpoints that do not stream (conversations, compaction). One
    /// attempt, within the request and idle timeouts.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, ModelError> {
        let endpoint = self.endpoint(path);
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let request = client
            .post(&endpoint.url)
            .header("accept", "application/json")
            .json(body);
        let mut response = self.send(&endpoint, request).await?;
        let mut bytes = Vec::new();
        loop {
            let chunk = tokio::time::timeout(self.config.idle_timeout, response.chunk()).await;
            match chunk {
                Err(_) => {
                    return Err(ModelError::Timeout {
                        provider: endpoint.provider.clone(),
                        url: endpoint.url.clone(),
                        phase: TimeoutPhase::Idle,
                        after: self.config.idle_timeout,
                    });
                }
                Ok(Err(e)) => return Err(endpoint.dropped(error_chain(&e))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    if bytes.len() + chunk.len() > MAX_JSON_ANSWER {
                        return Err(endpoint.malformed(format!(
                            "the answer is larger than {MAX_JSON_ANSWER} bytes"
                        )));
                    }
                    bytes.extend_from_slice(&chunk);
                }
            }
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            let text = String::from_utf8_lossy(&bytes);
            endpoint.malformed(format!(
                "the answer is not JSON ({e}): {}",
                truncate(text.trim(), 500)
            ))
        })
    }

    /// Sends `request` with the provider's key and headers; a response
    /// whose status is not a success is the error it says.
    async fn send(
        &self,
        endpoint: &Endpoint,
        mut request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ModelError> {
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value);
        }
        let timeout = self.config.request_timeout;
        let response = match tokio::time::timeout(timeout, request.send()).await {
            Err(_) => {
                return Err(ModelError::Timeout {
                    provider: endpoint.provider.clone(),
                    url: endpoint.url.clone(),
                    phase: TimeoutPhase::Headers,
                    after: timeout,
                });
            }
            Ok(Err(e)) => {
                return Err(ModelError::Connect {
                    provider: endpoint.provider.clone(),
                    url: endpoint.url.clone(),
                    message: error_chain(&e),
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let text = self.read_text(response).await;
            let (message, code) = message_from_body(&text);
            return Err(ModelError::Http {
                provider: endpoint.provider.clone(),
                url: endpoint.url.clone(),
                status: status.as_u16(),
                message,
                code,
                retry_after,
            });
        }
        Ok(response)
    }

    /// One attempt: POST `body`, check the status, return the SSE events.
    async fn open(&self, endpoint: &Endpoint, body: &Value) -> Result<SseStream, ModelError> {
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let request = client
            .post(&endpoint.url)
            .header("accept", "text/event-stream")
            .json(body);
        let response = self.send(endpoint, request).await?;
        // A server that ignored `stream: true` answers with plain JSON; say
        // so instead of reporting a stream that ended without events.
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if !content_type.is_empty() && !content_type.contains("event-stream") {
            let text = self.read_text(response).await;
            return Err(endpoint.malformed(format!(
                "expected an SSE stream (text/event-stream), got {content_type}: {}",
                truncate(text.trim(), 500)
            )));
        }
        Ok(sse_events(
            response,
            self.config.idle_timeout,
            endpoint.clone(),
        ))
    }

    /// The body of a response we are about to report, bounded by the idle
    /// timeout so an error report cannot hang.
    async fn read_text(&self, response: reqwest::Response) -> String {
        match tokio::time::timeout(self.config.idle_timeout, response.text()).await {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => format!("(could not read the body: {})", error_chain(&e)),
            Err(_) => "(timed out reading the body)".into(),
        }
    }
}

/// The largest JSON answer [`HttpTransport::post_json`] reads: a compacted
/// window is a few hundred kilobytes; anything near this is not one.
pub const MAX_JSON_ANSWER: usize = 64 << 20;

/// `Retry-After` in seconds, or OpenAI's `retry-after-ms`.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    header("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|secs| Duration::from_secs_f64(secs.max(0.0)))
}

/// Turns one wire protocol's SSE events into model events.
pub(crate) trait WireParser: Send + 'static {
    /// Handle one SSE event, pushing what it produces. A terminal
    /// `Completed` pushed here ends the stream.
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError>;

    /// The body ended cleanly. Push a terminal event if the protocol allows
    /// ending here, else return the dropped-connection error.
    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError>;
}

/// The stream of one request: connects, parses, retries while nothing has
/// been yielded, and guarantees exactly one terminal item.
pub(crate) fn drive<P, F>(
    transport: Arc<HttpTransport>,
    endpoint: Endpoint,
    body: Value,
    new_parser: F,
) -> ModelStream
where
    P: WireParser,
    F: Fn() -> P + Send + 'static,
{
    let run = Run {
        parser: new_parser(),
        new_parser,
        transport,
        endpoint,
        body,
        sse: None,
        pending: VecDeque::new(),
        attempt: 1,
        yielded: false,
        done: false,
    };
    Box::pin(stream::unfold(run, |mut run| async move {
        let item = run.next().await?;
        Some((item, run))
    }))
}

struct Run<P, F> {
    transport: Arc<HttpTransport>,
    endpoint: Endpoint,
    body: Value,
    new_parser: F,
    parser: P,
    sse: Option<SseStream>,
    /// Events parsed but not yet handed downstream.
    pending: VecDeque<ModelEvent>,
    attempt: u32,
    /// Whether anything went downstream; after that, failures are final.
    yielded: bool,
    /// A terminal was produced; nothing is read any more.
    done: bool,
}

impl<P: WireParser, F: Fn() -> P> Run<P, F> {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            // A lone `Created` is held back: it carries no output, and
            // keeping it lets a failure right after it still be retried.
            let hold = !self.yielded
                && !self.done
                && self.pending.len() == 1
                && matches!(self.pending[0], ModelEvent::Created { .. });
            if !hold && let Some(event) = self.pending.pop_front() {
                self.yielded = true;
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let step = match self.sse.as_mut() {
                None => match self.transport.open(&self.endpoint, &self.body).await {
                    Ok(sse) => {
                        self.sse = Some(sse);
                        continue;
                    }
                    Err(e) => Err(e),
                },
                Some(sse) => {
                    let next = sse.next().await;
                    feed(&mut self.parser, next, &mut self.pending, &self.endpoint)
                }
            };
            match step {
                Ok(()) => {
                    if ends_with_terminal(&self.pending) {
                        // Stop reading: anything after the terminal event
                        // is not part of this response's contract.
                        self.done = true;
                        self.sse = None;
                    }
                }
                Err(error) => {
                    if let Some(delay) = self.retry_delay(&error) {
                        tracing::warn!(
                            provider = %self.endpoint.provider,
                            attempt = self.attempt,
                            ?delay,
                            %error,
                            "model request failed before any output; retrying"
                        );
                        tokio::time::sleep(delay).await;
                        self.attempt += 1;
                        self.parser = (self.new_parser)();
                        self.pending.clear();
                        self.sse = None;
                        continue;
                    }
                    self.done = true;
                    self.sse = None;
                    self.pending.clear();
                    let error = if self.attempt > 1 && error.is_retryable() {
                        ModelError::RetriesExhausted {
                            attempts: self.attempt,
                            last: Box::new(error),
                        }
                    } else {
                        error
                    };
                    return Some(Err(error));
                }
            }
        }
    }

    fn retry_delay(&self, error: &ModelError) -> Option<Duration> {
        let policy = &self.transport.config.retry;
        if self.yielded || !error.is_retryable() || self.attempt >= policy.max_attempts {
            return None;
        }
        let retry_after = match error {
            ModelError::Http { retry_after, .. } => *retry_after,
            _ => None,
        };
        Some(policy.delay(self.attempt, retry_after))
    }
}

/// Hands the parser the next item of the SSE stream (`None`: the body
/// ended), pushing what it produces onto `pending`. A clean end that
/// produced no terminal event is the dropped-connection error.
pub(crate) fn feed<P: WireParser>(
    parser: &mut P,
    next: Option<Result<SseEvent, ModelError>>,
    pending: &mut VecDeque<ModelEvent>,
    endpoint: &Endpoint,
) -> Result<(), ModelError> {
    match next {
        Some(Ok(event)) => parser.on_event(event, pending),
        Some(Err(e)) => Err(e),
        None => match parser.on_end(pending) {
            Ok(()) if !ends_with_terminal(pending) => {
                Err(endpoint.dropped("the body ended without a terminal event"))
            }
            other => other,
        },
    }
}

pub(crate) fn ends_with_terminal(pending: &VecDeque<ModelEvent>) -> bool {
    pending.back().is_some_and(ModelEvent::is_terminal)
}
