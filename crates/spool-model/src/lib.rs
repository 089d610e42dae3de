//! The provider boundary: a [`ModelRequest`] goes in, a stream of normalized
//! [`ModelEvent`]s comes out.
//!
//! Three providers implement [`ModelProvider`]:
//!
//! - [`ResponsesProvider`]: the OpenAI Responses API over SSE
//!   (`POST {base_url}/responses`).
//! - [`ChatProvider`]: OpenAI Chat Completions over SSE
//!   (`POST {base_url}/chat/completions`), which also serves llama.cpp, vLLM,
//!   Ollama and others. Chat chunks are turned into Responses-shaped events,
//!   so the runtime sees one vocabulary.
//! - [`ScriptedProvider`]: replays scripted event lists, for tests.
//!
//! # The event contract
//!
//! Every stream yields, in order:
//!
//! 1. `Created` (at most once, first; carries the provider's response id).
//! 2. For each output item, `OutputItemAdded` (a partial item whose ids are
//!    known), then its deltas, then `OutputItemDone` (the final item, which is
//!    **authoritative** over the concatenated deltas, plus the provider's raw
//!    JSON of it for the item's `providerData`). Deltas name their item by
//!    `item_id`, which is the `id` of the item in `OutputItemAdded`.
//! 3. Exactly one terminal: `Ok(Completed { .. })` or `Err(ModelError)`, and
//!    nothing after it.
//!
//! `Completed::incomplete_reason` is `Some` when the provider stopped early
//! (`response.incomplete`, or a Chat `finish_reason` of `length` /
//! `content_filter`): the items are whole but the answer was cut. It is not an
//! error, because the output and usage are real; the runtime decides what a
//! cut answer means for the turn.
//!
//! # Retries
//!
//! HTTP 429/5xx, connect errors, timeouts and dropped connections are retried
//! with exponential backoff ([`RetryPolicy`]) **only while nothing has been
//! yielded downstream**. `Created` is held back until the first real event for
//! that reason, so a connection that drops right after `response.created` is
//! still retried. Once an event went out, a failure is final: the runtime has
//! shown it, and replaying the request would duplicate output.
//!
//! # Leniency
//!
//! Unknown SSE events are skipped; unknown fields are ignored by the typed
//! view and kept in the raw JSON of `OutputItemDone`; item types spool does
//! not model arrive as `ResponseItem::Other`. Only a known event whose data
//! cannot be decoded is an error (`ModelError::MalformedStream`).

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod chat;
mod chat_convert;
mod config;
mod error;
mod fields;
#[doc(hidden)]
pub mod fuzzing;
mod responses;
mod scripted;
mod sse;
mod transport;

use std::pin::Pin;

use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spool_protocol::TokenUsageBreakdown;
use spool_protocol::responses::ResponseItem;

pub use chat::ChatProvider;
pub use config::{ProviderConfig, RetryPolicy};
pub use error::{ModelError, TimeoutPhase};
pub use responses::ResponsesProvider;
pub use scripted::ScriptedProvider;

/// One request to a model: everything a provider needs, in Responses API
/// shape (the Chat provider converts it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelRequest {
    pub model: String,
    /// System/developer instructions.
    pub instructions: Option<String>,
    /// History plus new user input, as Responses API items.
    pub input: Vec<ResponseItem>,
    /// Function tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Only meaningful for the Responses API (server-side conversation state);
    /// the Chat provider rejects a request that sets it, because it would
    /// silently lose the history the id stands for.
    pub previous_response_id: Option<String>,
    /// Responses API `store`: `Some(true)` when the provider must keep the
    /// response for the next request to continue from; `None` leaves the
    /// provider's default.
    pub store: Option<bool>,
    /// The OpenAI conversation the request adds to (Responses API): the
    /// provider holds the history and appends this request and its answer.
    pub conversation: Option<String>,
    pub parallel_tool_calls: bool,
    pub max_output_tokens: Option<u32>,
    pub temperature: Option<f32>,
}

/// A function tool: name, description and a JSON Schema of its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One normalized event of a model response. See the crate docs for order.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// The provider accepted the request.
    Created { response_id: Option<String> },
    /// An output item began; `item` is partial but its ids are known.
    OutputItemAdded {
        output_index: usize,
        item: ResponseItem,
    },
    /// Text of an assistant message.
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    /// A new reasoning summary part began.
    ReasoningSummaryPartAdded {
        item_id: String,
        summary_index: usize,
    },
    ReasoningSummaryDelta {
        item_id: String,
        summary_index: usize,
        delta: String,
    },
    /// Raw reasoning text (Responses `reasoning_text`, or Chat
    /// `reasoning_content` from llama.cpp/DeepSeek-style servers).
    ReasoningTextDelta {
        item_id: String,
        content_index: usize,
        delta: String,
    },
    FunctionCallArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    /// The final, authoritative item. `raw` is the provider's JSON of it,
    /// unknown fields included (synthesized for Chat), for `providerData`.
    OutputItemDone {
        output_index: usize,
        item: ResponseItem,
        raw: Value,
    },
    /// The response finished. Terminal.
    Completed {
        response_id: Option<String>,
        usage: Option<TokenUsageBreakdown>,
        /// `Some(reason)` when the provider stopped early, e.g.
        /// `max_output_tokens` or `content_filter`.
        incomplete_reason: Option<String>,
    },
}

impl ModelEvent {
    /// Whether this event ends the stream.
    pub fn is_terminal(&self) -> bool {
        matches!(self, ModelEvent::Completed { .. })
    }
}

/// The events of one response. Ends with exactly one `Completed` or one
/// `Err`, and nothing after.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A model API behind one interface.
pub trait ModelProvider: Send + Sync {
    /// The configured name, used in errors and logs.
    fn name(&self) -> &str;
    /// Start a response. Nothing happens until the stream is polled; dropping
    /// the stream cancels the request.
    fn stream(&self, request: ModelRequest) -> ModelStream;
    /// The model ids the provider says it serves (`GET {base_url}/models`
    /// for the HTTP providers); empty when it does not say.
    fn list_models(&self) -> ModelList<'_> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Whether the provider can keep a conversation on its side
    /// (`previous_response_id`, conversations): the Responses API can,
    /// Chat Completions cannot.
    fn keeps_history(&self) -> bool {
        false
    }
    /// Compacts the history `request` continues (its
    /// `previous_response_id` and `input`) with the provider's compact
    /// endpoint (`POST {base_url}/responses/compact`): the items that stand
    /// in for it at the start of the next request's input, opaque to spool.
    /// Providers without one answer an error, and spool summarizes instead.
    fn compact(&self, request: ModelRequest) -> ProviderCall<'_, Vec<Value>> {
        let name = self.name().to_owned();
        drop(request);
        Box::pin(async move {
            Err(ModelError::InvalidRequest {
                provider: name,
                message: "this provider has no compact endpoint".into(),
            })
        })
    }
    /// Creates an empty conversation on the provider and answers its id
    /// (`POST {base_url}/conversations`).
    fn create_conversation(&self) -> ProviderCall<'_, String> {
        let name = self.name().to_owned();
        Box::pin(async move {
            Err(ModelError::InvalidRequest {
                provider: name,
                message: "this provider keeps no conversations".into(),
            })
        })
    }
}

/// The answer of a provider call that does not stream.
pub type ProviderCall<'a, T> =
    Pin<Box<dyn std::future::Future<Output = Result<T, ModelError>> + Send + 'a>>;

/// The answer of [`ModelProvider::list_models`].
pub type ModelList<'a> =
    Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, ModelError>> + Send + 'a>>;
