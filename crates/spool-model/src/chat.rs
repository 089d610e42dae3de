//! OpenAI Chat Completions over SSE, normalized to Responses-shaped events.
//!
//! Chat has no output items, so they are synthesized: text deltas make an
//! assistant `message` item (id `msg_…`), `reasoning_content` deltas a
//! `reasoning` item (id `rs_…`), each indexed tool call a `function_call`
//! item (id `fc_…`, call id as the server gave it). A text or reasoning item
//! is finished when output of another kind begins; everything open is
//! finished at `finish_reason`. `Completed` follows at `data: [DONE]` (or
//! the clean end of a body that had a `finish_reason`), carrying the usage
//! chunk's counts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use futures_util::stream;
use serde_json::Value;
use spool_protocol::TokenUsageBreakdown;
use spool_protocol::responses::{
    ContentItem, KnownResponseItem, ReasoningContentPart, ResponseItem,
};

use crate::config::ProviderConfig;
use crate::error::{ModelError, message_from_json, truncate};
use crate::fields::{opt_str, opt_usize, usage};
use crate::sse::SseEvent;
use crate::transport::{Endpoint, HttpTransport, WireParser, drive};
use crate::{ModelEvent, ModelProvider, ModelRequest, ModelStream};

/// `POST {base_url}/chat/completions` with `stream: true`.
#[derive(Debug, Clone)]
pub struct ChatProvider {
    transport: Arc<HttpTransport>,
}

impl ChatProvider {
    /// Builds the HTTP client once; every stream shares it. Never fails: a
    /// client that cannot be built (no TLS backend) is reported as
    /// [`ModelError::Client`] by each stream instead.
    pub fn new(config: ProviderConfig) -> Self {
        ChatProvider {
            transport: Arc::new(HttpTransport::new(config)),
        }
    }
}

impl ModelProvider for ChatProvider {
    fn name(&self) -> &str {
        &self.transport.config.name
    }

