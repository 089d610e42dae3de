//! The JSON-RPC methods (Codex app-server v2 names and shapes).
//!
//! Every v2 method of [`ClientRequest`] is served: here `initialize`,
//! `thread/start`, `thread/resume` (with spool's `afterSeq` replay),
//! `thread/read`, `thread/list`, `turn/start`, `turn/interrupt`;
//! `history` pages turns and items (`thread/turns/list`,
//! `thread/items/list`); `reshape` renames, archives, reverts and steers;
//! `fork` copies a thread's history into a new one; `review` runs
//! `review/start`; `requirements` answers `configRequirements/read`;
//! `surface` answers the reads a Codex client makes before its first turn
//! (account, config, models, skills, hooks, loaded threads) and
//! `thread/unsubscribe`.
//!
//! Every method that sets what a thread runs with checks it against the
//! operator's ceilings (`Hub::admit`, `crate::ceilings`) before it creates
//! or starts anything.
//!
//! A turn whose items were all removed (a revert, a rollback, the Session
//! API's `pop_item` or `clear`) is no longer part of the history: reads
//! leave it out. Every turn the runtime starts holds its user message, so
//! no other turn is empty once it has finished.

mod fork;
mod history;
pub mod mcp;
mod requirements;
mod reshape;
mod review;
mod surface;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use spool_core::{ItemRecord, TurnRecord, View};
use spool_protocol::jsonrpc::{JsonRpcRequest, RequestId, error_codes};
use spool_protocol::*;
use spool_store::{NewThread, Store, ThreadListQuery, ThreadSortKey as StoreSortKey};

use crate::ceilings::{CeilingError, Fields};
use crate::connection::ConnectionState;
use crate::filter::Capabilities;
use crate::hub::{Hub, HubError, ThreadSettings};

/// A method's failure, as the reply says it.
pub(crate) struct MethodError {
    pub code: i64,
    pub message: String,
}

impl MethodError {
    fn invalid_params(message: impl Into<String>) -> Self {
        MethodError {
            code: error_codes::INVALID_PARAMS,
            message: message.into(),
        }
    }
}

impl From<HubError> for MethodError {
    fn from(error: HubError) -> Self {
        let code = match &error {
            HubError::Store(
                spool_store::StoreError::UnknownThread(_)
                | spool_store::StoreError::Refused { .. }
                | spool_store::StoreError::BadCursor(_),
            )
            | HubError::Busy(_)
            | HubError::NotRunning(_)
            | HubError::OtherTurnRunning { .. }
            | HubError::Invalid(_)
            | HubError::Ceiling(_) => error_codes::INVALID_PARAMS,
            HubError::Store(_) => error_codes::INTERNAL_ERROR,
        };
        MethodError {
            code,
            message: error.to_string(),
        }
    }
}

impl From<CeilingError> for MethodError {
    fn from(error: CeilingError) -> Self {
        HubError::Ceiling(error).into()
    }
}

impl From<spool_store::StoreError> for MethodError {
    fn from(error: spool_store::StoreError) -> Self {
        HubError::Store(error).into()
    }
}

/// A method's result as JSON text: encoded once, straight from the
/// response type (a `thread/resume` reply can be megabytes; building a
/// `Value` first and encoding that doubled its cost).
pub(crate) struct Reply(pub String);

impl Reply {
    /// The JSON-RPC response line that carries it.
    pub fn to_line(&self, id: &RequestId) -> String {
        let id = serde_json::to_string(id).unwrap_or_else(|_| "null".to_owned());
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{}}}", self.0)
    }
}

pub(crate) fn reply<T: Serialize>(value: T) -> Result<Reply, MethodError> {
    serde_json::to_string(&value)
        .map(Reply)
        .map_err(|e| MethodError {
            code: error_codes::INTERNAL_ERROR,
            message: format!("cannot encode the reply: {e}"),
        })
}

/// Reads a JSON-RPC request's method and params, and serves it.
pub(crate) async fn call(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    request: &JsonRpcRequest,
) -> Result<Reply, MethodError> {
    let call = ClientRequest::from_jsonrpc(request).map_err(|error| MethodError {
        code: error.code(),
        message: error.to_string(),
    })?;
    dispatch(hub, state, call).await
}

