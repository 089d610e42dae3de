//! `spool run`: one turn, streamed to the terminal, persisted.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use spool_model::{ChatProvider, ModelProvider, ProviderConfig, ResponsesProvider};
use spool_protocol::{
    CodexErrorInfo, HistoryMode, ServerNotification, ThreadItem, TurnError, UserInput,
};
use spool_runtime::{
    Agent, Confinement, ModelSettings, RunResult, RunStatus, Runner, ShellTool, Tool,
};
use spool_store::{AnyStore, Appended, NewThread, Store};
use tokio::sync::{mpsc, watch};

use super::approve::TerminalApprover;
use crate::cli::{AgentArgs, HistoryModeArg, ResumeArgs, RunArgs, SandboxFallbackArg, ToolArg};
use crate::config::WireApi;
use crate::provider_choice::ChosenProvider;

/// Exit code of an interrupted turn (as a shell reports SIGINT).
const EXIT_INTERRUPTED: i32 = 130;

pub async fn run(
    store: AnyStore,
    chosen: ChosenProvider,
    args: RunArgs,
    mcp: Option<McpToolboxRef>,
) -> anyhow::Result<i32> {
    if chosen.fell_back_to_local {
        eprintln!(
            "spool: no provider configured and OPENAI_API_KEY is not set; using the local model server at {}",
            chosen.base_url
        );
    }
    let wanted = args.history_mode.map(HistoryModeArg::mode);
    let thread_id = match &args.thread {
        Some(id) => {
            let record = store
                .thread(id)
                .await?
                .with_context(|| format!("no thread {id} in the store"))?;
            let owner = record.thread.history_owner.unwrap_or_default();
            if let Some(wanted) = wanted.filter(|wanted| *wanted != owner) {
                bail!(
                    "thread {id} keeps its history in {} mode, not {}: a thread's history \
                     owner is fixed when it starts (fork it to change)",
                    owner.as_str(),
                    wanted.as_str()
                );
            }
            id.clone()
        }
        None => {
            let mode = wanted.unwrap_or_default();
            if mode != HistoryMode::Replay && chosen.wire_api == WireApi::Chat {
                bail!(
                    "--history-mode {} needs the Responses API; provider {} speaks Chat \
                     Completions, which keeps no conversation",
                    mode.as_str(),
                    chosen.name
                );
            }
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            let mut new = NewThread::new(&chosen.name, cwd);
            new.model = Some(chosen.model.clone());
            new.history_mode = mode;
            store.create_thread(new).await?.thread.id
        }
    };
    let instructions = args.instructions.clone().or(chosen.instructions.clone());
    let (mut runner, agent) = terminal_runner(
        &store,
        &chosen,
        &args.agent,
        (instructions, args.max_output_tokens),
        mcp,
    )?;
    runner.history_token_budget = args.history_tokens;
    let stop_rx = interrupt_on_ctrl_c();
    let (tx, rx) = mpsc::unbounded_channel();
    let turn = {
        let thread_id = thread_id.clone();
        tokio::spawn(async move {
            let input = vec![UserInput::text(args.prompt)];
            runner
                .run_streamed(agent, &thread_id, input, &tx, stop_rx)
                .await
        })
    };
    let started = Instant::now();
    let first_token = print_stream(rx).await;
    let outcome = turn.await.context("the turn task panicked")??;
    store.flush().await?;
    report(
        &outcome,
        &thread_id,
        started,
        first_token,
        args.timings,
        &chosen,
    )
}

/// `spool resume`: picks up a run paused on an approval (asking again on
/// the terminal), with the agent settings given.
pub async fn resume(
    store: AnyStore,
    chosen: ChosenProvider,
    args: ResumeArgs,
    mcp: Option<McpToolboxRef>,
) -> anyhow::Result<i32> {
    let instructions = chosen.instructions.clone();
    let (runner, agent) = terminal_runner(&store, &chosen, &args.agent, (instructions, None), mcp)?;
    let stop_rx = interrupt_on_ctrl_c();
    let (tx, rx) = mpsc::unbounded_channel();
    let thread_id = args.thread.clone();
    let turn = tokio::spawn(async move { runner.resume(agent, &thread_id, &tx, stop_rx).await });
    let started = Instant::now();
    let first_token = print_stream(rx).await;
    let outcome = turn.await.context("the resume task panicked")??;
    store.flush().await?;
    report(&outcome, &args.thread, started, first_token, false, &chosen)
}

