//! The OpenAPI 3.1 document of the HTTP API, generated from the route table
//! below and the schemas of the request and response types (schemars).
//! Committed as `schema/http/openapi.json`; a test fails when it drifts.

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use spool_protocol::responses::ResponseItem;
use spool_protocol::*;

/// What a route answers with.
enum Answer {
    /// A JSON body of this schema (a component name or an inline schema).
    Json(u16, Schema),
    /// An SSE stream of notifications.
    Events,
    /// A file of the trace viewer (HTML, script, style), with an ETag.
    File,
}

enum Schema {
    Named(&'static str),
    Empty,
}

/// A query parameter or header.
struct Param {
    place: &'static str,
    name: &'static str,
    kind: &'static str,
    about: &'static str,
}

struct Route {
    method: &'static str,
    path: &'static str,
    operation: &'static str,
    summary: &'static str,
    params: &'static [Param],
    body: Option<&'static str>,
    answer: Answer,
    /// Error statuses besides those of every route (400, 401, 403, 421,
    /// 500) and of every POST (415).
    errors: &'static [u16],
}

const fn query(name: &'static str, kind: &'static str, about: &'static str) -> Param {
    Param {
        place: "query",
        name,
        kind,
        about,
    }
}

/// Every route of the API (tested against the router).
const ROUTES: &[Route] = &[
    Route {
        method: "post",
        path: "/v1/threads",
        operation: "createThread",
        summary: "Start a thread (the params of JSON-RPC thread/start); answers its result.",
        params: &[],
        body: Some("ThreadStartParams"),
        answer: Answer::Json(201, Schema::Named("ThreadStartResponse")),
        errors: &[503],
    },
    Route {
        method: "get",
        path: "/v1/threads",
        operation: "listThreads",
        summary: "Threads, newest first, one page at a time (JSON-RPC thread/list).",
        params: &[
            query("cursor", "string", "nextCursor of the previous page"),
            query("limit", "integer", "page size, 1 to 200 (default 25)"),
            query(
                "archived",
                "boolean",
                "true: only archived threads; false (default): only the others",
            ),
            query(
                "search",
                "string",
                "only threads whose title (name, else preview) contains this text",
            ),
            query(
                "sortKey",
                "string",
                "created_at (default) | updated_at: newest first by this time",
            ),
        ],
        body: None,
        answer: Answer::Json(200, Schema::Named("ThreadListResponse")),
        errors: &[],
    },
    Route {
        method: "get",
        path: "/v1/threads/{id}",
        operation: "readThread",
        summary: "A thread with its turns and their items (JSON-RPC thread/read).",
        params: &[query(
            "includeTurns",
            "boolean",
            "false: the thread without its turns (default true)",
        )],
        body: None,
        answer: Answer::Json(200, Schema::Named("ThreadReadResponse")),
        errors: &[404],
    },
    Route {
        method: "post",
        path: "/v1/threads/{id}/fork",
        operation: "forkThread",
        summary: "Fork the thread (JSON-RPC thread/fork params without threadId, e.g. \
                  {\"lastTurnId\": \"…\"}); answers the new thread's result.",
        params: &[],
        body: Some("ThreadForkBody"),
        answer: Answer::Json(201, Schema::Named("ThreadForkResponse")),
        errors: &[404, 503],
    },
    Route {
        method: "post",
        path: "/v1/threads/{id}/revert",
        operation: "revertThread",
        summary: "Remove a turn and every later one from the thread's history (JSON-RPC \
                  thread/revert params without threadId: {\"beforeTurnId\": \"…\"}).",
        params: &[],
        body: Some("ThreadRevertBody"),
        answer: Answer::Json(200, Schema::Named("ThreadRevertResponse")),
        errors: &[404],
    },
    Route {
        method: "get",
        path: "/v1/threads/{id}/turns",
        operation: "listTurns",
        summary: "A thread's turns one page at a time (JSON-RPC thread/turns/list).",
        params: &[
            query(
                "cursor",
                "string",
                "nextCursor (or backwardsCursor) of a page",
            ),
            query("limit", "integer", "page size, 1 to 1000 (default 50)"),
            query(
                "sortDirection",
                "string",
                "asc | desc (default desc: newest first)",
            ),
            query(
                "itemsView",
                "string",
                "notLoaded | summary (default) | full: which items each turn carries",
            ),
        ],
        body: None,
        answer: Answer::Json(200, Schema::Named("ThreadTurnsListResponse")),
        errors: &[404],
    },
    Route {
        method: "post",
        path: "/v1/threads/{id}/turns",
        operation: "startTurn",
        summary: "Start a turn (JSON-RPC turn/start params without threadId); the response \
                  streams its notifications from turn/started to turn/completed.",
        params: &[],
        body: Some("TurnStartBody"),
        answer: Answer::Events,
        errors: &[404, 409, 503],
    },
    Route {
        method: "post",
        path: "/v1/threads/{id}/turns/{turnId}/interrupt",
        operation: "interruptTurn",
        summary: "Interrupt the running turn; its turn/completed says interrupted.",
        params: &[],
        body: Some("EmptyBody"),
        answer: Answer::Json(200, Schema::Empty),
        errors: &[404, 409],
    },
    Route {
        method: "get",
        path: "/v1/threads/{id}/events",
        operation: "threadEvents",
        summary: "Every event after the cursor, then live ones, with no gap and no duplicate.",
        params: &[
            Param {
                place: "header",
                name: "Last-Event-ID",
                kind: "integer",
                about: "resume after this seq (wins over ?after=)",
            },
            query(
                "after",
                "integer",
                "resume after this seq (default 0: everything)",
            ),
        ],
        body: None,
        answer: Answer::Events,
        errors: &[404],
    },
    Route {
        method: "get",
        path: "/v1/threads/{id}/items",
        operation: "threadItems",
        summary: "A thread's items in a view: all and client list item records, every one \
                  or (with after or limit) one page; llm is the next model request's input, \
                  under a token budget when given.",
        params: &[
            query("view", "string", "all | client | llm (default client)"),
            query("tokens", "integer", "token budget of the llm view"),
            query(
                "after",
                "integer",
                "one page: records with an ordinal after this (default 0); the previous \
                 page's nextCursor. Not with view=llm",
            ),
            query(
                "limit",
                "integer",
                "one page: at most this many rows read, 1 to 1000 (default 200); the view may \
                 leave some out. Not with view=llm",
            ),
        ],
        body: None,
        answer: Answer::Json(200, Schema::Named("ItemsPage")),
        errors: &[404],
    },
    Route {
        method: "get",
        path: "/v1/threads/{id}/log",
        operation: "threadLog",
        summary: "The thread's committed events one page at a time, each as the data: of \
                  /v1/threads/{id}/events carries it.",
        params: &[
            query(
                "after",
                "integer",
                "events with a seq after this (default 0); the previous page's nextCursor",
            ),
            query("limit", "integer", "page size, 1 to 2000 (default 500)"),
        ],
        body: None,
        answer: Answer::Json(200, Schema::Named("LogPage")),
        errors: &[404],
    },
    Route {
        method: "post",
        path: "/v1/threads/{id}/requests/{requestId}",
        operation: "answerRequest",
        summary: "Answer an approval or a client tool call, e.g. {\"decision\": \"accept\"}.",
        params: &[],
        body: Some("ServerRequestAnswer"),
        answer: Answer::Json(200, Schema::Empty),
        errors: &[404, 409],
    },
    Route {
        method: "get",
        path: "/v1/openapi.json",
        operation: "openapi",
        summary: "This document.",
        params: &[],
        body: None,
        answer: Answer::Json(200, Schema::Empty),
        errors: &[],
    },
    Route {
        method: "get",
        path: "/",
        operation: "viewer",
        summary: "The trace viewer's page (no token needed: it asks for one).",
        params: &[],
        body: None,
        answer: Answer::File,
        errors: &[],
    },
    Route {
        method: "get",
        path: "/viewer/{file}",
        operation: "viewerFile",
        summary: "A script, style or image of the trace viewer (no token needed).",
        params: &[],
        body: None,
        answer: Answer::File,
        errors: &[404],
    },
];

/// `(method, path)` of every documented route, for tests.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    ROUTES.iter().map(|r| (r.method, r.path)).collect()
}