    fn list_models(&self) -> crate::ModelList<'_> {
        let transport = self.transport.clone();
        Box::pin(async move { transport.list_models().await })
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if request.previous_response_id.is_some() || request.conversation.is_some() {
            let error = ModelError::InvalidRequest {
                provider: self.transport.config.name.clone(),
                message: "Chat Completions keeps no server-side conversation, so \
                          neither previous_response_id nor a conversation can be honored; send \
                          the history instead"
                    .into(),
            };
            return Box::pin(stream::iter([Err(error)]));
        }
        let endpoint = self.transport.endpoint("chat/completions");
        let body = crate::chat_convert::request_body(&request);
        let parser_endpoint = endpoint.clone();
        drive(self.transport.clone(), endpoint, body, move || {
            ChatParser::new(parser_endpoint.clone())
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentKind {
    Text,
    Reasoning,
}

/// The text or reasoning item being streamed.
struct Segment {
    kind: SegmentKind,
    id: String,
    output_index: usize,
    text: String,
}

/// A tool call being streamed.
struct Call {
    id: String,
    call_id: String,
    name: String,
    arguments: String,
    output_index: usize,
}

pub(crate) struct ChatParser {
    endpoint: Endpoint,
    created: bool,
    response_id: Option<String>,
    next_index: usize,
    segment: Option<Segment>,
    /// By the server's tool-call `index`.
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<String>,
    usage: Option<TokenUsageBreakdown>,
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

impl ChatParser {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        ChatParser {
            endpoint,
            created: false,
            response_id: None,
            next_index: 0,
            segment: None,
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
        }
    }

    fn take_index(&mut self) -> usize {
        self.next_index += 1;
        self.next_index - 1
    }

    /// Append text of `kind`, starting a new item if another kind is open.
    fn segment_delta(&mut self, kind: SegmentKind, delta: &str, out: &mut VecDeque<ModelEvent>) {
        if self.segment.as_ref().is_some_and(|s| s.kind != kind) {
            self.close_segment(out);
        }
        if self.segment.is_none() {
            let output_index = self.take_index();
            let (id, item) = match kind {
                SegmentKind::Text => {
                    let id = new_id("msg");
                    (id.clone(), message(id, String::new(), "in_progress"))
                }
                SegmentKind::Reasoning => {
                    let id = new_id("rs");
                    (id.clone(), reasoning(id, None))
                }
            };
            out.push_back(ModelEvent::OutputItemAdded { output_index, item });
            self.segment = Some(Segment {
                kind,
                id,
                output_index,
                text: String::new(),
            });
        }
        let Some(segment) = self.segment.as_mut() else {
            return;
        };
        segment.text.push_str(delta);
        out.push_back(match kind {
            SegmentKind::Text => ModelEvent::OutputTextDelta {
                item_id: segment.id.clone(),
                output_index: segment.output_index,
                delta: delta.to_owned(),
            },
            SegmentKind::Reasoning => ModelEvent::ReasoningTextDelta {
                item_id: segment.id.clone(),
                content_index: 0,
                delta: delta.to_owned(),
            },
        });
    }

    fn close_segment(&mut self, out: &mut VecDeque<ModelEvent>) {
        self.close_segment_as(out, "completed");
    }

    /// Finishes the open segment with `status` (`incomplete` for the text
    /// a cut response ends on).
    fn close_segment_as(&mut self, out: &mut VecDeque<ModelEvent>, status: &str) {
        let Some(segment) = self.segment.take() else {
            return;
        };
        let item = match segment.kind {
            SegmentKind::Text => message(segment.id, segment.text, status),
            SegmentKind::Reasoning => reasoning(segment.id, Some(segment.text)),
        };
        push_done(out, segment.output_index, item);
    }

    fn tool_call_delta(&mut self, delta: &Value, out: &mut VecDeque<ModelEvent>) {
        self.close_segment(out);
        // Servers that stream one call at a time may omit `index`.
        let index = delta.get("index").and_then(Value::as_u64).unwrap_or(0);
        let function = delta.get("function").unwrap_or(&Value::Null);
        let name = opt_str(function, "name").unwrap_or("");
        if !self.calls.contains_key(&index) {
            let call = Call {
                id: new_id("fc"),
                call_id: opt_str(delta, "id")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| new_id("call")),
                name: name.to_owned(),
                arguments: String::new(),
                output_index: self.take_index(),
            };
            out.push_back(ModelEvent::OutputItemAdded {
                output_index: call.output_index,
                item: function_call(&call, "in_progress"),
            });
            self.calls.insert(index, call);
        } else if let Some(call) = self.calls.get_mut(&index)
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        let args = opt_str(function, "arguments").unwrap_or("");
        if let Some(call) = self.calls.get_mut(&index)
            && !args.is_empty()
        {
            call.arguments.push_str(args);
            out.push_back(ModelEvent::FunctionCallArgumentsDelta {
                item_id: call.id.clone(),
                output_index: call.output_index,
                delta: args.to_owned(),
            });
        }
    }

    /// Finish every open item, in output order.
    fn close_all(&mut self, out: &mut VecDeque<ModelEvent>) {
        self.close_segment(out);
        let mut calls: Vec<Call> = std::mem::take(&mut self.calls).into_values().collect();
        calls.sort_by_key(|c| c.output_index);
        for call in calls {
            push_done(out, call.output_index, function_call(&call, "completed"));
        }
    }

    fn complete(&mut self, out: &mut VecDeque<ModelEvent>) {
        let incomplete_reason = match self.finish_reason.as_deref() {
            Some("length") => Some("max_output_tokens".to_owned()),
            Some("content_filter") => Some("content_filter".to_owned()),
            _ => None,
        };
        self.close_all(out);
        out.push_back(ModelEvent::Completed {
            response_id: self.response_id.clone(),
            usage: self.usage,
            incomplete_reason,
        });
    }

    fn on_chunk(
        &mut self,
        chunk: &Value,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            let (message, code) = message_from_json(chunk)
                .unwrap_or_else(|| ("the server sent an error chunk".into(), None));
            return Err(self.endpoint.failed(code, message));
        }
        if !self.created {
            self.created = true;
            self.response_id = opt_str(chunk, "id").map(str::to_owned);
            out.push_back(ModelEvent::Created {
                response_id: self.response_id.clone(),
            });
        }
        if let Some(u) = chunk.get("usage").and_then(usage) {
            self.usage = Some(u);
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        // Only the first choice: spool never asks for `n > 1`.
        let Some(choice) = choices
            .into_iter()
            .flatten()
            .find(|c| opt_usize(c, "index").unwrap_or(0) == 0)
        else {
            return Ok(());
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        // llama.cpp and DeepSeek say `reasoning_content`; vLLM and others
        // `reasoning`.
        let reasoning = opt_str(delta, "reasoning_content").or_else(|| opt_str(delta, "reasoning"));
        if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
            self.segment_delta(SegmentKind::Reasoning, text, out);
        }
        let text = opt_str(delta, "content").or_else(|| opt_str(delta, "refusal"));
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            self.segment_delta(SegmentKind::Text, text, out);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call_delta(call, out);
        }
        if let Some(reason) = opt_str(choice, "finish_reason") {
            self.finish_reason = Some(reason.to_owned());
            // The text a cut response ends on is not finished.
            if matches!(reason, "length" | "content_filter") {
                self.close_segment_as(out, "incomplete");
            }
            self.close_all(out);
        }
        Ok(())
    }
}

impl WireParser for ChatParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        if event.data.trim() == "[DONE]" {
            self.complete(out);
            return Ok(());
        }
        match serde_json::from_str::<Value>(&event.data) {
            Ok(chunk) => self.on_chunk(&chunk, out),
            // Chat servers do not name their events; a named one we cannot
            // read is an extension, skipped.
            Err(_) if event.event != "message" => Ok(()),
            Err(e) => Err(self.endpoint.malformed(format!(
                "undecodable JSON in a chunk: {e}: {}",
                truncate(&event.data, 200)
            ))),
        }
    }

    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if self.finish_reason.is_some() {
            // Some servers end the body without `[DONE]`; a finish reason
            // already said the answer is whole.
            self.complete(out);
            return Ok(());
        }
        Err(self
            .endpoint
            .dropped("the body ended before a `finish_reason` or `[DONE]`"))
    }
}

