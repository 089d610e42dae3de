//! Wire types of spool: items, threads, turns, notifications, the JSON-RPC
//! envelope and the OpenAI Responses API items that providers speak.
//!
//! This crate does no I/O. Every type here that crosses a wire derives
//! `JsonSchema`; `schema::all_schemas` is what `schema/` is generated from.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod approvals;
pub mod client_requests;
pub mod elicitation;
pub mod envelope;
pub mod event;
pub mod items;
pub mod jsonrpc;
pub mod notifications;
pub mod responses;
pub mod schema;
pub mod thread;
pub mod user_input;

pub use approvals::*;
pub use client_requests::*;
pub use elicitation::*;
pub use envelope::{Audience, ItemEnvelope, ItemStatus, Provenance, WorkPhase};
pub use event::{EventPayload, ThreadEvent};
pub use items::*;
pub use notifications::*;
pub use thread::*;
pub use user_input::{ByteRange, ImageDetail, TextElement, UserInput};
