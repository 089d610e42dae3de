//! Questions a server asks during a call (MCP's `elicitation/create`),
//! put to whoever the call's caller names.
//!
//! MCP does not say which call a question belongs to (on stdio nothing
//! ties the two), so a question goes to the call most recently started on
//! the connection that is still running and has someone to ask; with none,
//! it is declined. spool declares the capability (form and URL questions)
//! so that servers ask at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation,
    UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::Value;
use spool_tools::mcp::McpElicit;

/// Who may be asked, by call.
#[derive(Default)]
pub(crate) struct Askers {
    next: AtomicU64,
    /// In the order the calls started.
    calls: Mutex<Vec<(u64, McpElicit)>>,
}

impl Askers {
    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<(u64, McpElicit)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names who answers the questions of a call, until the returned guard
    /// is dropped (the call ended).
    pub fn register(self: &Arc<Self>, asker: McpElicit) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.calls().push((id, asker));
        Registered {
            askers: self.clone(),
            id,
        }
    }

    fn latest(&self) -> Option<McpElicit> {
        self.calls().last().map(|(_, asker)| asker.clone())
    }
}

pub(crate) struct Registered {
    askers: Arc<Askers>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.askers.calls().retain(|(id, _)| *id != self.id);
    }
}

/// spool's side of an MCP session: answers questions through [`Askers`].
#[derive(Clone)]
pub(crate) struct Handler {
    pub askers: Arc<Askers>,
}

impl ClientHandler for Handler {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(asker) = self.askers.latest() else {
            return Ok(declined());
        };
        let params = serde_json::to_value(&request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let answer = asker(params).await;
        Ok(result_of(answer))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::default()),
        );
        ClientConfig::new(
            capabilities,
            Implementation::new("spool", env!("CARGO_PKG_VERSION")),
        )
    }
}

fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

/// MCP's result from an answer; anything unreadable is a decline.
fn result_of(answer: Value) -> ElicitResult {
    let action = match answer.get("action").and_then(Value::as_str) {
        Some("accept") => ElicitationAction::Accept,
        Some("cancel") => ElicitationAction::Cancel,
        _ => return declined(),
    };
    let content = match action {
        ElicitationAction::Accept => answer.get("content").filter(|c| !c.is_null()).cloned(),
        _ => None,
    };
    match content {
        Some(content) => ElicitResult::new(action).with_content(content),
        None => ElicitResult::new(action),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_become_results_and_nonsense_is_a_decline() {
        let accepted = result_of(json!({"action": "accept", "content": {"name": "Ada"}}));
        assert_eq!(accepted.action, ElicitationAction::Accept);
        assert_eq!(accepted.content, Some(json!({"name": "Ada"})));
        let cancelled = result_of(json!({"action": "cancel", "content": {"x": 1}}));
        assert_eq!(cancelled.action, ElicitationAction::Cancel);
        assert_eq!(cancelled.content, None);
        assert_eq!(
            result_of(json!({"decision": "accept"})).action,
            ElicitationAction::Decline
        );
    }

    #[test]
    fn the_latest_running_call_is_asked() {
        let askers = Arc::new(Askers::default());
        let asker = |label: &'static str| -> McpElicit {
            Arc::new(move |_| Box::pin(async move { json!({"action": label}) }))
        };
        assert!(askers.latest().is_none());
        let first = askers.register(asker("accept"));
        let second = askers.register(asker("cancel"));
        let ask = |askers: &Askers| {
            let asker = askers.latest().unwrap();
            futures_util::FutureExt::now_or_never(asker(Value::Null)).unwrap()
        };
        assert_eq!(ask(&askers)["action"], "cancel");
        drop(second);
        assert_eq!(ask(&askers)["action"], "accept");
        drop(first);
        assert!(askers.latest().is_none());
    }
}
