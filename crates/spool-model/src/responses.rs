//! The OpenAI Responses API over SSE.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use spool_protocol::responses::ResponseItem;

use crate::config::ProviderConfig;
use crate::error::ModelError;
use crate::fields::{opt_index, opt_str, req_str, usage};
use crate::sse::SseEvent;
use crate::transport::{Endpoint, HttpTransport, WireParser, drive};
use crate::{ModelEvent, ModelProvider, ModelRequest, ModelStream};

/// `POST {base_url}/responses` with `stream: true`.
#[derive(Debug, Clone)]
pub struct ResponsesProvider {
    transport: Arc<HttpTransport>,
}

impl ResponsesProvider {
    /// Builds the HTTP client once; every stream shares it. Never fails: a
    /// client that cannot be built (no TLS backend) is reported as
    /// [`ModelError::Client`] by each stream instead.
    pub fn new(config: ProviderConfig) -> Self {
        ResponsesProvider {
            transport: Arc::new(HttpTransport::new(config)),
        }
    }
}

impl ModelProvider for ResponsesProvider {
    fn name(&self) -> &str {
        &self.transport.config.name
    }

    fn list_models(&self) -> crate::ModelList<'_> {
        let transport = self.transport.clone();
        Box::pin(async move { transport.list_models().await })
    }

    fn keeps_history(&self) -> bool {
        true
    }

    fn create_conversation(&self) -> crate::ProviderCall<'_, String> {
        let transport = self.transport.clone();
        Box::pin(async move {
            let answer = transport.post_json("conversations", &json!({})).await?;
            match answer.get("id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => Ok(id.to_owned()),
                _ => Err(transport
                    .endpoint("conversations")
                    .malformed("the new conversation has no `id`")),
            }
        })
    }

    fn compact(&self, request: ModelRequest) -> crate::ProviderCall<'_, Vec<Value>> {
        let transport = self.transport.clone();
        Box::pin(async move {
            let mut body = Map::new();
            body.insert("model".into(), json!(request.model));
            body.insert("input".into(), json!(request.input));
            if let Some(previous) = &request.previous_response_id {
                body.insert("previous_response_id".into(), json!(previous));
            }
            if let Some(instructions) = &request.instructions {
                body.insert("instructions".into(), json!(instructions));
            }
            let answer = transport
                .post_json("responses/compact", &Value::Object(body))
                .await?;
            match answer.get("output").and_then(Value::as_array) {
                Some(output) if !output.is_empty() => Ok(output.clone()),
                _ => Err(transport
                    .endpoint("responses/compact")
                    .malformed("the compacted response has no `output` items")),
            }
        })
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let endpoint = self.transport.endpoint("responses");
        let body = request_body(&request);
        let parser_endpoint = endpoint.clone();
        drive(self.transport.clone(), endpoint, body, move || {
            ResponsesParser::new(parser_endpoint.clone())
        })
    }
}

