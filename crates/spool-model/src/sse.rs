//! Server-Sent Events from a streaming HTTP body, with an idle timeout.
//!
//! The SSE framing itself is eventsource-stream's; this module adds the
//! timeout between body chunks (reqwest's own `timeout` covers the whole
//! body, which would cut long answers) and turns its errors into
//! [`ModelError`]s that name the provider and URL.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt, stream};

use crate::error::{ModelError, TimeoutPhase};
use crate::transport::Endpoint;

/// One SSE event: its `event:` name (`message` when absent) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Why the body stopped yielding bytes.
#[derive(Debug)]
pub(crate) enum BodyError {
    Transport(String),
    Idle(Duration),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Transport(m) => f.write_str(m),
            BodyError::Idle(d) => write!(f, "idle for {d:?}"),
        }
    }
}

pub(crate) type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ModelError>> + Send>>;

/// The SSE events of `response`'s body. Ends (`None`) at the end of the
/// body; an error is the last item.
pub(crate) fn sse_events(
    response: reqwest::Response,
    idle_timeout: Duration,
    endpoint: Endpoint,
) -> SseStream {
    let body = response.bytes_stream();
    // One item per body chunk, each awaited with the idle timeout. After an
    // error nothing more is read: the connection is unusable.
    let chunks = stream::unfold(Some(body), move |state| async move {
        let mut body = state?;
        match tokio::time::timeout(idle_timeout, body.next()).await {
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(body))),
            Ok(Some(Err(e))) => Some((Err(BodyError::Transport(error_chain(&e))), None)),
            Ok(None) => None,
            Err(_) => Some((Err(BodyError::Idle(idle_timeout)), None)),
        }
    });
    events_of_chunks(chunks, endpoint)
}

/// The SSE events of a body given as chunks (the part of [`sse_events`]
/// that needs no connection; the fuzz target feeds it directly).
pub(crate) fn events_of_chunks<S, B>(chunks: S, endpoint: Endpoint) -> SseStream
where
    S: Stream<Item = Result<B, BodyError>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    let events = chunks.eventsource().map(move |item| match item {
        Ok(ev) => Ok(SseEvent {
            event: ev.event,
            data: ev.data,
        }),
        Err(err) => Err(convert(err, &endpoint)),
    });
    Box::pin(events)
}

fn convert(err: EventStreamError<BodyError>, endpoint: &Endpoint) -> ModelError {
    match err {
        EventStreamError::Transport(BodyError::Idle(after)) => ModelError::Timeout {
            provider: endpoint.provider.clone(),
            url: endpoint.url.clone(),
            phase: TimeoutPhase::Idle,
            after,
        },
        EventStreamError::Transport(BodyError::Transport(message)) => ModelError::StreamDropped {
            provider: endpoint.provider.clone(),
            url: endpoint.url.clone(),
            message,
        },
        EventStreamError::Utf8(e) => {
            endpoint.malformed(format!("invalid UTF-8 in the stream: {e}"))
        }
        EventStreamError::Parser(e) => endpoint.malformed(format!("invalid SSE line: {e}")),
    }
}

/// An error and its sources on one line: reqwest's top-level message alone
/// ("error decoding response body") hides the actual cause.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
