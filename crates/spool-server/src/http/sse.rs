//! Server-Sent Events: a thread's notifications as the JSON-RPC clients get
//! them, `id:` = seq (for `Last-Event-ID`), `event:` = the method, `data:` =
//! the notification JSON. Server → client requests (approvals) come as
//! events too, without an id (they are not in the log under a seq); they
//! are answered with `POST /v1/threads/{id}/requests/{requestId}`.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use spool_protocol::ServerNotification;
use tokio::sync::mpsc;

use crate::connection::{next_connection_id, request_message};
use crate::filter::{Capabilities, for_client};
use crate::hub::{ConnectionId, Delivery, Hub, HubError};
use crate::outbox::Room;
use crate::shutdown::Shutdown;

/// What an HTTP client sees: everything, with cursors.
pub(super) const HTTP_CAPABILITIES: Capabilities = Capabilities {
    seq: true,
    spool_items: true,
    opted_out: 0,
};

/// One HTTP client watching a thread; it stops watching when dropped (the
/// client went away, or the stream ended).
/// Events an SSE stream may have waiting for its client.
const SSE_UNSENT_EVENTS: usize = 4_096;

pub(crate) struct Watch {
    hub: Arc<Hub>,
    id: ConnectionId,
    deliveries: mpsc::UnboundedReceiver<Delivery>,
    /// Paces what is sent to this stream (see `outbox.rs`).
    room: Room,
}

impl Watch {
    /// Watches the thread: every logged event after `after_seq` (none: only
    /// live events from now on), then live ones, once each, in seq order.
    pub async fn start(
        hub: &Arc<Hub>,
        thread_id: &str,
        after_seq: Option<u64>,
    ) -> Result<Watch, HubError> {
        let (tx, deliveries) = mpsc::unbounded_channel();
        let watch = Watch {
            hub: hub.clone(),
            id: next_connection_id(),
            deliveries,
            room: Room::counting(SSE_UNSENT_EVENTS),
        };
        hub.subscribe(thread_id, watch.id, after_seq, &tx, &watch.room)
            .await?;
        Ok(watch)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.hub.unsubscribe_all(self.id);
    }
}

struct Streaming {
    watch: Watch,
    /// Ends the stream after this turn's `turn/completed`.
    until_turn: Option<String>,
    requests_sent: HashSet<String>,
    shutdown: Shutdown,
    done: bool,
}

/// The watch as an SSE response; it ends after `until_turn` completes
/// (when given), when the client goes away, or when the server closes.
pub(crate) fn respond(
    watch: Watch,
    until_turn: Option<String>,
    shutdown: Shutdown,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let state = Streaming {
        watch,
        until_turn,
        requests_sent: HashSet::new(),
        shutdown,
        done: false,
    };
    let events = futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if state.done {
                return None;
            }
            if state.watch.room.overflowed() {
                // The client fell behind: it reconnects with Last-Event-ID.
                tracing::info!("closing an SSE stream whose client fell behind");
                return None;
            }
            let delivery = tokio::select! {
                biased;
                delivery = state.watch.deliveries.recv() => delivery?,
                () = state.shutdown.closing() => return None,
            };
            state.watch.room.taken();
            if let Some(event) = state.event_of(delivery) {
                return Some((Ok(event), state));
            }
        }
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

impl Streaming {
    fn event_of(&mut self, delivery: Delivery) -> Option<Event> {
        match delivery {
            Delivery::Event(appended) => {
                if let (Some(turn), ServerNotification::TurnCompleted(completed)) =
                    (&self.until_turn, appended.notification())
                    && completed.turn.id == *turn
                {
                    self.done = true;
                }
                let value = for_client(&appended, &HTTP_CAPABILITIES)?;
                let mut event = Event::default()
                    .event(value["method"].as_str().unwrap_or("message"))
                    .data(value.to_string());
                if let Some(seq) = appended.seq() {
                    event = event.id(seq.to_string());
                }
                Some(event)
            }
            Delivery::Request(request) => {
                if !self.requests_sent.insert(request.request_id.clone()) {
                    return None;
                }
                let value = request_message(&request)?;
                Some(
                    Event::default()
                        .event(value["method"].as_str().unwrap_or("request"))
                        .data(value.to_string()),
                )
            }
        }
    }
}