/// The JSON body of a streaming Responses API request.
pub(crate) fn request_body(request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if let Some(instructions) = &request.instructions {
        body.insert("instructions".into(), json!(instructions));
    }
    body.insert("input".into(), json!(request.input));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                // `strict: false`: spool's tool schemas are ordinary JSON
                // Schema, not the restricted subset strict mode demands.
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    body.insert(
        "parallel_tool_calls".into(),
        json!(request.parallel_tool_calls),
    );
    if let Some(id) = &request.previous_response_id {
        body.insert("previous_response_id".into(), json!(id));
    }
    if let Some(store) = request.store {
        body.insert("store".into(), json!(store));
    }
    if let Some(conversation) = &request.conversation {
        body.insert("conversation".into(), json!(conversation));
    }
    if let Some(max) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

/// Responses SSE events → model events. Tracks item ids by output index
/// because some servers (llama.cpp) omit `output_index`, and others omit
/// `item_id` on deltas.
pub(crate) struct ResponsesParser {
    endpoint: Endpoint,
    /// Item ids in output order.
    ids: Vec<String>,
    index_of: HashMap<String, usize>,
    response_id: Option<String>,
    /// Whether an event was produced yet: `Created` comes first or not at
    /// all.
    emitted: bool,
}

impl ResponsesParser {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        ResponsesParser {
            endpoint,
            ids: Vec::new(),
            index_of: HashMap::new(),
            response_id: None,
            emitted: false,
        }
    }

    /// The item id and output index a delta event refers to.
    fn target(&self, kind: &str, data: &Value) -> Result<(String, usize), ModelError> {
        let by_id = opt_str(data, "item_id").map(str::to_owned);
        let index = opt_index(&self.endpoint, kind, data, "output_index")?
            .or_else(|| by_id.as_ref().and_then(|id| self.index_of.get(id).copied()));
        match (by_id, index) {
            (Some(id), Some(index)) => Ok((id, index)),
            (Some(id), None) => Ok((id, self.ids.len().saturating_sub(1))),
            (None, Some(index)) => match self.ids.get(index) {
                Some(id) => Ok((id.clone(), index)),
                None => Err(self.endpoint.malformed(format!(
                    "`{kind}` for output_index {index}, which was never added"
                ))),
            },
            (None, None) => Err(self.endpoint.malformed(format!(
                "`{kind}` event without `item_id` or `output_index`"
            ))),
        }
    }

    /// Parse the `item` of an `output_item.*` event and find its output
    /// index. Gives the item an id if the provider sent none, because deltas
    /// and the runtime key items by id. Returns whether the item is new.
    fn item(
        &mut self,
        kind: &str,
        data: &Value,
        done: bool,
    ) -> Result<(usize, ResponseItem, Value, bool), ModelError> {
        let Some(mut raw) = data.get("item").filter(|i| i.is_object()).cloned() else {
            return Err(self
                .endpoint
                .malformed(format!("`{kind}` event without an `item` object")));
        };
        let given_id = opt_str(&raw, "id")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let known = given_id
            .as_ref()
            .and_then(|id| self.index_of.get(id).copied());
        let index = match (
            known,
            opt_index(&self.endpoint, kind, data, "output_index")?,
        ) {
            (Some(index), _) | (None, Some(index)) => index,
            // An id-less `done` finishes the item most recently added.
            (None, None) if done && given_id.is_none() && !self.ids.is_empty() => {
                self.ids.len() - 1
            }
            (None, None) => self.ids.len(),
        };
        let is_new = self.ids.get(index).is_none_or(String::is_empty);
        let id = match given_id {
            Some(id) => id,
            None => {
                let id = match self.ids.get(index) {
                    Some(id) if !id.is_empty() => id.clone(),
                    _ => format!("item_{index}"),
                };
                raw["id"] = json!(id);
                id
            }
        };
        if self.ids.len() <= index {
            self.ids.resize(index + 1, String::new());
        }
        self.ids[index] = id.clone();
        self.index_of.insert(id, index);
        let item: ResponseItem = serde_json::from_value(raw.clone()).map_err(|e| {
            self.endpoint
                .malformed(format!("`{kind}` with an undecodable item: {e}"))
        })?;
        Ok((index, item, raw, is_new))
    }
}

