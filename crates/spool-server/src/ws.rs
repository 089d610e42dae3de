//! WebSocket connections: one JSON-RPC message per text frame, served by
//! the same connection loop as stdio. The upgrade happens only after the
//! auth middleware let the request through.

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt, future};

use crate::connection::{MAX_MESSAGE_BYTES, Outgoing, serve_messages};
use crate::http::App;

pub(crate) async fn upgrade(State(app): State<App>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| serve_socket(app, socket))
}

async fn serve_socket(app: App, socket: WebSocket) {
    let (sink, stream) = socket.split();
    let closing = app.shutdown.clone();
    let incoming = stream
        .take_until(Box::pin(async move { closing.closing().await }))
        .take_while(|message| {
            future::ready(matches!(message, Ok(m) if !matches!(m, Message::Close(_))))
        })
        .filter_map(|message| {
            future::ready(match message {
                Ok(Message::Text(text)) => Some(text.as_str().to_owned()),
                // Read as text, lossily: a frame that is not JSON-RPC gets
                // its error reply like any other bad message.
                Ok(Message::Binary(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                _ => None,
            })
        });
    let outgoing = sink.with(|outgoing: Outgoing| {
        future::ready(Ok::<_, axum::Error>(match outgoing {
            Outgoing::Message(line) => Message::Text(line.into()),
            // The client fell behind: it resumes by cursor (see `outbox.rs`).
            Outgoing::Close(reason) => Message::Close(Some(CloseFrame {
                code: close_code::POLICY,
                reason: reason.into(),
            })),
        }))
    });
    serve_messages(app.hub, incoming, outgoing).await;
}
