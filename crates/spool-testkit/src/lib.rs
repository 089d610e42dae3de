//! Test support for any spool crate: real sockets, no mocks of the client.
//!
//! - [`ScriptedServer`]: an HTTP/1.1 server on `127.0.0.1:0` that answers
//!   each request with the next [`ScriptedResponse`] (status, headers, body
//!   chunks with optional delays, SSE helpers, an abrupt close mid-body) and
//!   records every request; [`ScriptedServer::answer_matching`] adds a
//!   standing answer for requests a client makes on its own schedule.
//! - [`RecordingProxy`]: forwards requests to an upstream server (e.g. the
//!   local llama-server), streams the answers back chunk by chunk, and
//!   records every request, so end-to-end tests can assert what the model
//!   server received.
//! - [`StatefulResponses`]: a Responses API server that keeps what it is
//!   sent (stored responses, conversations), refuses what the real API
//!   refuses (an item id twice, an output without its call), and records
//!   every request with the whole history it added up to.
//! - [`postgres::TestDatabase`]: a fresh database of its own on the real
//!   PostgreSQL server `scripts/postgres.sh` runs.
//! - [`memory::heap_mib`]: a process's heap, from its `smaps_rollup`.
//!
//! The HTTP handling is deliberately minimal and hand-written: one request
//! per connection (`Connection: close`), bodies by `Content-Length` or
//! chunked, responses always chunked unless a test sets `Content-Length`.

mod http;
pub mod memory;
pub mod postgres;
mod proxy;
pub mod responses_api;
mod server;
mod stateful;

pub use http::RecordedRequest;
pub use proxy::RecordingProxy;
pub use server::{Gate, ScriptedResponse, ScriptedServer};
pub use stateful::{Exchange, Reply, StatefulResponses};