impl WireParser for ResponsesParser {
    fn on_event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        let before = out.len();
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(v) => v,
            // A named event we do not know may carry anything; a known or
            // unnamed one must be JSON.
            Err(_) if event.event != "message" && !is_known(&event.event) => {
                tracing::debug!(event = %event.event, "skipping unknown non-JSON SSE event");
                return Ok(());
            }
            Err(e) => {
                return Err(self.endpoint.malformed(format!(
                    "undecodable JSON in `{}` event: {e}: {}",
                    event.event,
                    crate::error::truncate(&event.data, 200)
                )));
            }
        };
        let kind = opt_str(&data, "type").unwrap_or(&event.event).to_owned();
        let ep = &self.endpoint;
        match kind.as_str() {
            "response.created" => {
                let response_id = data
                    .pointer("/response/id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if self.response_id.is_none() {
                    self.response_id = response_id;
                }
                // The contract: at most one `Created`, before anything else.
                // A repeated or late `response.created` (a provider that
                // sends it twice; found by the `provider_events` fuzz
                // target) only names the response.
                if !self.emitted {
                    out.push_back(ModelEvent::Created {
                        response_id: self.response_id.clone(),
                    });
                }
            }
            "response.output_item.added" => {
                let (output_index, item, _, _) = self.item(&kind, &data, false)?;
                out.push_back(ModelEvent::OutputItemAdded { output_index, item });
            }
            "response.output_item.done" => {
                let (output_index, item, raw, is_new) = self.item(&kind, &data, true)?;
                if is_new {
                    // A done without an added: announce it first, so every
                    // item goes started → completed downstream.
                    out.push_back(ModelEvent::OutputItemAdded {
                        output_index,
                        item: item.clone(),
                    });
                }
                out.push_back(ModelEvent::OutputItemDone {
                    output_index,
                    item,
                    raw,
                });
            }
            "response.output_text.delta" => {
                let (item_id, output_index) = self.target(&kind, &data)?;
                let delta = req_str(ep, &kind, &data, "delta")?.to_owned();
                out.push_back(ModelEvent::OutputTextDelta {
                    item_id,
                    output_index,
                    delta,
                });
            }
            "response.reasoning_summary_part.added" => {
                let (item_id, _) = self.target(&kind, &data)?;
                let summary_index = opt_index(ep, &kind, &data, "summary_index")?.unwrap_or(0);
                out.push_back(ModelEvent::ReasoningSummaryPartAdded {
                    item_id,
                    summary_index,
                });
            }
            "response.reasoning_summary_text.delta" => {
                let (item_id, _) = self.target(&kind, &data)?;
                let delta = req_str(ep, &kind, &data, "delta")?.to_owned();
                out.push_back(ModelEvent::ReasoningSummaryDelta {
                    item_id,
                    summary_index: opt_index(ep, &kind, &data, "summary_index")?.unwrap_or(0),
                    delta,
                });
            }
            "response.reasoning_text.delta" => {
                let (item_id, _) = self.target(&kind, &data)?;
                let delta = req_str(ep, &kind, &data, "delta")?.to_owned();
                out.push_back(ModelEvent::ReasoningTextDelta {
                    item_id,
                    content_index: opt_index(ep, &kind, &data, "content_index")?.unwrap_or(0),
                    delta,
                });
            }
            "response.function_call_arguments.delta" => {
                let (item_id, output_index) = self.target(&kind, &data)?;
                let delta = req_str(ep, &kind, &data, "delta")?.to_owned();
                out.push_back(ModelEvent::FunctionCallArgumentsDelta {
                    item_id,
                    output_index,
                    delta,
                });
            }
            "response.completed" | "response.incomplete" => {
                let response = data.get("response").unwrap_or(&Value::Null);
                let response_id = opt_str(response, "id")
                    .map(str::to_owned)
                    .or_else(|| self.response_id.clone());
                let incomplete = kind == "response.incomplete"
                    || opt_str(response, "status") == Some("incomplete");
                let incomplete_reason = incomplete.then(|| {
                    response
                        .pointer("/incomplete_details/reason")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                        .to_owned()
                });
                out.push_back(ModelEvent::Completed {
                    response_id,
                    usage: response.get("usage").and_then(usage),
                    incomplete_reason,
                });
            }
            "response.failed" => {
                let error = data.pointer("/response/error").unwrap_or(&Value::Null);
                let message =
                    opt_str(error, "message").unwrap_or("the provider reported no reason");
                let code = opt_str(error, "code").map(str::to_owned);
                return Err(ep.failed(code, message));
            }
            "error" => {
                let (message, code) = crate::error::message_from_json(&data)
                    .unwrap_or_else(|| ("the provider sent an error event".into(), None));
                return Err(ep.failed(code, message));
            }
            other => {
                // Informational events (`response.in_progress`,
                // `*.done` duplicates of the final item, content parts) and
                // anything newer than this code.
                tracing::trace!(event = other, "skipping Responses event");
            }
        }
        self.emitted |= out.len() > before;
        Ok(())
    }

    fn on_end(&mut self, _out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        Err(self
            .endpoint
            .dropped("the body ended before `response.completed`"))
    }
}

/// Events whose data must decode; the rest may be skipped.
fn is_known(name: &str) -> bool {
    matches!(
        name,
        "response.created"
            | "response.output_item.added"
            | "response.output_item.done"
            | "response.output_text.delta"
            | "response.reasoning_summary_part.added"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta"
            | "response.function_call_arguments.delta"
            | "response.completed"
            | "response.incomplete"
            | "response.failed"
            | "error"
    )
}

#[cfg(test)]
mod tests {
    use crate::ModelEvent;
    use crate::fuzzing::{Wire, model_events};

    /// Regression (found by the `provider_events` fuzz target): a stream
    /// that repeats `response.created` (here the second time in its
    /// `type`, under another event name) yielded `Created` twice, against
    /// the contract (at most one, first).
    #[tokio::test]
    async fn created_comes_once_and_first() {
        // The fuzzer's input, as it came (chunking aside).
        let body = include_bytes!("../tests/fuzz_regressions/responses_created_twice.sse");
        let items = model_events(Wire::Responses, vec![body.to_vec()]).await;
        let created: Vec<usize> = (0..items.len())
            .filter(|&i| matches!(items[i], Ok(ModelEvent::Created { .. })))
            .collect();
        assert_eq!(created, [0], "{items:#?}");
        assert!(matches!(
            &items[0],
            Ok(ModelEvent::Created { response_id: Some(id) }) if id == "resp_3"
        ));
        // The body ends without a terminal event: dropped, as before.
        assert!(items.last().is_some_and(Result::is_err), "{items:#?}");
    }
}
