//! The app server: Codex app-server v2 JSON-RPC over stdio (one message
//! per line) and WebSocket (one message per text frame), an HTTP API with
//! Server-Sent Events, with spool's additions opt-in (`initialize`
//! capabilities; implied for HTTP).
//!
//! - [`hub`]: threads, their watchers, the turn each runs, and the server
//!   → client requests runs wait on.
//! - [`connection`]: one JSON-RPC client over any stream and sink of text
//!   messages: framing, replies, delivery.
//! - `methods`: the JSON-RPC methods.
//! - `filter`: what a client that did not opt in must not see.
//! - [`listen`]: `--listen` URLs, binding, serving every listener at once.
//! - `ws`: WebSocket connections; `http`: the HTTP API, SSE, OpenAPI.
//! - [`guard`]: who may connect — the `Host`, `Origin` and media-type
//!   checks every network request passes before anything else.
//! - [`auth`]: bearer tokens for network listeners.
//! - [`ceilings`]: the most a client may ask for (approval policy,
//!   sandbox, working directories), checked before anything starts.
//! - [`shutdown`]: stop accepting, interrupt turns, close connections.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod accept;
mod answers;
pub mod auth;
pub mod ceilings;
pub mod connection;
mod filter;
pub mod forward;
pub mod guard;
mod http;
pub mod hub;
pub mod listen;
mod methods;
mod ordering;
pub mod outbox;
pub mod shutdown;
mod stdout;
pub mod tail;
mod ws;

pub use accept::Limits;

/// Internals exposed for the fuzz targets in `fuzz/` (not a stable API).
#[doc(hidden)]
pub mod fuzzing {
    /// The stdio line reader ([`serve_stdio`](crate::serve_stdio)'s),
    /// capped at `cap` bytes instead of the 16 MiB message limit: a line
    /// longer than `cap` comes back as its first `cap + 1` bytes.
    pub fn read_line_blocking_capped<R: std::io::BufRead>(
        reader: &mut R,
        cap: usize,
    ) -> std::io::Result<Option<String>> {
        crate::connection::read_line_blocking_capped(reader, cap)
    }
}

pub use auth::AuthToken;
pub use ceilings::{CeilingError, Ceilings};
pub use connection::{Outgoing, serve_lines, serve_messages};
pub use filter::Capabilities;
pub use guard::{AccessRuleError, AccessRules, AllowedHost, Origin};
pub use http::openapi;
pub use hub::{
    AgentFactory, DEFAULT_MAX_INPUT_CHARS, Hub, HubOptions, ServerFacts, ThreadSettings,
};
pub use listen::{ListenError, ListenUrl, Listeners, Running};
pub use methods::mcp::McpAdmin;
pub use shutdown::Shutdown;

/// Serves one client on standard input and output until input ends.
///
/// Standard input is read on a thread of its own (not tokio's blocking
/// pool), so a server stopped by a signal does not wait for a read that
/// never returns; standard output is written by another (`stdout.rs`),
/// a batch of messages per write.
pub async fn serve_stdio(hub: std::sync::Arc<Hub>) {
    let (lines_tx, lines_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let spawned = std::thread::Builder::new()
        .name("spool-stdin".to_owned())
        .spawn(move || {
            // Capped and lossy: an over-long line is refused without being
            // held whole, and a byte that is not UTF-8 spoils only its line.
            let mut stdin = std::io::stdin().lock();
            loop {
                match connection::read_line_blocking(&mut stdin) {
                    Ok(Some(line)) => {
                        if lines_tx.send(line).is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(%error, "reading standard input failed");
                        break;
                    }
                }
            }
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the thread reading standard input");
        return;
    }
    let incoming = futures_util::stream::unfold(lines_rx, |mut rx| async move {
        let line = rx.recv().await?;
        Some((line, rx))
    });
    let (outgoing, writer) = match stdout::StdoutSink::start() {
        Ok(started) => started,
        Err(error) => {
            tracing::error!(%error, "cannot start the thread writing standard output");
            return;
        }
    };
    serve_messages(hub, incoming, outgoing).await;
    // The sink is gone: the thread writes what it still holds, then ends.
    // A client that stopped reading could hold it forever; give up waiting
    // after a while.
    let joined = tokio::task::spawn_blocking(move || writer.join());
    if tokio::time::timeout(std::time::Duration::from_secs(10), joined)
        .await
        .is_err()
    {
        tracing::warn!("standard output did not drain in 10 s; exiting without it");
    }
}
