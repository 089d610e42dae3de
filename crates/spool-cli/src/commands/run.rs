//! `spool run`: one turn, streamed to the terminal, persisted.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use spool_model::{ChatProvider, ModelProvider, ProviderConfig, ResponsesProvider};
use spool_protocol::{CodexErrorInfo, ServerNotification, TurnError, TurnStatus, UserInput};
use spool_runtime::{TurnOptions, run_turn};
use spool_store::{Appended, NewThread, SqliteStore, Store};
use tokio::sync::{mpsc, watch};

use crate::cli::RunArgs;
use crate::config::WireApi;
use crate::provider_choice::ChosenProvider;

/// Exit code of an interrupted turn (as a shell reports SIGINT).
const EXIT_INTERRUPTED: i32 = 130;

pub async fn run(store: SqliteStore, chosen: ChosenProvider, args: RunArgs) -> anyhow::Result<i32> {
    if chosen.fell_back_to_local {
        eprintln!(
            "spool: no provider configured and OPENAI_API_KEY is not set; using the local model server at {}",
            chosen.base_url
        );
    }
    let thread_id = match &args.thread {
        Some(id) => {
            store
                .thread(id)
                .await?
                .with_context(|| format!("no thread {id} in the store"))?;
            id.clone()
        }
        None => {
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            let mut new = NewThread::new(&chosen.name, cwd);
            new.model = Some(chosen.model.clone());
            store.create_thread(new).await?.thread.id
        }
    };
    let provider = build_provider(&chosen);
    let options = TurnOptions {
        model: chosen.model.clone(),
        instructions: args.instructions.clone().or(chosen.instructions.clone()),
        history_token_budget: args.history_tokens,
        agent: "assistant".to_owned(),
        max_output_tokens: args.max_output_tokens,
        temperature: chosen.temperature,
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let store = Arc::new(store);
    let turn = {
        let store = Arc::clone(&store);
        let thread_id = thread_id.clone();
        tokio::spawn(async move {
            let input = vec![UserInput::text(args.prompt)];
            run_turn(
                &*store,
                provider.as_ref(),
                &thread_id,
                input,
                &options,
                &tx,
                stop_rx,
            )
            .await
        })
    };
    let started = Instant::now();
    let first_token = print_stream(rx).await;
    let outcome = turn.await.context("the turn task panicked")??;
    store.flush().await?;

    if args.timings {
        let first = first_token.map_or("none".to_owned(), |d| format!("{} ms", d.as_millis()));
        eprintln!(
            "timings: first token {first}, total {} ms",
            started.elapsed().as_millis()
        );
    }
    let usage = outcome
        .usage
        .map(|u| {
            format!(
                " · tokens: input {}, output {}, total {}",
                u.input_tokens, u.output_tokens, u.total_tokens
            )
        })
        .unwrap_or_default();
    eprintln!(
        "thread {thread_id} · turn {}{usage}",
        outcome.status.as_str()
    );
    match outcome.status {
        TurnStatus::Completed => Ok(0),
        TurnStatus::Interrupted => {
            eprintln!("spool: interrupted");
            Ok(EXIT_INTERRUPTED)
        }
        TurnStatus::Failed => {
            let error = outcome
                .error
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
        TurnStatus::InProgress => bail!("the turn ended without completing"),
    }
}

fn build_provider(chosen: &ChosenProvider) -> Box<dyn ModelProvider> {
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
            ServerNotification::ItemCompleted(n) => {
                // The completed text is authoritative; print what the deltas missed.
                if let spool_protocol::ThreadItem::AgentMessage { text, .. } = &n.item {
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

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
