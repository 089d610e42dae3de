//! `spool serve`: the app server (Codex app-server v2 JSON-RPC).
//!
//! Only `stdio://` is served so far; other listeners are refused with a
//! clear error rather than ignored.

use std::sync::Arc;

use anyhow::bail;
use spool_runtime::{Agent, ModelSettings};
use spool_server::{Hub, HubOptions, ThreadSettings};
use spool_store::{SqliteStore, Store};

use super::run::{agent_of, build_provider, rules_file};
use crate::cli::ServeArgs;
use crate::provider_choice::ChosenProvider;

pub async fn serve(
    store: SqliteStore,
    chosen: ChosenProvider,
    args: ServeArgs,
) -> anyhow::Result<i32> {
    for listen in &args.listen {
        if listen != "stdio://" {
            bail!("cannot listen on {listen}: this spool serves stdio:// only so far");
        }
    }
    let provider = Arc::from(build_provider(&chosen));
    let cwd = std::env::current_dir()?.display().to_string();
    let defaults = ThreadSettings {
        model: Some(chosen.model.clone()),
        cwd: Some(cwd),
        approval_policy: Some(args.agent.approval_policy),
        sandbox: Some(args.agent.sandbox),
        instructions: chosen.instructions.clone(),
    };
    // Every thread's agent: the tools asked for, its own settings.
    let template = agent_of(&args.agent)?;
    let temperature = chosen.temperature;
    let agent_for = Arc::new(move |settings: &ThreadSettings| -> Agent {
        let mut agent = template.clone();
        if let Some(cwd) = &settings.cwd {
            agent.workspace_root = cwd.into();
        }
        agent.instructions = settings.instructions.clone();
        agent.model = ModelSettings {
            model: settings.model.clone().unwrap_or_default(),
            temperature,
            max_output_tokens: None,
            parallel_tool_calls: false,
        };
        if let Some(policy) = settings.approval_policy {
            agent.approval_policy = policy;
        }
        if let Some(sandbox) = settings.sandbox {
            agent.sandbox = sandbox;
        }
        agent
    });
    let options = HubOptions {
        provider_name: chosen.name.clone(),
        defaults,
        agent_for,
        rules_file: Some(rules_file()?),
    };
    let hub = Hub::new(store.clone(), provider, options);
    spool_server::serve_stdio(hub).await;
    store.flush().await?;
    Ok(0)
}
