//! Structured provider streams for the `provider_events` target: Responses
//! API events ([`REvent`]) and Chat Completions chunks ([`CChunk`]) that
//! `arbitrary` builds from the real event names and fields, with the
//! malformed variants a model server could send (wrong types, missing
//! fields, unknown events), each written out as SSE.

use arbitrary::Arbitrary;
use serde_json::{Value, json};

#[derive(Arbitrary, Debug, Clone, Copy)]
enum RKind {
    Created,
    InProgress,
    ItemAdded,
    ItemDone,
    TextDelta,
    TextDone,
    ContentPartAdded,
    SummaryPartAdded,
    SummaryDelta,
    ReasoningDelta,
    ArgsDelta,
    ArgsDone,
    Completed,
    Incomplete,
    Failed,
    Error,
    Unknown,
}

impl RKind {
    fn name(self) -> &'static str {
        match self {
            RKind::Created => "response.created",
            RKind::InProgress => "response.in_progress",
            RKind::ItemAdded => "response.output_item.added",
            RKind::ItemDone => "response.output_item.done",
            RKind::TextDelta => "response.output_text.delta",
            RKind::TextDone => "response.output_text.done",
            RKind::ContentPartAdded => "response.content_part.added",
            RKind::SummaryPartAdded => "response.reasoning_summary_part.added",
            RKind::SummaryDelta => "response.reasoning_summary_text.delta",
            RKind::ReasoningDelta => "response.reasoning_text.delta",
            RKind::ArgsDelta => "response.function_call_arguments.delta",
            RKind::ArgsDone => "response.function_call_arguments.done",
            RKind::Completed => "response.completed",
            RKind::Incomplete => "response.incomplete",
            RKind::Failed => "response.failed",
            RKind::Error => "error",
            RKind::Unknown => "response.something_new",
        }
    }
}

/// Where the event's name is given.
#[derive(Arbitrary, Debug)]
enum Naming {
    Both,
    EventLine,
    TypeField,
    /// `event:` says one thing, `type` another.
    Conflicting(RKind),
}

/// An index as a provider might (mis)write it.
#[derive(Arbitrary, Debug)]
enum Index {
    Small(u8),
    Any(u64),
    Negative(i16),
    Float(f32),
    Text,
    Null,
}

impl Index {
    fn json(&self) -> Value {
        match self {
            Index::Small(n) => json!(n % 8),
            Index::Any(n) => json!(n),
            Index::Negative(n) => json!(-(i64::from(*n).abs()) - 1),
            Index::Float(f) => {
                serde_json::Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number)
            }
            Index::Text => json!("0"),
            Index::Null => Value::Null,
        }
    }
}

/// An id: mostly from a small pool, so events refer to each other.
#[derive(Arbitrary, Debug)]
enum Id {
    Pool(u8),
    Empty,
    Text(String),
    Number(i64),
}

