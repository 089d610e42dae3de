//! `spool serve`: the app server (Codex app-server v2 JSON-RPC over stdio
//! and WebSocket, the HTTP API with SSE), on every `--listen` URL at once.
//!
//! Ends when standard input ends (stdio the only listener), or on SIGTERM
//! or SIGINT: stop accepting, interrupt running turns (each ends
//! `interrupted` with one `turn/completed`), close connections, flush the
//! store, exit 0.
//!
//! The ceilings (`--max-approval-policy`, `--max-sandbox`,
//! `--allowed-root`, else `[requirements]` of spool.toml) bound what every
//! client may ask for, stdio's included; the server's own defaults must
//! lie within them or it does not start.
//!
//! `spool trace` runs this same server ([`Launch`] says how it differs).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use spool_protocol::{
    ConfigLayerMetadata, DynamicToolFunctionSpec, DynamicToolNamespaceTool, DynamicToolSpec,
    SandboxPolicy,
};
use spool_runtime::{Agent, DynamicTool, ModelSettings, SandboxOptions, Tool};
use spool_server::ceilings::Fields;
use spool_server::{
    AccessRules, AuthToken, Ceilings, Hub, HubOptions, Limits, ListenUrl, Listeners, ServerFacts,
    Shutdown, ThreadSettings,
};
use spool_store::{AnyStore, Store};

use super::run::{agent_of, build_provider, rules_file};
use crate::cli::{ServeArgs, ToolArg};
use crate::config::Requirements;
use crate::provider_choice::ChosenProvider;

/// Told the bound addresses (see [`Launch::listening`]).
pub type OnListening = Box<dyn FnOnce(&[String]) + Send>;

/// How a server differs from the one `spool serve` runs with its flags.
#[derive(Default)]
pub struct Launch {
    /// The bearer token, when the caller chose it (`None` in it: no
    /// token); unset: `--auth-token-file`, else SPOOL_AUTH_TOKEN.
    pub token: Option<Option<AuthToken>>,
    /// Told the bound addresses once every listener is bound, before the
    /// server takes requests.
    pub listening: Option<OnListening>,
}

pub async fn serve(
    store: AnyStore,
    chosen: ChosenProvider,
    requirements: Requirements,
    mut args: ServeArgs,
    origins: std::collections::BTreeMap<String, ConfigLayerMetadata>,
    mcp: super::mcp::ServeMcp,
    launch: Launch,
) -> anyhow::Result<i32> {
    // Token counts (a thread with a context window compacts by them; views
    // with a budget pack by them) need the o200k encoder, 100-200 ms of
    // CPU to build: build it on a thread of its own as the server starts,
    // off the first request's path. At normal priority: a turn that needs
    // a count waits for this build to finish, and at nice 19 on a busy
    // machine it got ~1.5% of a core, so a first `turn/start` waited over
    // 30 s for its reply (seen with two busy loops on two cores).
    let _ = std::thread::Builder::new()
        .name("spool-warm".to_owned())
        .spawn(spool_core::tokens::warm);
    args.agent.tools = served_tools(&args.agent.tools);
    let urls = args
        .listen
        .iter()
        .map(|url| url.parse::<ListenUrl>())
        .collect::<Result<Vec<_>, _>>()?;
    let ceilings = ceilings(&args, requirements)?;
    if args.agent.approval_policy == spool_protocol::AskForApproval::OnFailure {
        // Codex 0.163.0 dropped `on-failure`: its clients cannot read the
        // policy threads report (`thread/start`, `config/read`).
        eprintln!(
            "spool serve: warning: the default approval policy on-failure is spool's own; \
             Codex clients (0.163.0) do not know it and may reject the replies that name it"
        );
    }
    let cwd = std::env::current_dir()?.display().to_string();
    let defaults = ThreadSettings {
        model: Some(chosen.model.clone()),
        cwd: Some(cwd),
        approval_policy: Some(args.agent.approval_policy),
        sandbox: Some(SandboxPolicy::from_mode(args.agent.sandbox)),
        instructions: chosen.instructions.clone(),
        dynamic_tools: Vec::new(),
    };
    // Checked before anything listens: a server whose own defaults a
    // client could not ask for would hand them to every thread that sets
    // nothing.
    let defaults = ceilings
        .check_thread_settings(defaults, &Fields::SERVER_DEFAULTS)
        .context("the server's defaults are above its ceilings")?;
    let token = match launch.token {
        Some(chosen) => chosen,
        None => auth_token(&args)?,
    };
    let rules = AccessRules::new(args.allow_origin.clone(), args.allow_host.clone());
    let limits = Limits {
        max_connections: args.max_connections as usize,
        header_timeout: std::time::Duration::from_secs(args.header_timeout),
    };
    let listeners = Listeners::bind(&urls, token, rules)
        .await?
        .with_limits(limits);
    let provider = Arc::from(build_provider(&chosen));
    // Every thread's agent: the tools asked for, its own settings.
    // Always a (maybe empty) set of MCP servers: a reload can add some.
    let template = agent_of(&args.agent, &chosen, mcp.toolbox.clone())?;
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
        if let Some(policy) = &settings.sandbox {
            apply_sandbox(&mut agent, policy);
        }
        agent.tools.extend(client_tools(&settings.dynamic_tools));
        agent
    });
    let options = HubOptions {
        provider_name: chosen.name.clone(),
        defaults,
        agent_for,
        rules_file: Some(rules_file()?),
        compaction: chosen.compaction,
        ceilings,
        max_input_chars: args.max_input_chars,
        facts: ServerFacts {
            uses_api_key: chosen.api_key.is_some(),
            origins,
        },
        mcp: mcp.admin.clone(),
    };
    let hub = Hub::new(store.clone(), provider, options);
    mcp.announce(&hub);
    // Threads other servers write reach watchers here (PostgreSQL).
    spool_server::tail::start(&hub);
    // Requests other servers forward for threads this one holds.
    spool_server::forward::start(&hub);
    // Before the addresses are told: a client may signal as soon as it
    // read them.
    let signalled = spool_server::shutdown::signalled();
    let addresses = listeners.addresses();
    for address in &addresses {
        eprintln!("spool serve: listening on {address}");
    }
    if let Some(listening) = launch.listening {
        listening(&addresses);
    }
    let shutdown = Shutdown::new();
    let mut running = listeners.serve(hub.clone(), shutdown.clone());
    tokio::select! {
        () = running.ended() => {}
        () = signalled => {
            eprintln!("spool serve: shutting down");
        }
    }
    shutdown.run(&hub, Duration::from_secs(30)).await;
    running.finish(Duration::from_secs(5)).await;
    store.flush().await?;
    Ok(0)
}