fn register<T: JsonSchema>(generator: &mut SchemaGenerator) {
    generator.subschema_for::<T>();
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The OpenAPI document.
pub fn openapi() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut generator = settings.into_generator();
    register::<ThreadStartParams>(&mut generator);
    register::<ThreadStartResponse>(&mut generator);
    register::<ThreadListResponse>(&mut generator);
    register::<ThreadReadResponse>(&mut generator);
    register::<TurnStartParams>(&mut generator);
    register::<ThreadTurnsListResponse>(&mut generator);
    register::<ThreadForkParams>(&mut generator);
    register::<ThreadForkResponse>(&mut generator);
    register::<ThreadRevertParams>(&mut generator);
    register::<ThreadRevertResponse>(&mut generator);
    register::<ServerRequestAnswer>(&mut generator);
    register::<ServerNotification>(&mut generator);
    register::<ServerRequest>(&mut generator);
    register::<ResponseItem>(&mut generator);
    register::<ThreadItem>(&mut generator);
    register::<ItemEnvelope>(&mut generator);
    let mut schemas = generator.take_definitions(true);
    // A thread's routes take its id from the path, not the body.
    for (params, body) in [
        ("TurnStartParams", "TurnStartBody"),
        ("ThreadForkParams", "ThreadForkBody"),
        ("ThreadRevertParams", "ThreadRevertBody"),
    ] {
        let mut schema = schemas[params].clone();
        if let Some(props) = schema["properties"].as_object_mut() {
            props.remove("threadId");
        }
        if let Some(required) = schema["required"].as_array_mut() {
            required.retain(|r| r != "threadId");
        }
        schemas.insert(body.to_owned(), schema);
    }
    schemas.extend(own_schemas());
    let mut paths = Map::new();
    for route in ROUTES {
        let entry = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[route.method] = operation(route);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "spool HTTP API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Threads, turns streamed as Server-Sent Events (id: seq, event: \
                method, data: the JSON-RPC notification), resumable event streams, items in \
                a view, approvals. WebSocket JSON-RPC (Codex app-server v2) is on /ws. \
                A request carrying a foreign Origin is refused (403), one addressed to \
                another Host (421), a POST without Content-Type: application/json (415).",
        },
        "security": [{}, {"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    })
}

fn operation(route: &Route) -> Value {
    let mut parameters: Vec<Value> = route
        .path
        .split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    parameters.extend(route.params.iter().map(|p| {
        json!({"name": p.name, "in": p.place, "required": false,
               "description": p.about, "schema": {"type": p.kind}})
    }));
    let mut responses = Map::new();
    match &route.answer {
        Answer::Json(status, schema) => {
            let schema = match schema {
                Schema::Named(name) => reference(name),
                Schema::Empty => json!({"type": "object"}),
            };
            responses.insert(
                status.to_string(),
                json!({"description": "OK", "content": {"application/json": {"schema": schema}}}),
            );
        }
        Answer::Events => {
            responses.insert(
                "200".to_owned(),
                json!({
                    "description": "An SSE stream: id = seq, event = the method, data = a \
                        ServerNotification as JSON-RPC (or a ServerRequest, without an id).",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                }),
            );
        }
        Answer::File => {
            responses.insert(
                "200".to_owned(),
                json!({
                    "description": "The file (text/html for /), with an ETag, Cache-Control: \
                        no-cache and a Content-Security-Policy that lets it load only its own \
                        scripts and styles and talk only to this server.",
                    "content": {"*/*": {"schema": {"type": "string"}}},
                }),
            );
            responses.insert(
                "304".to_owned(),
                json!({"description": "Not modified: If-None-Match named its ETag."}),
            );
        }
    }
    // 403 (a foreign Origin) and 421 (another Host) come from the guard in
    // front of every route, 415 (not JSON) on every state change.
    let post_only: &[u16] = if route.method == "post" { &[415] } else { &[] };
    let mut errors = [400, 401, 403, 421, 500].to_vec();
    errors.extend(post_only.iter().chain(route.errors));
    errors.sort_unstable();
    for status in errors {
        responses.insert(
            status.to_string(),
            json!({"description": "An error", "content": {"application/json": {"schema": reference("Error")}}}),
        );
    }
    let mut op = json!({
        "operationId": route.operation,
        "summary": route.summary,
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(body) = route.body {
        op["requestBody"] = json!({
            // Required: a state change without `Content-Type:
            // application/json` is refused (415), so even an empty one is
            // sent, as `{}`.
            "required": route.method == "post",
            "content": {"application/json": {"schema": reference(body)}},
        });
    }
    if route.path == "/v1/openapi.json" || matches!(route.answer, Answer::File) {
        op["security"] = json!([]);
    }
    op
}

/// Schemas of the HTTP API's own shapes.
fn own_schemas() -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "Error".to_owned(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "description": "bad_request, unauthorized, forbidden_origin, not_found, conflict, busy, not_running, already_answered, unsupported_media_type, misdirected_request, shutting_down, internal"},
                    "message": {"type": "string"},
                },
            }},
        }),
    );
    out.insert(
        "EmptyBody".to_owned(),
        json!({"type": "object", "description": "{}: nothing to say, but a POST is JSON"}),
    );
    out.insert(
        "ItemRecord".to_owned(),
        json!({
            "type": "object",
            "required": ["threadId", "turnId", "ordinal", "seq", "item", "envelope"],
            "properties": {
                "threadId": {"type": "string"},
                "turnId": {"type": "string"},
                "ordinal": {"type": "integer", "description": "seq of the item's item/started"},
                "seq": {"type": "integer", "description": "seq of the item's last change"},
                "item": reference("ThreadItem"),
                "envelope": reference("ItemEnvelope"),
                "tokenCount": {"type": "integer"},
            },
        }),
    );
    out.insert(
        "ItemsPage".to_owned(),
        json!({
            "type": "object",
            "required": ["view", "data"],
            "properties": {
                "view": {"enum": ["all", "client", "llm"]},
                "data": {
                    "type": "array",
                    "description": "ItemRecords (all, client) or ResponseItems (llm)",
                    "items": {"anyOf": [reference("ItemRecord"), reference("ResponseItem")]},
                },
                "totalTokens": {"type": "integer"},
                "turnsIncluded": {"type": "integer"},
                "turnsOmitted": {"type": "integer"},
                "nextCursor": {
                    "type": ["integer", "null"],
                    "description": "a page only (after or limit given): the after of the next \
                        page, null at the end",
                },
            },
        }),
    );
    out.insert(
        "LogPage".to_owned(),
        json!({
            "type": "object",
            "required": ["data", "nextCursor", "lastSeq"],
            "properties": {
                "lastSeq": {
                    "type": "integer",
                    "description": "the thread's last committed seq when the page was read: \
                        every read after it reflects at least this seq, so a reader that \
                        pages the items next follows the live events after it",
                },
                "data": {
                    "type": "array",
                    "description": "committed events in seq order, as JSON-RPC notifications \
                        with params.seq",
                    "items": reference("ServerNotification"),
                },
                "nextCursor": {
                    "type": ["integer", "null"],
                    "description": "the after of the next page (the last seq of a full \
                        page), null once the log's end was reached",
                },
            },
        }),
    );
    out
}

/// The document as committed (pretty, final newline).
// Invariant: the document is built from `Value`s, which always serialize.
#[allow(clippy::expect_used)]
pub fn render() -> String {
    let mut text = serde_json::to_string_pretty(&openapi()).expect("the document serializes");
    text.push('\n');
    text
}