/// Serves one typed request for the connection in `state` (the HTTP API
/// builds its requests typed and comes in here).
pub(crate) async fn dispatch(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    call: ClientRequest,
) -> Result<Reply, MethodError> {
    // A thread another server holds: it runs the request (PostgreSQL).
    if let Some(thread_id) = crate::forward::needs_holder(&call)
        && let Some(holder) = hub
            .store()
            .held_elsewhere(thread_id)
            .await
            .map_err(HubError::from)?
    {
        return crate::forward::forward(hub, &holder, thread_id, &call).await;
    }
    match call {
        ClientRequest::Initialize(params) => initialize(state, params),
        ClientRequest::ThreadStart(params) => thread_start(hub, state, *params).await,
        ClientRequest::ThreadResume(params) => thread_resume(hub, state, *params).await,
        ClientRequest::ThreadRead(params) => thread_read(hub, params).await,
        ClientRequest::ThreadList(params) => thread_list(hub, *params).await,
        ClientRequest::TurnStart(params) => turn_start(hub, *params).await,
        ClientRequest::TurnInterrupt(params) => {
            hub.interrupt(&params.thread_id, &params.turn_id)?;
            reply(TurnInterruptResponse {})
        }
        ClientRequest::ThreadFork(params) => fork::thread_fork(hub, state, *params).await,
        ClientRequest::ThreadTurnsList(params) => history::turns_list(hub, state, params).await,
        ClientRequest::ThreadItemsList(params) => history::items_list(hub, state, params).await,
        ClientRequest::ThreadArchive(params) => reshape::archive(hub, params).await,
        ClientRequest::ThreadUnarchive(params) => reshape::unarchive(hub, params).await,
        ClientRequest::ThreadSetName(params) => reshape::set_name(hub, params).await,
        ClientRequest::ThreadRevert(params) => reshape::revert(hub, params).await,
        ClientRequest::ThreadRollback(params) => reshape::rollback(hub, params).await,
        ClientRequest::TurnSteer(params) => reshape::steer(hub, params).await,
        ClientRequest::ReviewStart(params) => review::review_start(hub, state, params).await,
        ClientRequest::ThreadCompactStart(params) => {
            thread_record(hub, &params.thread_id).await?;
            hub.start_compaction(&params.thread_id).await?;
            reply(ThreadCompactStartResponse {})
        }
        ClientRequest::ConfigRequirementsRead(_) => requirements::read(hub, state),
        ClientRequest::AccountRead(_) => surface::account(hub),
        ClientRequest::ConfigRead(_) => surface::config(hub),
        ClientRequest::ModelList(_) => surface::models(hub).await,
        ClientRequest::SkillsList(params) => surface::skills(hub, params),
        ClientRequest::HooksList(params) => surface::hooks(hub, params),
        ClientRequest::PluginList(_) => reply(PluginListResponse::default()),
        ClientRequest::CollaborationModeList(_) => reply(CollaborationModeListResponse::default()),
        ClientRequest::ThreadLoadedList(_) => surface::loaded(hub),
        ClientRequest::ThreadUnsubscribe(params) => surface::unsubscribe(hub, state, params),
        ClientRequest::ThreadDelete(params) => {
            thread_record(hub, &params.thread_id).await?;
            hub.delete_thread(&params.thread_id).await?;
            reply(ThreadDeleteResponse {})
        }
        ClientRequest::McpServerStatusList(params) => mcp::status_list(hub, params).await,
        ClientRequest::McpServerReload(_) => mcp::reload(hub).await,
        ClientRequest::McpServerToolCall(params) => {
            thread_record(hub, &params.thread_id).await?;
            mcp::tool_call(hub, params).await
        }
    }
}