/// The ceilings: each flag, else the same key of spool.toml's
/// `[requirements]`, else none.
fn ceilings(args: &ServeArgs, file: Requirements) -> anyhow::Result<Ceilings> {
    let from_file = |key: &str, file: &std::path::Path| format!("{key} in {}", file.display());
    let mut ceilings = Ceilings::none();
    if let Some(policy) = args.max_approval_policy {
        ceilings = ceilings.with_max_approval_policy(policy, "--max-approval-policy");
    } else if let Some(policy) = file.max_approval_policy {
        ceilings = ceilings
            .with_max_approval_policy(policy.value, from_file("max_approval_policy", &policy.file));
    }
    if let Some(mode) = args.max_sandbox {
        ceilings = ceilings.with_max_sandbox(mode, "--max-sandbox");
    } else if let Some(mode) = file.max_sandbox {
        ceilings = ceilings.with_max_sandbox(mode.value, from_file("max_sandbox", &mode.file));
    }
    if !args.allowed_roots.is_empty() {
        ceilings = ceilings.with_allowed_roots(args.allowed_roots.clone(), "--allowed-root")?;
    } else if let Some(roots) = file.allowed_roots {
        let set_by = from_file("allowed_roots", &roots.file);
        ceilings = ceilings.with_allowed_roots(roots.value, set_by)?;
    }
    Ok(ceilings)
}

/// The client's declared tools (`thread/start`'s `dynamicTools`) as
/// agent tools, each answered through `item/tool/call`.
fn client_tools(specs: &[DynamicToolSpec]) -> Vec<Tool> {
    let tool = |namespace: Option<&str>, spec: &DynamicToolFunctionSpec| {
        Tool::Dynamic(DynamicTool {
            namespace: namespace.map(str::to_owned),
            name: spec.name.clone(),
            description: spec.description.clone(),
            parameters: spec.input_schema.clone(),
        })
    };
    specs
        .iter()
        .flat_map(|spec| match spec {
            DynamicToolSpec::Function(function) => vec![tool(None, function)],
            DynamicToolSpec::Namespace(namespace) => namespace
                .tools
                .iter()
                .map(|DynamicToolNamespaceTool::Function(f)| tool(Some(&namespace.name), f))
                .collect(),
        })
        .collect()
}

/// The token of `--auth-token-file`, else of SPOOL_AUTH_TOKEN (never
/// printed).
fn auth_token(args: &ServeArgs) -> anyhow::Result<Option<AuthToken>> {
    if let Some(path) = &args.auth_token_file {
        return Ok(Some(AuthToken::from_file(path)?));
    }
    match std::env::var("SPOOL_AUTH_TOKEN") {
        Ok(token) => Ok(Some(
            AuthToken::new(&token).context("SPOOL_AUTH_TOKEN is not a usable token")?,
        )),
        Err(_) => Ok(None),
    }
}

/// A thread's sandbox policy on its agent: the mode, and what the policy
/// adds to it. Relative writable roots are taken from the workspace.
fn apply_sandbox(agent: &mut Agent, policy: &SandboxPolicy) {
    agent.sandbox = policy.mode();
    agent.sandbox_options = match policy {
        SandboxPolicy::ReadOnly { network_access } => SandboxOptions {
            network: *network_access,
            ..SandboxOptions::default()
        },
        SandboxPolicy::WorkspaceWrite {
            writable_roots,
            network_access,
            exclude_tmpdir_env_var,
            exclude_slash_tmp,
        } => SandboxOptions {
            writable_roots: writable_roots
                .iter()
                .map(|root| agent.workspace_root.join(root))
                .collect(),
            network: *network_access,
            exclude_tmpdir_env_var: *exclude_tmpdir_env_var,
            exclude_slash_tmp: *exclude_slash_tmp,
        },
        // No sandbox: something outside spool confines the process, or
        // nothing does.
        SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => {
            SandboxOptions::default()
        }
    };
}

/// The tools a served thread offers: Codex's defaults (shell, apply_patch,
/// update_plan) unless `--tools` names others; `--tools none` offers none.
fn served_tools(asked: &[ToolArg]) -> Vec<ToolArg> {
    if asked.is_empty() {
        return vec![ToolArg::Shell, ToolArg::ApplyPatch, ToolArg::UpdatePlan];
    }
    asked
        .iter()
        .copied()
        .filter(|tool| *tool != ToolArg::None)
        .collect()
}
