//! Graceful shutdown: stop accepting connections, interrupt the running
//! turns (each ends `interrupted` with its one `turn/completed`, which the
//! connections still get), then close the connections. The caller flushes
//! the store afterwards.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::hub::Hub;

/// How far a shutdown has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Serving,
    /// No new connections; `/readyz` says 503; turns are being interrupted.
    Draining,
    /// Connections (WebSocket, SSE streams) end.
    Closing,
}

/// Shared by every listener and connection of a server.
#[derive(Clone)]
pub struct Shutdown(Arc<watch::Sender<Phase>>);

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown(Arc::new(watch::Sender::new(Phase::Serving)))
    }
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Whether the server still takes new work.
    pub fn is_serving(&self) -> bool {
        *self.0.borrow() == Phase::Serving
    }

    async fn reached(&self, phase: Phase) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|now| *now >= phase).await;
    }

    /// Resolves once listeners must stop accepting.
    pub async fn draining(&self) {
        self.reached(Phase::Draining).await
    }

    /// Resolves once connections must end.
    pub async fn closing(&self) {
        self.reached(Phase::Closing).await
    }

    fn advance(&self, phase: Phase) {
        self.0.send_if_modified(|now| {
            let later = *now < phase;
            if later {
                *now = phase;
            }
            later
        });
    }

    /// Stops accepting, interrupts every running turn and waits (at most
    /// `patience`) until none runs, then lets the connections deliver what
    /// they hold and closes them.
    pub async fn run(&self, hub: &Hub, patience: Duration) {
        self.advance(Phase::Draining);
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let running = hub.running_turns();
            if running.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(turns = running.len(), "turns still running at shutdown");
                break;
            }
            for (thread_id, turn_id) in &running {
                // A turn still starting has no id yet: the next round.
                if !turn_id.is_empty() {
                    let _ = hub.interrupt(thread_id, turn_id);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The last events pass through the watchers' queues to the sockets.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.advance(Phase::Closing);
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C). The handlers are installed by
/// the call, not when the future is first polled: a server calls this
/// before it says it listens, so a signal sent as soon as a client read
/// the address ends it gracefully instead of killing it.
pub fn signalled() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let interrupt = signal(SignalKind::interrupt());
        async move {
            match (term, interrupt) {
                (Ok(mut term), Ok(mut interrupt)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = interrupt.recv() => {}
                    }
                }
                (term, interrupt) => {
                    let error = term.err().or(interrupt.err());
                    tracing::warn!(?error, "cannot listen for SIGTERM and SIGINT");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