fn initialize(state: &mut ConnectionState, params: InitializeParams) -> Result<Reply, MethodError> {
    state.opted_out_methods = params
        .capabilities
        .as_ref()
        .and_then(|c| c.opt_out_notification_methods.clone())
        .unwrap_or_default()
        .into_iter()
        .collect();
    let opted_out = params
        .capabilities
        .as_ref()
        .and_then(|c| c.opt_out_notification_methods.as_deref())
        .map_or(0, Capabilities::opt_out_mask);
    let asked = params
        .capabilities
        .and_then(|c| c.spool)
        .unwrap_or(SpoolCapabilities::NONE);
    let granted = asked.intersect(SpoolCapabilities {
        seq: true,
        views: true,
        application_items: true,
        provenance: true,
    });
    state.capabilities = Capabilities {
        seq: granted.seq,
        spool_items: granted.application_items || granted.provenance,
        opted_out,
    };
    state.spool_additions = granted != SpoolCapabilities::NONE;
    state
        .null_id_replies
        .store(state.spool_additions, std::sync::atomic::Ordering::Relaxed);
    state.initialized = true;
    reply(InitializeResponse {
        user_agent: format!("spool/{}", env!("CARGO_PKG_VERSION")),
        codex_home: std::env::var("SPOOL_HOME").unwrap_or_default(),
        platform_family: std::env::consts::FAMILY.to_owned(),
        platform_os: std::env::consts::OS.to_owned(),
        spool: (granted != SpoolCapabilities::NONE).then_some(granted),
    })
}

fn settings_of(
    model: Option<String>,
    cwd: Option<String>,
    approval_policy: Option<AskForApproval>,
    sandbox: Option<SandboxMode>,
    instructions: Option<String>,
) -> ThreadSettings {
    ThreadSettings {
        model,
        cwd,
        approval_policy,
        sandbox: sandbox.map(SandboxPolicy::from_mode),
        instructions,
        dynamic_tools: Vec::new(),
    }
}

async fn thread_start(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    params: ThreadStartParams,
) -> Result<Reply, MethodError> {
    let history_mode = history_owner(hub, &params)?;
    let settings = hub.admit(ThreadSettings {
        dynamic_tools: params.dynamic_tools.unwrap_or_default(),
        ..settings_of(
            params.model,
            params.cwd,
            params.approval_policy,
            params.sandbox,
            params.developer_instructions.or(params.base_instructions),
        )
    })?;
    let mut new = NewThread::new(
        hub.provider_name(),
        settings.cwd.clone().unwrap_or_default(),
    );
    new.model = settings.model.clone();
    new.ephemeral = params.ephemeral.unwrap_or(false);
    new.history_mode = history_mode;
    let record = hub.store().create_thread(new).await?;
    let thread_id = record.thread.id.clone();
    if let Some(conversation_id) = params.conversation_id {
        let history = spool_store::StoredHistory {
            conversation_id: Some(conversation_id),
            ..Default::default()
        };
        hub.store().set_history(&thread_id, &history).await?;
    }
    hub.set_settings(&thread_id, settings.clone());
    if record.thread.ephemeral {
        hub.mark_ephemeral(&thread_id);
    }
    // From seq 0: the client gets `thread/started` like any later event.
    hub.subscribe(
        &thread_id,
        state.id,
        Some(0),
        &state.deliveries,
        &state.room,
    )
    .await?;
    reply(session(hub, record.thread, settings))
}

/// Who owns the new thread's model history: refused here, not at the
/// first turn, when the provider cannot keep one.
fn history_owner(hub: &Hub, params: &ThreadStartParams) -> Result<HistoryMode, MethodError> {
    let mode = params
        .history_mode
        .and_then(ThreadStartHistoryMode::owner)
        .unwrap_or_default();
    if mode != HistoryMode::Replay && !hub.provider().keeps_history() {
        return Err(MethodError::invalid_params(format!(
            "historyMode {} needs a provider that keeps conversations (the Responses API); \
             provider {} does not (Chat Completions), so use historyMode replay",
            mode.as_str(),
            hub.provider_name()
        )));
    }
    if params.conversation_id.is_some() && mode != HistoryMode::ConversationId {
        return Err(MethodError::invalid_params(
            "conversationId is only meaningful with historyMode conversationId",
        ));
    }
    Ok(mode)
}

/// A thread with the settings it runs under, as `thread/start` answers
/// (`thread/resume` and `thread/fork` answer the same, see
/// `into_resume`/`into_fork`).
pub(crate) fn session(hub: &Hub, thread: Thread, settings: ThreadSettings) -> ThreadStartResponse {
    ThreadStartResponse {
        thread,
        model: settings.model.unwrap_or_default(),
        model_provider: hub.provider_name().to_owned(),
        service_tier: None,
        cwd: settings.cwd.unwrap_or_default(),
        instruction_sources: Vec::new(),
        approval_policy: settings.approval_policy.unwrap_or_default(),
        approvals_reviewer: ApprovalsReviewer::default(),
        sandbox: settings
            .sandbox
            .unwrap_or_else(|| SandboxPolicy::from_mode(SandboxMode::default())),
        reasoning_effort: None,
    }
}

