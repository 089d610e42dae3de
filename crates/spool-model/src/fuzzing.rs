//! Internals exposed for the fuzz targets in `fuzz/` (not a stable API):
//! the SSE framing and the two wire parsers, fed from bytes in memory
//! instead of a connection.

use std::collections::VecDeque;

use futures_util::{Stream, StreamExt, stream};

use crate::chat::ChatParser;
use crate::responses::ResponsesParser;
use crate::sse::{BodyError, events_of_chunks};
use crate::transport::{Endpoint, WireParser, ends_with_terminal, feed};
use crate::{ModelError, ModelEvent};

/// Which provider's stream the bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// The OpenAI Responses API ([`ResponsesProvider`](crate::ResponsesProvider)).
    Responses,
    /// Chat Completions ([`ChatProvider`](crate::ChatProvider)).
    Chat,
}

fn endpoint() -> Endpoint {
    Endpoint {
        provider: "fuzz".into(),
        url: "http://fuzz.invalid/v1".into(),
    }
}

/// The SSE events (event name, data) of a body arriving as `chunks`, as
/// the providers read them; an error is the last item.
pub fn sse_events<S>(chunks: S) -> impl Stream<Item = Result<(String, String), ModelError>> + Send
where
    S: Stream<Item = Vec<u8>> + Send + 'static,
{
    let body = chunks.map(Ok::<_, BodyError>);
    events_of_chunks(body, endpoint()).map(|item| item.map(|event| (event.event, event.data)))
}

/// The model events `wire`'s parser makes of a body arriving in `chunks`,
/// under the contract the provider's driver enforces (see the crate docs):
/// reading stops at the first terminal event or error, and an error drops
/// what its step produced. Retries (which need a connection) are left out.
pub async fn model_events(wire: Wire, chunks: Vec<Vec<u8>>) -> Vec<Result<ModelEvent, ModelError>> {
    match wire {
        Wire::Responses => drive(ResponsesParser::new(endpoint()), chunks).await,
        Wire::Chat => drive(ChatParser::new(endpoint()), chunks).await,
    }
}

async fn drive<P: WireParser>(
    mut parser: P,
    chunks: Vec<Vec<u8>>,
) -> Vec<Result<ModelEvent, ModelError>> {
    let endpoint = endpoint();
    let body = stream::iter(chunks.into_iter().map(Ok::<_, BodyError>));
    let mut sse = events_of_chunks(body, endpoint.clone());
    let mut pending = VecDeque::new();
    let mut out = Vec::new();
    loop {
        let next = sse.next().await;
        let ended = next.is_none();
        match feed(&mut parser, next, &mut pending, &endpoint) {
            Ok(()) => {
                let done = ends_with_terminal(&pending);
                out.extend(pending.drain(..).map(Ok));
                if done || ended {
                    return out;
                }
            }
            Err(error) => {
                pending.clear();
                out.push(Err(error));
                return out;
            }
        }
    }
}
