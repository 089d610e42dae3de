//! The reads a Codex client makes before its first turn, answered with
//! what this server really has (see `client_requests/surface.rs` in the
//! protocol crate for each shape).

use std::sync::Arc;
use std::time::Duration;

use spool_protocol::*;

use super::{MethodError, Reply, reply};
use spool_store::Appended;

use crate::connection::ConnectionState;
use crate::hub::{Delivery, Hub};

/// How long `model/list` waits for the provider's own list before it
/// answers with the configured model alone.
const MODEL_LIST_WAIT: Duration = Duration::from_secs(3);

pub(super) fn account(hub: &Hub) -> Result<Reply, MethodError> {
    reply(GetAccountResponse {
        account: hub.facts().uses_api_key.then_some(Account::ApiKey),
        requires_openai_auth: false,
    })
}

pub(super) fn config(hub: &Hub) -> Result<Reply, MethodError> {
    let defaults = hub.defaults();
    reply(ConfigReadResponse {
        config: EffectiveConfig {
            model: defaults.model.clone(),
            model_provider: Some(hub.provider_name().to_owned()),
            approval_policy: defaults.approval_policy,
            sandbox_mode: defaults.sandbox.as_ref().map(SandboxPolicy::mode),
            developer_instructions: defaults.instructions.clone(),
        },
        origins: hub.facts().origins.clone(),
        layers: None,
    })
}

/// The provider's models when it lists them (the local model server and
/// OpenAI do), the configured model first and marked default; else the
/// configured model alone.
pub(super) async fn models(hub: &Hub) -> Result<Reply, MethodError> {
    let configured = hub.defaults().model.clone().unwrap_or_default();
    let listed = tokio::time::timeout(MODEL_LIST_WAIT, hub.provider().list_models())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut ids = vec![configured.clone()];
    ids.extend(listed.into_iter().filter(|id| *id != configured));
    let data = ids
        .into_iter()
        .filter(|id| !id.is_empty())
        .map(|id| Model {
            is_default: id == configured,
            description: format!("{} through spool's provider {}", id, hub.provider_name()),
            display_name: id.clone(),
            model: id.clone(),
            id,
            hidden: false,
            default_reasoning_effort: "none".to_owned(),
            supported_reasoning_efforts: vec![ReasoningEffortOption {
                reasoning_effort: "none".to_owned(),
                description: "spool sends no reasoning effort".to_owned(),
            }],
        })
        .collect();
    reply(ModelListResponse {
        data,
        next_cursor: None,
    })
}

/// The folders asked about, else the server's own.
fn cwds(hub: &Hub, params: CwdsParams) -> Vec<String> {
    if params.cwds.is_empty() {
        hub.defaults().cwd.iter().cloned().collect()
    } else {
        params.cwds
    }
}

pub(super) fn skills(hub: &Hub, params: CwdsParams) -> Result<Reply, MethodError> {
    let data = cwds(hub, params)
        .into_iter()
        .map(|cwd| SkillsListEntry {
            cwd,
            skills: Vec::new(),
            errors: Vec::new(),
        })
        .collect();
    reply(SkillsListResponse { data })
}

pub(super) fn hooks(hub: &Hub, params: CwdsParams) -> Result<Reply, MethodError> {
    let data = cwds(hub, params)
        .into_iter()
        .map(|cwd| HooksListEntry {
            cwd,
            hooks: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        })
        .collect();
    reply(HooksListResponse { data })
}

pub(super) fn loaded(hub: &Hub) -> Result<Reply, MethodError> {
    reply(ThreadLoadedListResponse {
        data: hub.loaded_threads(),
        next_cursor: None,
    })
}

pub(super) fn unsubscribe(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    params: ThreadUnsubscribeParams,
) -> Result<Reply, MethodError> {
    let done = hub.unsubscribe(&params.thread_id, state.id);
    if done.closed {
        // After the reply, as Codex sends it: the thread is unloaded.
        let closed = ServerNotification::ThreadClosed(ThreadClosedNotification {
            thread_id: params.thread_id.clone(),
        });
        let _ = state
            .deliveries
            .send(Delivery::Event(Appended::Transient(closed)));
    }
    reply(ThreadUnsubscribeResponse {
        status: done.status,
    })
}