async fn thread_resume(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    params: ThreadResumeParams,
) -> Result<Reply, MethodError> {
    let record = thread_record(hub, &params.thread_id).await?;
    // `thread/resume` declares no client tools: those of `thread/start`
    // stay.
    let settings = admit_existing(
        hub,
        ThreadSettings {
            dynamic_tools: hub.dynamic_tools(&params.thread_id),
            ..settings_of(
                params.model.or(record.thread.model.clone()),
                params.cwd,
                params.approval_policy,
                params.sandbox,
                params.developer_instructions.or(params.base_instructions),
            )
        },
        &record.thread.cwd,
    )?;
    hub.set_settings(&params.thread_id, settings.clone());
    // Only a client that asked for cursors can name one.
    let after = params.after_seq.filter(|_| state.capabilities.seq);
    hub.subscribe(
        &params.thread_id,
        state.id,
        after,
        &state.deliveries,
        &state.room,
    )
    .await?;
    let mut thread = record.thread;
    if !params.exclude_turns {
        thread.turns = turns_with_items(hub, &params.thread_id).await?;
    }
    // A run paused with its answers recorded meanwhile goes on.
    hub.resume_paused(&params.thread_id).await?;
    reply(session(hub, thread, settings).into_resume(None, None))
}

/// The settings a client asks for an existing thread (`thread/resume`,
/// `thread/fork`), admitted; without a `cwd` of its own it runs in the
/// thread's recorded one. That one is not checked for existence (it was
/// when the thread started; a directory removed since fails the thread's
/// turns, not its reads) but, with allowed roots set, it must lie within
/// them: a thread from before the ceilings does not escape them.
pub(super) fn admit_existing(
    hub: &Hub,
    asked: ThreadSettings,
    recorded_cwd: &str,
) -> Result<ThreadSettings, MethodError> {
    let asked_cwd = asked.cwd.is_some();
    let mut settings = hub.admit(asked)?;
    if !asked_cwd {
        let cwd = match hub.ceilings().allowed_roots() {
            Some(_) => hub.ceilings().check_cwd(recorded_cwd, "the thread's cwd")?,
            None => recorded_cwd.to_owned(),
        };
        settings.cwd = Some(cwd);
    }
    Ok(settings)
}

/// The thread's stored record, or -32602 when there is none.
async fn thread_record(
    hub: &Arc<Hub>,
    thread_id: &str,
) -> Result<spool_store::ThreadRecord, MethodError> {
    if let Some(record) = hub.store().thread(thread_id).await? {
        return Ok(record);
    }
    let deleted = hub.store().deleted_at(thread_id).await?.is_some();
    Err(MethodError::invalid_params(if deleted {
        format!("thread {thread_id} was deleted")
    } else {
        format!("no thread {thread_id}")
    }))
}

/// The thread's turns that are part of its history (see the module docs),
/// each with its items in `view`, oldest first.
async fn history_turns(
    hub: &Arc<Hub>,
    thread_id: &str,
    view: View,
) -> Result<Vec<(TurnRecord, Vec<ItemRecord>)>, MethodError> {
    let turns = hub.store().turns(thread_id).await?;
    // The thread's items are read once: which turns still have any, then
    // those of `view` (the store's `items(view)` is the same selection).
    let all = hub.store().items(thread_id, View::All).await?;
    let kept: HashSet<String> = all.iter().map(|r| r.turn_id.clone()).collect();
    let shown = spool_core::views::keep(all, view);
    let mut by_turn: HashMap<String, Vec<ItemRecord>> = HashMap::new();
    for record in shown {
        by_turn
            .entry(record.turn_id.clone())
            .or_default()
            .push(record);
    }
    Ok(turns
        .into_iter()
        .filter(|turn| !turn.status.is_terminal() || kept.contains(&turn.id))
        .map(|turn| {
            let items = by_turn.remove(&turn.id).unwrap_or_default();
            (turn, items)
        })
        .collect())
}

