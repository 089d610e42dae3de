//! Server-Sent Events from a streaming HTTP body, with an idle timeout.
//!
//! The framing is spool's own ([`Framing`]): the WHATWG event-stream
//! interpretation, incremental, so each byte is scanned once and the text
//! not yet framed is moved once per body chunk, not once per line (the
//! eventsource-stream crate used before copied the rest of its buffer for
//! every line it took, quadratic in a chunk's size). The module also adds
//! the timeout between body chunks (reqwest's own `timeout` covers the
//! whole body, which would cut long answers), decodes the body's UTF-8
//! itself (see [`text_chunks`]), caps what one event may hold
//! ([`MAX_EVENT_BYTES`]), and turns errors into [`ModelError`]s that name
//! the provider and URL.

use std::pin::Pin;
use std::time::Duration;

use std::collections::VecDeque;

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
    /// The text is not SSE spool will take (an event past the size cap).
    Framing(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Transport(m) | BodyError::Utf8(m) | BodyError::Framing(m) => f.write_str(m),
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
    struct Reading<T> {
        text: Pin<Box<T>>,
        framing: Framing,
        /// Events framed and not yet yielded.
        ready: VecDeque<SseEvent>,
        endpoint: Endpoint,
    }
    let state = Reading {
        text: Box::pin(text_chunks(chunks)),
        framing: Framing::default(),
        ready: VecDeque::new(),
        endpoint,
    };
    let events = stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), Some(state)));
            }
            let failed = match state.text.next().await {
                Some(Ok(text)) => match state.framing.feed(&text, &mut state.ready) {
                    Ok(()) => continue,
                    Err(error) => error,
                },
                Some(Err(error)) => error,
                None => return None, // an event not ended by an empty line is dropped
            };
            return Some((Err(convert(failed, &state.endpoint)), None));
        }
    });
    Box::pin(events)
}

/// The most text one event may gather (its lines, framed or not yet): a
/// stream that sends more without ending an event is malformed, not a
/// reason to hold ever more of it.
pub(crate) const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// SSE framing over valid UTF-8 text arriving in pieces: lines end at
/// `\n`, `\r\n` or `\r`; an empty line dispatches the event gathered so
/// far (if it has data); `event:` names it, `data:` adds a line to it,
/// comments (`:`) and other fields (`id`, `retry`, unknown ones) are
/// skipped; one space after the colon is dropped.
#[derive(Debug, Default)]
struct Framing {
    /// Text not framed into lines yet: the start of a line.
    pending: String,
    /// How far into `pending` no line end was found (resume the search
    /// there).
    scanned: usize,
    event: String,
    data: String,
}