impl Id {
    fn json(&self, prefix: &str) -> Value {
        match self {
            Id::Pool(n) => json!(format!("{prefix}_{}", n % 4)),
            Id::Empty => json!(""),
            Id::Text(s) => json!(s),
            Id::Number(n) => json!(n),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum ItemKind {
    Message,
    Reasoning,
    FunctionCall,
    FunctionCallOutput,
    WebSearchCall,
    Other,
    NotAnObject,
}

#[derive(Arbitrary, Debug)]
enum Status {
    InProgress,
    Completed,
    Incomplete,
    Other(String),
}

#[derive(Arbitrary, Debug)]
struct Item {
    kind: ItemKind,
    id: Option<Id>,
    status: Option<Status>,
    texts: Vec<String>,
    refusal: Option<String>,
    call_id: Option<Id>,
    name: Option<String>,
    arguments: Option<String>,
    query: Option<String>,
}

impl Item {
    fn json(&self) -> Value {
        let mut v = match self.kind {
            ItemKind::NotAnObject => return json!(self.texts),
            ItemKind::Message => {
                let mut content: Vec<Value> = self
                    .texts
                    .iter()
                    .map(|t| json!({"type": "output_text", "text": t, "annotations": []}))
                    .collect();
                if let Some(r) = &self.refusal {
                    content.push(json!({"type": "refusal", "refusal": r}));
                }
                json!({"type": "message", "role": "assistant", "content": content})
            }
            ItemKind::Reasoning => json!({
                "type": "reasoning",
                "summary": self.texts.iter().map(|t| json!({"type": "summary_text", "text": t})).collect::<Vec<_>>(),
                "content": self.refusal.iter().map(|t| json!({"type": "reasoning_text", "text": t})).collect::<Vec<_>>(),
            }),
            ItemKind::FunctionCall => {
                let mut v = json!({"type": "function_call"});
                if let Some(c) = &self.call_id {
                    v["call_id"] = c.json("call");
                }
                if let Some(n) = &self.name {
                    v["name"] = json!(n);
                }
                if let Some(a) = &self.arguments {
                    v["arguments"] = json!(a);
                }
                v
            }
            ItemKind::FunctionCallOutput => json!({"type": "function_call_output",
                "call_id": self.call_id.as_ref().map(|c| c.json("call")), "output": self.texts.concat()}),
            ItemKind::WebSearchCall => {
                json!({"type": "web_search_call", "action": {"type": "search", "query": self.query}})
            }
            ItemKind::Other => json!({"type": "image_generation_call", "result": self.texts}),
        };
        if let Some(id) = &self.id {
            v["id"] = id.json("item");
        }
        if let Some(s) = &self.status {
            v["status"] = json!(match s {
                Status::InProgress => "in_progress",
                Status::Completed => "completed",
                Status::Incomplete => "incomplete",
                Status::Other(s) => s,
            });
        }
        v
    }
}

#[derive(Arbitrary, Debug)]
struct Usage {
    input: Option<i64>,
    output: Option<i64>,
    cached: Option<i64>,
    reasoning: Option<i64>,
    total: Option<i64>,
}

impl Usage {
    fn responses(&self) -> Value {
        json!({"input_tokens": self.input, "output_tokens": self.output, "total_tokens": self.total,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens_details": {"reasoning_tokens": self.reasoning}})
    }
    fn chat(&self) -> Value {
        json!({"prompt_tokens": self.input, "completion_tokens": self.output, "total_tokens": self.total,
            "prompt_tokens_details": {"cached_tokens": self.cached},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning}})
    }
}

/// One Responses API event as a model server might stream it, fields
/// present, absent or of the wrong type.
#[derive(Arbitrary, Debug)]
pub struct REvent {
    kind: RKind,
    naming: Naming,
    item_id: Option<Id>,
    output_index: Option<Index>,
    part_index: Option<Index>,
    delta: Option<String>,
    item: Option<Item>,
    response_id: Option<Id>,
    usage: Option<Usage>,
    reason: Option<String>,
    /// Raw text instead of JSON data.
    garbage: Option<String>,
}

impl REvent {
    /// The event as SSE: a `data:` line, after an `event:` line when it
    /// names one, then a blank line.
    pub fn sse(&self) -> String {
        let kind = self.kind;
        let mut data = json!({});
        if let Some(id) = &self.item_id {
            data["item_id"] = id.json("item");
        }
        if let Some(i) = &self.output_index {
            data["output_index"] = i.json();
        }
        if let Some(i) = &self.part_index {
            data["summary_index"] = i.json();
            data["content_index"] = i.json();
        }
        if let Some(d) = &self.delta {
            data["delta"] = json!(d);
        }
        if let Some(item) = &self.item {
            data["item"] = item.json();
        }
        let mut response = json!({});
        if let Some(id) = &self.response_id {
            response["id"] = id.json("resp");
        }
        if let Some(u) = &self.usage {
            response["usage"] = u.responses();
        }
        if let Some(r) = &self.reason {
            response["incomplete_details"] = json!({"reason": r});
            response["error"] = json!({"message": r, "code": "server_error"});
            data["message"] = json!(r);
        }
        data["response"] = response;
        let (line, field) = match &self.naming {
            Naming::Both => (Some(kind.name()), Some(kind.name())),
            Naming::EventLine => (Some(kind.name()), None),
            Naming::TypeField => (None, Some(kind.name())),
            Naming::Conflicting(other) => (Some(other.name()), Some(kind.name())),
        };
        if let Some(t) = field {
            data["type"] = json!(t);
        }
        let body = match &self.garbage {
            Some(g) => g.replace(['\r', '\n'], " "),
            None => data.to_string(),
        };
        match line {
            Some(name) => format!("event: {name}\ndata: {body}\n\n"),
            None => format!("data: {body}\n\n"),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Finish {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

#[derive(Arbitrary, Debug)]
struct ToolCall {
    index: Option<Index>,
    id: Option<Id>,
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Choice {
    index: Option<Index>,
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    refusal: Option<String>,
    tool_calls: Vec<ToolCall>,
    finish: Option<Finish>,
}

#[derive(Arbitrary, Debug)]
enum ChatChunk {
    Chunk {
        id: Option<Id>,
        choices: Vec<Choice>,
        usage: Option<Usage>,
        error: Option<String>,
        event_name: Option<String>,
    },
    Done,
    Garbage(String),
    Comment(String),
}

impl ChatChunk {
    fn sse(&self) -> String {
        match self {
            ChatChunk::Done => "data: [DONE]\n\n".into(),
            ChatChunk::Garbage(g) => format!("data: {}\n\n", g.replace(['\r', '\n'], " ")),
            ChatChunk::Comment(c) => format!(": {}\n", c.replace(['\r', '\n'], " ")),
            ChatChunk::Chunk {
                id,
                choices,
                usage,
                error,
                event_name,
            } => {
                let mut v = json!({"object": "chat.completion.chunk", "created": 1, "model": "m"});
                if let Some(id) = id {
                    v["id"] = id.json("chatcmpl");
                }
                v["choices"] = choices
                    .iter()
                    .map(|c| {
                        let mut delta = json!({});
                        if let Some(t) = &c.content {
                            delta["content"] = json!(t);
                        }
                        if let Some(t) = &c.reasoning_content {
                            delta["reasoning_content"] = json!(t);
                        }
                        if let Some(t) = &c.reasoning {
                            delta["reasoning"] = json!(t);
                        }
                        if let Some(t) = &c.refusal {
                            delta["refusal"] = json!(t);
                        }
                        if !c.tool_calls.is_empty() {
                            delta["tool_calls"] = c
                                .tool_calls
                                .iter()
                                .map(|t| {
                                    let mut call = json!({"type": "function", "function": {}});
                                    if let Some(i) = &t.index {
                                        call["index"] = i.json();
                                    }
                                    if let Some(id) = &t.id {
                                        call["id"] = id.json("call");
                                    }
                                    if let Some(n) = &t.name {
                                        call["function"]["name"] = json!(n);
                                    }
                                    if let Some(a) = &t.arguments {
                                        call["function"]["arguments"] = json!(a);
                                    }
                                    call
                                })
                                .collect();
                        }
                        let mut choice = json!({"delta": delta});
                        if let Some(i) = &c.index {
                            choice["index"] = i.json();
                        }
                        choice["finish_reason"] = match &c.finish {
                            None => Value::Null,
                            Some(Finish::Stop) => json!("stop"),
                            Some(Finish::Length) => json!("length"),
                            Some(Finish::ToolCalls) => json!("tool_calls"),
                            Some(Finish::ContentFilter) => json!("content_filter"),
                            Some(Finish::Other(s)) => json!(s),
                        };
                        choice
                    })
                    .collect();
                if let Some(u) = usage {
                    v["usage"] = u.chat();
                }
                if let Some(e) = error {
                    v["error"] = json!({"message": e, "code": 500});
                }
                match event_name {
                    Some(name) => {
                        format!("event: {}\ndata: {v}\n\n", name.replace(['\r', '\n'], " "))
                    }
                    None => format!("data: {v}\n\n"),
                }
            }
        }
    }
}

/// One Chat Completions chunk as a model server might stream it (or a
/// `[DONE]`, a comment, garbage).
#[derive(Arbitrary, Debug)]
pub struct CChunk(ChatChunk);

impl CChunk {
    /// The chunk as SSE: a `data:` line (after an `event:` line when it names
    /// one) and a blank line, or a comment line.
    pub fn sse(&self) -> String {
        self.0.sse()
    }
}
