//! The app server: Codex app-server v2 JSON-RPC over stdio (one message
//! per line), with spool's additions opt-in (`initialize` capabilities).
//!
//! - [`hub`]: threads, their watchers, the turn each runs, and the server
//!   → client requests runs wait on.
//! - [`connection`]: one client: framing, replies, delivery.
//! - `methods`: the JSON-RPC methods.
//! - `filter`: what a client that did not opt in must not see.

pub mod connection;
mod filter;
pub mod hub;
mod methods;

pub use connection::serve_lines;
pub use filter::Capabilities;
pub use hub::{AgentFactory, Hub, HubOptions, ThreadSettings};

/// Serves one client on standard input and output until input ends.
pub async fn serve_stdio(hub: std::sync::Arc<Hub>) {
    let reader = tokio::io::BufReader::new(tokio::io::stdin());
    serve_lines(hub, reader, tokio::io::stdout()).await;
}