/// The runner and agent of `spool run` and `spool resume`: the chosen
/// model, approvals asked on this terminal, rules kept in SPOOL_HOME.
fn terminal_runner(
    store: &AnyStore,
    chosen: &ChosenProvider,
    args: &AgentArgs,
    (instructions, max_output_tokens): (Option<String>, Option<u32>),
    mcp: Option<McpToolboxRef>,
) -> anyhow::Result<(Runner<AnyStore>, Arc<Agent>)> {
    let provider: Arc<dyn ModelProvider> = Arc::from(build_provider(chosen));
    let mut agent = agent_of(args, chosen, mcp)?;
    agent.instructions = instructions;
    agent.model = ModelSettings {
        model: chosen.model.clone(),
        temperature: chosen.temperature,
        max_output_tokens,
        parallel_tool_calls: false,
    };
    let mut runner = Runner::new(store.clone(), provider)
        .with_max_turns(args.max_turns)
        .with_client(Arc::new(TerminalApprover {
            store: store.clone(),
        }));
    runner.rules_file = Some(rules_file()?);
    runner.compaction = chosen.compaction;
    // The terminal shows the streamed events; the result's item lists
    // would be two reads of the whole thread for nothing.
    runner.collect_results = false;
    Ok((runner, Arc::new(agent)))
}

/// Turns true on Ctrl-C: the turn stops (and is recorded interrupted).
fn interrupt_on_ctrl_c() -> watch::Receiver<bool> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    stop_rx
}

/// The agent `spool run` drives: the tools asked for, in the working
/// directory, under the given policy.
/// The MCP servers of spool.toml, shared by every thread of the process.
pub type McpToolboxRef = Arc<dyn spool_tools::mcp::McpToolbox>;

pub fn agent_of(
    args: &AgentArgs,
    chosen: &ChosenProvider,
    mcp: Option<McpToolboxRef>,
) -> anyhow::Result<Agent> {
    let cwd = std::env::current_dir().context("the working directory")?;
    let mut agent = Agent::new("assistant", cwd).with_policy(args.approval_policy, args.sandbox);
    agent.mcp = mcp;
    agent.confinement = confinement(args)?;
    agent.env_secrets = chosen.api_key_env.iter().cloned().collect();
    agent.env_pass_through = args.pass_env.clone();
    for tool in &args.tools {
        agent.tools.push(match tool {
            ToolArg::Shell => Tool::Shell(ShellTool::default()),
            ToolArg::ApplyPatch => Tool::ApplyPatch,
            ToolArg::UpdatePlan => Tool::UpdatePlan,
            ToolArg::ViewImage => Tool::ViewImage,
            ToolArg::None => continue,
        });
    }
    Ok(agent)
}

/// How commands are kept in their sandbox: the kernel sandbox (this binary
/// as its helper) when the kernel offers it; otherwise an error naming
/// what is missing, unless the operator chose classification explicitly.
pub fn confinement(args: &AgentArgs) -> anyhow::Result<Confinement> {
    let classify = args.sandbox_fallback == SandboxFallbackArg::Classify;
    if let Err(missing) = spool_tools::sandbox::probe() {
        // Without the shell tool no model command runs, so a plain question
        // works on any kernel (a review's read-only shell then falls back to
        // classification, which runs known read-only commands only).
        if !args.tools.contains(&ToolArg::Shell) {
            return Ok(Confinement::Classify);
        }
        if classify {
            eprintln!(
                "spool: warning: commands are not sandboxed ({missing}); judging them by \
                 classification (--sandbox-fallback classify)"
            );
            return Ok(Confinement::Classify);
        }
        anyhow::bail!(
            "cannot sandbox commands: {missing}. Pass --sandbox-fallback classify to run with \
             only known read-only commands allowed unasked, or --sandbox danger-full-access \
             with a policy that asks"
        );
    }
    let program = std::env::current_exe().context("the path of the spool binary")?;
    Ok(Confinement::Kernel(spool_tools::sandbox::Launcher::spool(
        program,
    )))
}

/// Where accepted "always allow" rules are kept, for review.
pub fn rules_file() -> anyhow::Result<std::path::PathBuf> {
    Ok(crate::home::spool_home()?
        .join("rules")
        .join("default.rules"))
}

