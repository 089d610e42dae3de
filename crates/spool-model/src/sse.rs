//! Server-Sent Events from a streaming HTTP body, with an idle timeout.
//!
//! The SSE framing itself is eventsource-stream's; this module adds the
//! timeout between body chunks (reqwest's own `timeout` covers the whole
//! body, which would cut long answers), decodes the body's UTF-8 itself
//! before handing it over (see [`text_chunks`]), and turns its errors into
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

/// Why the body stopped yielding bytes (or text).
#[derive(Debug)]
pub(crate) enum BodyError {
    Transport(String),
    Idle(Duration),
    /// The body is not UTF-8 (what is wrong, and where).
    Utf8(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Transport(m) | BodyError::Utf8(m) => f.write_str(m),
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
    let events = text_chunks(chunks)
        .eventsource()
        .map(move |item| match item {
            Ok(ev) => Ok(SseEvent {
                event: ev.event,
                data: ev.data,
            }),
            Err(err) => Err(convert(err, &endpoint)),
        });
    Box::pin(events)
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The body as UTF-8 text for eventsource-stream (0.2.3), whose own
/// decoding and BOM handling are wrong in two ways that fuzzing found
/// (`fuzz/`, target `sse`):
///
/// - a body starting with a UTF-8 byte order mark made it panic (it
///   slices the 3-byte U+FEFF at byte 1; upstream PR
///   jpopesculian/eventsource-stream#10, unmerged). Here one leading BOM
///   is dropped, as the SSE spec says, and the text handed over starts
///   with an empty line, which dispatches nothing but means the parser's
///   BOM check never sees a BOM (a second one is text of the first line,
///   as the spec has it);
/// - after a byte that is not UTF-8 it yielded nothing more, but kept
///   reading and holding the rest of the body (re-validating all of it on
///   every chunk) until the body ended, and only then failed. Here the
///   error comes as soon as the bad bytes arrive.
///
/// So eventsource-stream only ever sees whole, valid UTF-8. A character
/// split across chunks waits (at most 3 bytes) for the rest of it.
fn text_chunks<S, B>(body: S) -> impl Stream<Item = Result<String, BodyError>> + Send
where
    S: Stream<Item = Result<B, BodyError>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
{
    struct Decoding<S> {
        body: Pin<Box<S>>,
        /// Bytes read and not handed over yet: the start of a character
        /// (or of the BOM) that the next chunk completes.
        pending: Vec<u8>,
        /// Bytes of the body handed over or dropped (for error positions).
        offset: usize,
        /// Whether the leading BOM was looked for.
        bom_checked: bool,
        /// An error to yield after the valid text before it.
        failed: Option<BodyError>,
    }
    let state = Decoding {
        body: Box::pin(body),
        pending: Vec::new(),
        offset: 0,
        bom_checked: false,
        failed: None,
    };
    let text = stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        if let Some(error) = state.failed.take() {
            return Some((Err(error), None));
        }
        match state.body.next().await {
            Some(Ok(bytes)) => state.pending.extend_from_slice(bytes.as_ref()),
            Some(Err(error)) => return Some((Err(error), None)),
            None if state.pending.is_empty() => return None,
            None => {
                let error = BodyError::Utf8(format!(
                    "the body ends inside a character (byte {})",
                    state.offset
                ));
                return Some((Err(error), None));
            }
        }
        if !state.bom_checked {
            if state.pending.len() < BOM.len() && BOM.starts_with(&state.pending) {
                return Some((Ok(String::new()), Some(state)));
            }
            if state.pending.starts_with(BOM) {
                state.pending.drain(..BOM.len());
                state.offset += BOM.len();
            }
            state.bom_checked = true;
        }
        let (valid, bad) = match std::str::from_utf8(&state.pending) {
            Ok(text) => (text.len(), None),
            Err(e) => (e.valid_up_to(), e.error_len()),
        };
        let rest = state.pending.split_off(valid);
        let text = String::from_utf8_lossy(&state.pending).into_owned();
        state.pending = rest;
        state.offset += valid;
        if let Some(len) = bad {
            state.failed = Some(BodyError::Utf8(format!(
                "invalid UTF-8 sequence of {len} bytes at byte {}",
                state.offset
            )));
        }
        Some((Ok(text), Some(state)))
    });
    stream::iter([Ok(String::from("\n"))]).chain(text)
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
        EventStreamError::Transport(BodyError::Utf8(message)) => {
            endpoint.malformed(format!("invalid UTF-8 in the stream: {message}"))
        }
        // Not reached: `text_chunks` hands over valid UTF-8 only.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            provider: "p".into(),
            url: "http://x.invalid".into(),
        }
    }

    /// The events of a body arriving as `chunks`, then as much as
    /// `after` yields; `(event, data)`, or the error's text.
    async fn events<S>(chunks: &[&[u8]], after: S) -> Vec<Result<(String, String), String>>
    where
        S: Stream<Item = Result<Vec<u8>, BodyError>> + Send + 'static,
    {
        let chunks: Vec<Result<Vec<u8>, BodyError>> =
            chunks.iter().map(|c| Ok(c.to_vec())).collect();
        let body = stream::iter(chunks).chain(after);
        let mut sse = events_of_chunks(body, endpoint());
        let mut out = Vec::new();
        while let Some(item) = sse.next().await {
            let failed = item.is_err();
            out.push(item.map(|e| (e.event, e.data)).map_err(|e| e.to_string()));
            if failed {
                break;
            }
        }
        out
    }

    fn message(data: &str) -> Result<(String, String), String> {
        Ok(("message".into(), data.into()))
    }

    /// Regression (found by the `sse` fuzz target): eventsource-stream
    /// panicked on a body that starts with a UTF-8 byte order mark.
    #[tokio::test]
    async fn a_body_starting_with_a_bom_is_read_without_it() {
        // The fuzzer's input (the spec's example framings, after a BOM).
        let body =
            b"\xef\xbb\xbf: comment\r\nid: 7\r\nretry: 100\r\nevent: add\r\ndata: 73857293\r\n\
            data\r\n\r\ndata:second\rdata:  third\r\rfield without colon\nevent\ndata: x\n\n\n";
        let expected = vec![
            Ok(("add".into(), "73857293\n".into())),
            message("second\n third"),
            message("x"),
        ];
        assert_eq!(events(&[body], stream::empty()).await, expected);
        // In chunks of 3 bytes (the BOM whole in the first), and split.
        let threes: Vec<&[u8]> = body.chunks(3).collect();
        assert_eq!(events(&threes, stream::empty()).await, expected);
        let ones: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(events(&ones, stream::empty()).await, expected);
        // Only one BOM is dropped: a second one is text of the first line
        // (a field nobody knows), as the SSE spec has it.
        let twice = "\u{feff}\u{feff}data: a\n\ndata: b\n\n".as_bytes();
        assert_eq!(events(&[twice], stream::empty()).await, [message("b")]);
    }

    /// Regression (found by the `sse` fuzz target's check that nothing is
    /// held back): after a byte that is not UTF-8, eventsource-stream kept
    /// reading (and holding) the body until it ended, and only then
    /// failed. The error now comes at once, after the events before it.
    #[tokio::test]
    async fn invalid_utf8_fails_at_once() {
        // The fuzzer's input, then a body that never ends.
        let chunks: [&[u8]; 3] = [b"data: ok\n\nda", b"ta: \xe2\x82", b"\n\ndata: after\n\n"];
        let read =
            tokio::time::timeout(Duration::from_secs(10), events(&chunks, stream::pending()))
                .await
                .expect("the error came without waiting for the end of the body");
        assert_eq!(read.len(), 2, "{read:?}");
        assert_eq!(read[0], message("ok"));
        let error = read[1].as_ref().unwrap_err();
        assert!(
            error.contains("malformed stream") && error.contains("invalid UTF-8"),
            "{error}"
        );
        // A character split across chunks is fine; one cut by the end of
        // the body is not.
        let split: [&[u8]; 2] = [b"data: \xe2\x82", b"\xac\n\n"];
        assert_eq!(events(&split, stream::empty()).await, [message("€")]);
        let cut: [&[u8]; 2] = [b"data: x\n\n", b"data: \xe2\x82"];
        let read = events(&cut, stream::empty()).await;
        assert_eq!(read[0], message("x"));
        assert!(
            read[1]
                .as_ref()
                .is_err_and(|e| e.contains("inside a character"))
        );
    }
}