fn push_done(out: &mut VecDeque<ModelEvent>, output_index: usize, item: ResponseItem) {
    let raw = serde_json::to_value(&item).unwrap_or(Value::Null);
    out.push_back(ModelEvent::OutputItemDone {
        output_index,
        item,
        raw,
    });
}

fn message(id: String, text: String, status: &str) -> ResponseItem {
    let content = if text.is_empty() && status == "in_progress" {
        Vec::new()
    } else {
        vec![ContentItem::OutputText {
            text,
            annotations: Vec::new(),
        }]
    };
    ResponseItem::Known(KnownResponseItem::Message {
        id: Some(id),
        role: "assistant".into(),
        content,
        status: Some(status.into()),
    })
}

fn reasoning(id: String, text: Option<String>) -> ResponseItem {
    ResponseItem::Known(KnownResponseItem::Reasoning {
        id,
        summary: Vec::new(),
        content: Some(
            text.map(|text| vec![ReasoningContentPart::ReasoningText { text }])
                .unwrap_or_default(),
        ),
        encrypted_content: None,
    })
}

fn function_call(call: &Call, status: &str) -> ResponseItem {
    ResponseItem::Known(KnownResponseItem::FunctionCall {
        id: Some(call.id.clone()),
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        status: Some(status.into()),
    })
}