impl Framing {
    /// Frames `text`, appending the events it completes to `out`.
    fn feed(&mut self, text: &str, out: &mut VecDeque<SseEvent>) -> Result<(), BodyError> {
        self.pending.push_str(text);
        let pending = std::mem::take(&mut self.pending);
        let bytes = pending.as_bytes();
        let mut start = 0;
        // Where the search for the next line end resumes: past what an
        // earlier feed searched, so a long line arriving in many pieces is
        // scanned once.
        let mut from = self.scanned;
        loop {
            let Some(found) = memchr::memchr2(b'\n', b'\r', &bytes[from..]) else {
                from = bytes.len();
                break;
            };
            let end = from + found;
            let next = match bytes.get(end + 1) {
                // `\r` or `\r\n`: known with the next character, so this
                // `\r` is found again then.
                None if bytes[end] == b'\r' => {
                    from = end;
                    break;
                }
                Some(b'\n') if bytes[end] == b'\r' => end + 2,
                _ => end + 1,
            };
            self.line(&pending[start..end], out);
            start = next;
            from = next;
        }
        self.scanned = from - start;
        self.pending = pending;
        self.pending.drain(..start);
        if self.pending.len() + self.data.len() > MAX_EVENT_BYTES {
            return Err(BodyError::Framing(format!(
                "an event longer than {MAX_EVENT_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// One line, without its end.
    fn line(&mut self, line: &str, out: &mut VecDeque<SseEvent>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                let event = match self.event.is_empty() {
                    true => "message".to_owned(),
                    false => std::mem::take(&mut self.event),
                };
                out.push_back(SseEvent {
                    event,
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            return;
        }
        if line.starts_with(':') {
            return; // a comment
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            _ => {} // `id`, `retry`: unused; unknown fields are ignored
        }
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The body as UTF-8 text for the framing: one leading byte order mark is
/// dropped, as the SSE spec says (a second one is text of the first line),
/// and a byte that is not UTF-8 is an error as soon as it arrives, after
/// the valid text before it (not when the body ends: a stream that keeps
/// sending would never fail). A character split across chunks waits (at
/// most 3 bytes) for the rest of it. Both rules came from fuzzing (`fuzz/`,
/// target `sse`), where the crate used before got them wrong.
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
    stream::unfold(Some(state), |state| async move {
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
    })
}

fn convert(err: BodyError, endpoint: &Endpoint) -> ModelError {
    match err {
        BodyError::Idle(after) => ModelError::Timeout {
            provider: endpoint.provider.clone(),
            url: endpoint.url.clone(),
            phase: TimeoutPhase::Idle,
            after,
        },
        BodyError::Transport(message) => ModelError::StreamDropped {
            provider: endpoint.provider.clone(),
            url: endpoint.url.clone(),
            message,
        },
        BodyError::Utf8(message) => {
            endpoint.malformed(format!("invalid UTF-8 in the stream: {message}"))
        }
        BodyError::Framing(message) => endpoint.malformed(format!("invalid SSE: {message}")),
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

    /// Regression (found by the `sse` fuzz target): the SSE crate used
    /// before panicked on a body that starts with a UTF-8 byte order mark.
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

    /// Line ends split across chunks: a `\r` at the end of a chunk ends
    /// its line whatever comes next, and a `\n` after it is part of the
    /// same line end, not an empty line.
    #[tokio::test]
    async fn a_line_end_split_across_chunks_is_one_line_end() {
        let crlf: [&[u8]; 3] = [b"data: a\r", b"\ndata: b\r", b"\n\r\n"];
        assert_eq!(events(&crlf, stream::empty()).await, [message("a\nb")]);
        let cr: [&[u8]; 2] = [b"data: a\r", b"\rdata: b\n\n"];
        assert_eq!(
            events(&cr, stream::empty()).await,
            [message("a"), message("b")]
        );
        // A long line in many small pieces, then its end.
        let long = "x".repeat(100_000);
        let body = format!("event: big\ndata: {long}\n\n");
        let pieces: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
        assert_eq!(
            events(&pieces, stream::empty()).await,
            [Ok(("big".to_owned(), long))]
        );
    }

    /// What an earlier piece searched is not searched again: after each
    /// piece of an unfinished line the search resumes at its end (or at a
    /// trailing `\r`, whose meaning waits for the next character).
    #[test]
    fn an_unfinished_line_is_not_searched_again() {
        let mut framing = Framing::default();
        let mut out = VecDeque::new();
        framing.feed("data: a\n", &mut out).unwrap();
        for piece in ["data: ", "x".repeat(1_000).as_str(), "yz"] {
            framing.feed(piece, &mut out).unwrap();
            assert_eq!(framing.scanned, framing.pending.len(), "after {piece:?}");
        }
        framing.feed("\r", &mut out).unwrap();
        assert_eq!(framing.scanned, framing.pending.len() - 1);
        framing.feed("\n\n", &mut out).unwrap();
        assert_eq!((framing.scanned, framing.pending.as_str()), (0, ""));
        let data: Vec<&str> = out.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, [format!("a\n{}yz", "x".repeat(1_000))]);
    }

    /// An event that never ends must not be held without bound.
    #[tokio::test]
    async fn an_event_past_the_cap_is_an_error() {
        let line = vec![b'x'; 1024 * 1024];
        let mut chunks: Vec<Vec<u8>> = vec![b"data: ok\n\ndata: ".to_vec()];
        chunks.extend(std::iter::repeat_n(
            line,
            MAX_EVENT_BYTES / (1024 * 1024) + 1,
        ));
        let chunks: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let read = events(&chunks, stream::pending()).await;
        assert_eq!(
            read.len(),
            2,
            "{:?}",
            read.iter().map(|r| r.is_ok()).collect::<Vec<_>>()
        );
        assert_eq!(read[0], message("ok"));
        let error = read[1].as_ref().unwrap_err();
        assert!(
            error.contains("malformed stream") && error.contains("longer than"),
            "{error}"
        );
    }

    /// Regression (found by the `sse` fuzz target's check that nothing is
    /// held back): after a byte that is not UTF-8, the SSE crate used before kept
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