/// Prints how the turn ended; the exit code.
fn report(
    outcome: &RunResult,
    thread_id: &str,
    started: Instant,
    first_token: Option<Duration>,
    timings: bool,
    chosen: &ChosenProvider,
) -> anyhow::Result<i32> {
    if timings {
        let first = first_token.map_or("none".to_owned(), |d| format!("{} ms", d.as_millis()));
        eprintln!(
            "timings: first token {first}, total {} ms",
            started.elapsed().as_millis()
        );
    }
    let usage = outcome
        .usage
        .as_ref()
        .map(|u| {
            format!(
                " · tokens: input {}, output {}, total {}",
                u.input_tokens, u.output_tokens, u.total_tokens
            )
        })
        .unwrap_or_default();
    let status = match outcome.status {
        RunStatus::Completed => "completed",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Failed => "failed",
        RunStatus::Paused => "paused",
    };
    eprintln!("thread {thread_id} · turn {status}{usage}");
    match outcome.status {
        RunStatus::Completed => Ok(0),
        RunStatus::Interrupted => {
            eprintln!("spool: interrupted");
            Ok(EXIT_INTERRUPTED)
        }
        RunStatus::Failed => {
            let error = outcome
                .error
                .clone()
                .unwrap_or_else(|| TurnError::new("the turn failed", None));
            // No HTTP status at all: nothing answered.
            let unreachable = matches!(
                error.codex_error_info,
                Some(
                    CodexErrorInfo::HttpConnectionFailed {
                        http_status_code: None
                    } | CodexErrorInfo::ResponseTooManyFailedAttempts {
                        http_status_code: None
                    }
                )
            );
            let hint = if unreachable && chosen.name == "local" {
                " (is the local model server running? start it with `scripts/local-model.sh start`)"
            } else {
                ""
            };
            bail!("{}{hint}", one_line(&error.message))
        }
        RunStatus::Paused => {
            eprintln!(
                "spool: paused, waiting on an approval; continue with `spool resume {thread_id}`"
            );
            Ok(0)
        }
    }
}

pub fn build_provider(chosen: &ChosenProvider) -> Box<dyn ModelProvider> {
    let mut config = ProviderConfig::new(&chosen.name, &chosen.base_url);
    if let Some(key) = &chosen.api_key {
        config = config.with_api_key(key);
    }
    match chosen.wire_api {
        WireApi::Responses => Box::new(ResponsesProvider::new(config)),
        WireApi::Chat => Box::new(ChatProvider::new(config)),
    }
}

/// Prints agent text as it streams, with a spinner until the first token.
/// Returns how long the first token took.
async fn print_stream(mut rx: mpsc::UnboundedReceiver<Appended>) -> Option<Duration> {
    let started = Instant::now();
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message("waiting for the model…");
    spinner.enable_steady_tick(Duration::from_millis(80));
    let mut first_token = None;
    let mut streamed = String::new();
    let mut stdout = std::io::stdout();
    while let Some(event) = rx.recv().await {
        match event.notification() {
            ServerNotification::AgentMessageDelta(d) => {
                if first_token.is_none() {
                    first_token = Some(started.elapsed());
                    spinner.finish_and_clear();
                }
                streamed.push_str(&d.delta);
                let _ = write!(stdout, "{}", d.delta);
                let _ = stdout.flush();
            }
            ServerNotification::ItemStarted(n) => {
                if let ThreadItem::CommandExecution { command, .. } = &n.item {
                    spinner.suspend(|| eprintln!("$ {command}"));
                }
            }
            ServerNotification::ItemCompleted(n) if is_tool(&n.item) => {
                spinner.suspend(|| eprintln!("{}", crate::render::tool_summary(&n.item)));
            }
            ServerNotification::ItemCompleted(n) => {
                // The completed text is authoritative; print what the deltas missed.
                if let ThreadItem::AgentMessage { text, .. } = &n.item {
                    if let Some(rest) = text.strip_prefix(streamed.as_str()) {
                        let _ = write!(stdout, "{rest}");
                    } else {
                        let _ = write!(stdout, "\n{text}");
                    }
                    let _ = writeln!(stdout);
                    let _ = stdout.flush();
                    streamed.clear();
                }
            }
            _ => {}
        }
    }
    spinner.finish_and_clear();
    first_token
}

fn is_tool(item: &ThreadItem) -> bool {
    matches!(
        item,
        ThreadItem::CommandExecution { .. }
            | ThreadItem::FileChange { .. }
            | ThreadItem::FunctionCall { .. }
            | ThreadItem::Plan { .. }
    )
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
