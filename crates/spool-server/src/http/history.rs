//! The handlers of a thread's history over HTTP: threads listed with
//! filters, turns and items one page at a time, the event log one page at
//! a time, and forking and reverting a thread. Those with a JSON-RPC
//! method behind them build its typed request and answer with its reply as
//! the method wrote it; items and the log are read from the store.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use spool_core::View;
use spool_core::llm::LlmViewOptions;
use spool_protocol::{
    ClientRequest, ItemsView, SortDirection, ThreadForkParams, ThreadListParams,
    ThreadRevertParams, ThreadSortKey, ThreadTurnsListParams, TurnItemsView,
};
use spool_store::{Appended, Store};

use super::App;
use super::error::ApiError;
use super::sse::HTTP_CAPABILITIES;
use super::threads::{Result, call, ensure_thread, params_of, query, respond_with};
use crate::filter::for_client;

/// Records of one items page when `limit` is not given, and the most.
const ITEMS_PAGE: usize = 200;
const MAX_ITEMS_PAGE: usize = 1_000;
/// Events of one log page when `limit` is not given, and the most.
const LOG_PAGE: usize = 500;
const MAX_LOG_PAGE: usize = 2_000;

type Q<T> = std::result::Result<Query<T>, QueryRejection>;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListQuery {
    cursor: Option<String>,
    limit: Option<u32>,
    archived: Option<bool>,
    search: Option<String>,
    sort_key: Option<ThreadSortKey>,
}

/// `GET /v1/threads?cursor=&limit=&archived=&search=&sortKey=`:
/// `thread/list`.
pub(crate) async fn list_threads(State(app): State<App>, q: Q<ListQuery>) -> Result<Response> {
    let q = query(q)?;
    let params = ThreadListParams {
        cursor: q.cursor,
        limit: q.limit,
        archived: q.archived,
        search_term: q.search,
        sort_key: q.sort_key,
        ..ThreadListParams::default()
    };
    let reply = call(&app, ClientRequest::ThreadList(Box::new(params))).await?;
    Ok(respond_with(StatusCode::OK, reply))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TurnsQuery {
    cursor: Option<String>,
    limit: Option<u32>,
    sort_direction: Option<SortDirection>,
    items_view: Option<TurnItemsView>,
}

/// `GET /v1/threads/{id}/turns?cursor=&limit=&sortDirection=&itemsView=`:
/// `thread/turns/list`.
pub(crate) async fn list_turns(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    q: Q<TurnsQuery>,
) -> Result<Response> {
    let q = query(q)?;
    ensure_thread(&app, &thread_id).await?;
    let params = ThreadTurnsListParams {
        thread_id,
        cursor: q.cursor,
        limit: q.limit,
        sort_direction: q.sort_direction,
        items_view: q.items_view,
        view: None,
        tokens: None,
    };
    let reply = call(&app, ClientRequest::ThreadTurnsList(params)).await?;
    Ok(respond_with(StatusCode::OK, reply))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ItemsQuery {
    view: Option<ItemsView>,
    tokens: Option<usize>,
    after: Option<u64>,
    limit: Option<usize>,
}

/// `GET /v1/threads/{id}/items?view=all|client|llm&tokens=N&after=&limit=`.
/// `all` and `client` list item records: all of them, or with `after`
/// (an ordinal) or `limit` one page, whose `nextCursor` is the `after` of
/// the next (`null` at the end). `llm` is the next model request's input,
/// under the token budget when given; it is not paged.
pub(crate) async fn items(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    q: Q<ItemsQuery>,
) -> Result<Json<Value>> {
    let q = query(q)?;
    let named = q.view.unwrap_or_default();
    let view = View::from(named);
    let paged = q.after.is_some() || q.limit.is_some();
    if view == View::Llm && paged {
        return Err(ApiError::bad_request(
            "after and limit page view=all or view=client; view=llm is one model request's \
             input, cut by tokens",
        ));
    }
    if view != View::Llm && q.tokens.is_some() {
        return Err(ApiError::bad_request("tokens applies to view=llm only"));
    }
    let limit = q.limit.unwrap_or(ITEMS_PAGE);
    if !(1..=MAX_ITEMS_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be 1 to {MAX_ITEMS_PAGE}"
        )));
    }
    ensure_thread(&app, &thread_id).await?;
    let store = app.hub.store();
    if view == View::Llm {
        let options = LlmViewOptions {
            token_budget: q.tokens,
            ..LlmViewOptions::default()
        };
        let llm = store.llm_view(&thread_id, options).await?;
        return Ok(Json(json!({
            "view": "llm",
            "data": llm.input,
            "totalTokens": llm.total_tokens,
            "turnsIncluded": llm.turns_included,
            "turnsOmitted": llm.turns_omitted,
        })));
    }
    if !paged {
        let records = store.items(&thread_id, view).await?;
        return Ok(Json(json!({"view": named, "data": records})));
    }
    let page = store
        .items_page(&thread_id, view, q.after.unwrap_or(0), limit)
        .await?;
    Ok(Json(json!({
        "view": named,
        "data": page.items,
        "nextCursor": page.next_after,
    })))
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

/// `GET /v1/threads/{id}/log?after=SEQ&limit=N`: committed events after
/// the seq, each as the `data:` of `/v1/threads/{id}/events` carries it;
/// `nextCursor` is the last seq of a full page (`null` once fewer came
/// back: the log's end, for now).
pub(crate) async fn log(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    q: Q<LogQuery>,
) -> Result<Json<Value>> {
    let q = query(q)?;
    let limit = q.limit.unwrap_or(LOG_PAGE);
    if !(1..=MAX_LOG_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be 1 to {MAX_LOG_PAGE}"
        )));
    }
    ensure_thread(&app, &thread_id).await?;
    let store = app.hub.store();
    // Acknowledged deltas are streamed before a group commit covers them:
    // a page must have every event a live stream could have shown.
    store.flush().await?;
    // Where a reader that pages the items next can start the live stream:
    // every read after this reflects at least this seq.
    let last_seq = store.thread(&thread_id).await?.map_or(0, |t| t.last_seq);
    let events = store
        .events_after(&thread_id, q.after.unwrap_or(0), limit)
        .await?;
    let next_cursor = match events.last() {
        Some(last) if events.len() == limit => Some(last.seq),
        _ => None,
    };
    let data: Vec<Value> = events
        .into_iter()
        .filter_map(|event| for_client(&Appended::Logged(event), &HTTP_CAPABILITIES))
        .collect();
    Ok(Json(
        json!({"data": data, "nextCursor": next_cursor, "lastSeq": last_seq}),
    ))
}

/// `POST /v1/threads/{id}/fork`: `thread/fork` (without `threadId`); the
/// new thread's result, 201.
pub(crate) async fn fork(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Response> {
    if !app.shutdown.is_serving() {
        return Err(ApiError::shutting_down());
    }
    ensure_thread(&app, &thread_id).await?;
    let params: ThreadForkParams = params_of("thread/fork", &body, Some(&thread_id))?;
    let reply = call(&app, ClientRequest::ThreadFork(Box::new(params))).await?;
    Ok(respond_with(StatusCode::CREATED, reply))
}

/// `POST /v1/threads/{id}/revert`: `thread/revert` (`{"beforeTurnId"}`):
/// that turn and every later one leave the thread's history.
pub(crate) async fn revert(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Response> {
    ensure_thread(&app, &thread_id).await?;
    let params: ThreadRevertParams = params_of("thread/revert", &body, Some(&thread_id))?;
    let reply = call(&app, ClientRequest::ThreadRevert(params)).await?;
    Ok(respond_with(StatusCode::OK, reply))
}
