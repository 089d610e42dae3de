//! The handlers of `/v1/threads…`. Thread and turn requests are served by
//! the JSON-RPC methods (same params, same results): each handler builds
//! the typed request and answers with the reply's JSON as the method wrote
//! it; errors are JSON with the status that fits.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use spool_protocol::{
    ClientRequest, ClientRequestError, ThreadReadParams, ThreadStartParams, TurnStartParams,
    TurnStartResponse,
};
use spool_store::Store;

use super::App;
use super::error::ApiError;
use super::sse::{self, Watch};
use crate::answers::answer_of;
use crate::connection::ConnectionState;
use crate::hub::HubError;
use crate::methods::{self, Reply};

pub(super) type Result<T> = std::result::Result<T, ApiError>;

/// Serves a request as an initialized client that opted in to everything,
/// and forgets the call's connection afterwards.
pub(super) async fn call(app: &App, request: ClientRequest) -> Result<Reply> {
    let mut state = ConnectionState::new();
    state.initialized = true;
    state.capabilities = sse::HTTP_CAPABILITIES;
    state.spool_additions = true;
    let result = methods::dispatch(&app.hub, &mut state, request).await;
    app.hub.unsubscribe_all(state.id);
    Ok(result?)
}

/// A reply's JSON as the response body, as the method wrote it.
pub(super) fn respond_with(status: StatusCode, reply: Reply) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        reply.0,
    )
        .into_response()
}

/// A JSON object body read as the params of `method`, an empty body as
/// `{}`; `thread_id`, from the path, is set as its `threadId` first.
pub(super) fn params_of<T: DeserializeOwned>(
    method: &'static str,
    body: &Bytes,
    thread_id: Option<&str>,
) -> Result<T> {
    let mut params = object_body(body)?;
    if let Some(thread_id) = thread_id {
        params.insert("threadId".to_owned(), thread_id.into());
    }
    serde_json::from_value(Value::Object(params)).map_err(|e| {
        let error = ClientRequestError::InvalidParams {
            method,
            message: e.to_string(),
        };
        ApiError::bad_request(error.to_string())
    })
}

/// A JSON object body; an empty body is `{}`.
fn object_body(body: &Bytes) -> Result<Map<String, Value>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ApiError::bad_request("the body must be a JSON object")),
        Err(error) => Err(ApiError::bad_request(format!(
            "the body is not JSON: {error}"
        ))),
    }
}

pub(super) fn query<T>(query: std::result::Result<Query<T>, QueryRejection>) -> Result<T> {
    query
        .map(|Query(q)| q)
        .map_err(|rejection| ApiError::bad_request(rejection.body_text()))
}

pub(super) async fn ensure_thread(app: &App, thread_id: &str) -> Result<()> {
    match app.hub.store().thread(thread_id).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("no thread {thread_id}"))),
    }
}

/// `POST /v1/threads`: `thread/start`'s params in, its result out.
pub(crate) async fn create(State(app): State<App>, body: Bytes) -> Result<Response> {
    if !app.shutdown.is_serving() {
        return Err(ApiError::shutting_down());
    }
    let params: ThreadStartParams = params_of("thread/start", &body, None)?;
    let reply = call(&app, ClientRequest::ThreadStart(Box::new(params))).await?;
    Ok(respond_with(StatusCode::CREATED, reply))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadQuery {
    include_turns: Option<bool>,
}

/// `GET /v1/threads/{id}?includeTurns=true|false`: `thread/read`, with its
/// turns unless told not to (a viewer of a big thread pages them instead).
pub(crate) async fn read(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    q: std::result::Result<Query<ReadQuery>, QueryRejection>,
) -> Result<Response> {
    let q = query(q)?;
    ensure_thread(&app, &thread_id).await?;
    let params = ThreadReadParams {
        thread_id,
        include_turns: q.include_turns.unwrap_or(true),
    };
    let reply = call(&app, ClientRequest::ThreadRead(params)).await?;
    Ok(respond_with(StatusCode::OK, reply))
}

/// `POST /v1/threads/{id}/turns`: `turn/start` (without `threadId`); the
/// response is the turn's SSE stream, `turn/started` to `turn/completed`.
pub(crate) async fn start_turn(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Response> {
    if !app.shutdown.is_serving() {
        return Err(ApiError::shutting_down());
    }
    ensure_thread(&app, &thread_id).await?;
    let params: TurnStartParams = params_of("turn/start", &body, Some(&thread_id))?;
    if app.hub.running_turns().iter().any(|(t, _)| *t == thread_id) {
        return Err(HubError::Busy(thread_id).into());
    }
    // Watch before the turn starts: nothing of it can be missed.
    let watch = Watch::start(&app.hub, &thread_id, None).await?;
    let reply = call(&app, ClientRequest::TurnStart(Box::new(params))).await?;
    let started: TurnStartResponse = serde_json::from_str(&reply.0)
        .map_err(|e| ApiError::internal(format!("cannot read turn/start's reply: {e}")))?;
    Ok(sse::respond(watch, Some(started.turn.id), app.shutdown.clone()).into_response())
}

#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    after: Option<u64>,
}

/// `GET /v1/threads/{id}/events`: every event after the cursor
/// (`Last-Event-ID`, else `?after=`, else from the start), then live ones,
/// with no gap and no duplicate.
pub(crate) async fn events(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    headers: HeaderMap,
    q: std::result::Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response> {
    let q = query(q)?;
    let after = match headers.get("last-event-id") {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be a seq (a number)"))?,
        None => q.after.unwrap_or(0),
    };
    ensure_thread(&app, &thread_id).await?;
    let watch = Watch::start(&app.hub, &thread_id, Some(after)).await?;
    Ok(sse::respond(watch, None, app.shutdown.clone()).into_response())
}

/// `POST /v1/threads/{id}/requests/{requestId}`: answers an approval or a
/// client tool call; the body is the answer (`{"decision": "accept"}`).
pub(crate) async fn answer(
    State(app): State<App>,
    Path((thread_id, request_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>> {
    let value = Value::Object(object_body(&body)?);
    let Some(request) = app.hub.store().request(&thread_id, &request_id).await? else {
        return Err(ApiError::not_found(format!(
            "thread {thread_id} has no request {request_id}"
        )));
    };
    if request.answer.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_answered",
            format!("request {request_id} was already answered"),
        ));
    }
    let answer = answer_of(&request.request, value)
        .map_err(|e| ApiError::bad_request(format!("not an answer to this request: {e}")))?;
    if app.hub.answer(&request_id, answer.clone()).await.is_err() {
        // No run waits on it in this process: record it, resume the run.
        app.hub
            .answer_paused(&thread_id, &request_id, answer)
            .await?;
    }
    Ok(Json(json!({})))
}

/// `POST /v1/threads/{id}/turns/{turnId}/interrupt`.
pub(crate) async fn interrupt(
    State(app): State<App>,
    Path((thread_id, turn_id)): Path<(String, String)>,
) -> Result<Json<Value>> {
    ensure_thread(&app, &thread_id).await?;
    app.hub.interrupt(&thread_id, &turn_id).map_err(|_| {
        ApiError::conflict(format!(
            "turn {turn_id} of thread {thread_id} is not running"
        ))
    })?;
    Ok(Json(json!({})))
}
