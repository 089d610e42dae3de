//! The HTTP API (`http://` listeners): threads, turns answered with an SSE
//! stream, resumable event streams, a thread's history in pages (turns,
//! items in a view, the event log), forks and reverts, approvals,
//! interrupts, the OpenAPI document, health probes, WebSocket JSON-RPC on
//! `/ws`, and the trace viewer's page on `/`.
//!
//! An HTTP client opts in to spool's additions implicitly: SSE events carry
//! `seq` as their `id:` (the `Last-Event-ID` cursor), and spool's item
//! kinds and envelopes are included.

pub(crate) mod error;
mod history;
pub mod openapi;
mod sse;
mod threads;
mod viewer;

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;

use crate::auth::{self, AuthToken};
use crate::guard::{self, Guard};
use crate::hub::Hub;
use crate::shutdown::Shutdown;
use error::ApiError;

/// What every handler of a listener shares.
#[derive(Clone)]
pub(crate) struct App {
    pub hub: Arc<Hub>,
    pub shutdown: Shutdown,
}

/// The router of an `http://` listener. Every route but the probes passes
/// the guard (host, origin, media type) first, then the token; the
/// viewer's page needs no token (see `viewer.rs`).
pub(crate) fn router(app: App, token: Option<AuthToken>, guard: Guard) -> Router {
    let api = Router::new()
        .route(
            "/v1/threads",
            get(history::list_threads).post(threads::create),
        )
        .route("/v1/threads/{id}", get(threads::read))
        .route(
            "/v1/threads/{id}/turns",
            get(history::list_turns).post(threads::start_turn),
        )
        .route(
            "/v1/threads/{id}/turns/{turn_id}/interrupt",
            post(threads::interrupt),
        )
        .route("/v1/threads/{id}/events", get(threads::events))
        .route("/v1/threads/{id}/items", get(history::items))
        .route("/v1/threads/{id}/log", get(history::log))
        .route("/v1/threads/{id}/fork", post(history::fork))
        .route("/v1/threads/{id}/revert", post(history::revert))
        .route(
            "/v1/threads/{id}/requests/{request_id}",
            post(threads::answer),
        )
        .route("/ws", get(crate::ws::upgrade))
        .fallback(not_found)
        .layer(from_fn_with_state(token, auth::require))
        .with_state(app.clone());
    let guarded = Router::new()
        .route("/v1/openapi.json", get(openapi_document))
        .route("/", get(viewer::index))
        .route("/viewer/{file}", get(viewer::file))
        .merge(api)
        .layer(from_fn_with_state(guard, guard::check));
    probes(app)
        .merge(guarded)
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
        ]))
}

/// The router of a `ws://` listener: WebSocket JSON-RPC on every path but
/// the probes, behind the guard and the token.
pub(crate) fn ws_router(app: App, token: Option<AuthToken>, guard: Guard) -> Router {
    let socket = Router::new()
        .route("/", get(crate::ws::upgrade))
        .fallback(crate::ws::upgrade)
        .layer(from_fn_with_state(token, auth::require))
        .layer(from_fn_with_state(guard, guard::check))
        .with_state(app.clone());
    probes(app)
        .merge(socket)
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
        ]))
}

/// `/healthz` (the process answers) and `/readyz` (it takes new work),
/// plain HTTP without a token and outside the guard, for load balancers
/// and orchestrators (which address a listener by names of their own); they
/// reveal nothing a page could use.
fn probes(app: App) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let serving = app.shutdown.is_serving();
                async move {
                    if serving {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
                    }
                }
            }),
        )
}

async fn openapi_document() -> Response {
    axum::Json(openapi::openapi()).into_response()
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}