/// `turn/start` while `running` runs: its input becomes part of that
/// turn, and the reply is that turn as it stands.
async fn feed_into_running(
    hub: &Arc<Hub>,
    params: TurnStartParams,
    running: &str,
) -> Result<Reply, MethodError> {
    let thread_id = &params.thread_id;
    reshape::feed_running_turn(
        hub,
        thread_id,
        running,
        params.input,
        params.client_user_message_id,
    )
    .await?;
    let turn = hub
        .store()
        .turns(thread_id)
        .await?
        .into_iter()
        .find(|turn| turn.id == running)
        .map(|turn| turn.to_turn(Vec::new()))
        .ok_or_else(|| MethodError::invalid_params(format!("turn {running} is gone")))?;
    reply(TurnStartResponse { turn })
}

async fn turns_with_items(hub: &Arc<Hub>, thread_id: &str) -> Result<Vec<Turn>, MethodError> {
    Ok(history_turns(hub, thread_id, View::Client)
        .await?
        .into_iter()
        .map(|(turn, items)| {
            let of_turn = items
                .into_iter()
                .filter(|record| record.item.kind().is_codex_kind())
                .map(|record| record.item)
                .collect();
            turn.to_turn(of_turn)
        })
        .collect())
}

async fn thread_read(hub: &Arc<Hub>, params: ThreadReadParams) -> Result<Reply, MethodError> {
    let record = thread_record(hub, &params.thread_id).await?;
    let mut thread = record.thread;
    if params.include_turns {
        thread.turns = turns_with_items(hub, &params.thread_id).await?;
    }
    reply(ThreadReadResponse { thread })
}

async fn thread_list(hub: &Arc<Hub>, params: ThreadListParams) -> Result<Reply, MethodError> {
    let query = ThreadListQuery {
        limit: params.limit.unwrap_or(25).clamp(1, 200) as usize,
        sort_key: match params.sort_key {
            Some(ThreadSortKey::CreatedAt) | None => StoreSortKey::CreatedAt,
            Some(_) => StoreSortKey::UpdatedAt,
        },
        archived: params.archived.unwrap_or(false),
        cursor: params.cursor,
        search: params.search_term.filter(|term| !term.is_empty()),
    };
    let page = hub.store().list_threads(query).await.map_err(|e| match e {
        spool_store::StoreError::BadCursor(_) => MethodError::invalid_params(e.to_string()),
        other => other.into(),
    })?;
    reply(ThreadListResponse {
        data: page.threads.into_iter().map(|r| r.thread).collect(),
        next_cursor: page.next_cursor,
        backwards_cursor: None,
    })
}

async fn turn_start(hub: &Arc<Hub>, params: TurnStartParams) -> Result<Reply, MethodError> {
    if params.input.is_empty() {
        return Err(MethodError::invalid_params("turn/start needs some input"));
    }
    hub.check_input_size(&params.input)?;
    if hub.store().thread(&params.thread_id).await?.is_none() {
        return Err(MethodError::invalid_params(format!(
            "no thread {}",
            params.thread_id
        )));
    }
    // As in Codex, input sent while a turn runs goes into that turn (as a
    // steer would), and the reply is the running turn. Its overrides wait
    // for the next turn the client starts.
    if let Some(running) = hub.running_turn(&params.thread_id)
        && !running.is_empty()
    {
        return feed_into_running(hub, params, &running).await;
    }
    // Per-turn overrides stay for later turns too, as in Codex. Each is
    // checked before any is applied (and before the turn starts); what the
    // thread already runs with was checked when it was set.
    let asked = ThreadSettings {
        cwd: params.cwd.clone(),
        approval_policy: params.approval_policy,
        ..ThreadSettings::default()
    };
    let admitted = hub
        .ceilings()
        .check_thread_settings(asked, &Fields::CLIENT)?;
    let mut settings = hub.thread_settings(&params.thread_id);
    if let Some(cwd) = admitted.cwd {
        settings.cwd = Some(cwd);
    }
    if let Some(sandbox) = &params.sandbox_policy {
        hub.ceilings()
            .check_sandbox_policy(sandbox, settings.cwd.as_deref())?;
        settings.sandbox = Some(sandbox.clone());
    }
    if let Some(model) = params.model.clone() {
        settings.model = Some(model);
    }
    if let Some(policy) = admitted.approval_policy {
        settings.approval_policy = Some(policy);
    }
    hub.set_settings(&params.thread_id, settings);
    let turn = hub.start_turn(&params.thread_id, params.input).await?;
    reply(TurnStartResponse { turn })
}
