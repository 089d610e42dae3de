//! `spool bench runner`: the agent loop's own overhead per model call
//! with a provider that answers at once.
//!
//! One run is one turn of `steps + 1` model calls on a fresh store: each of
//! the first `steps` responses is one call to an in-process function tool
//! that returns a short string, the last one a short text. A step is the
//! time from one model request to the next (the provider notes the instant
//! of every `stream` call): reading the response's stream, logging its
//! items, filing and running the call, logging its output, and reading
//! the thread's history back for the next request. Whatever the scripted
//! provider costs is in it too, so the figure is an upper bound. The turn
//! runs in a task on the runtime, as `spool run` drives it.
//!
//! The target excludes the store's fsync, so the headline runs open the
//! store with `Durability::Normal`; the same turn with `Durability::Full`
//! is reported beside it (`with_fsync`) for context.
//!
//! The headline is in `replay` mode (spool sends the whole history each
//! time). The same turn in the two modes where the provider holds the
//! history (`previousResponseId`, `conversationId`: each request carries
//! only the new tool output, found by the tracker) is reported beside it
//! (`modes`), at `Durability::Normal`.
//!
//! Beside the headline, each run's turn is logged again by itself, step by
//! step, into a fresh store (`runner_floor.rs`): the store's share of a
//! step, its floor, measured in the same run.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde::Serialize;
use serde_json::json;
use spool_model::{ModelProvider, ModelRequest, ModelStream, ProviderCall, ScriptedProvider};
use spool_protocol::{FunctionCallStatus, HistoryMode, ThreadEvent, ThreadItem, UserInput};
use spool_runtime::{Agent, RunStatus, Runner, Tool};
use spool_store::{Durability, NewThread, SqliteStore, Store, StoreOptions};
use spool_tools::function::FunctionTool;

use super::args::BenchRunnerArgs;
use super::report::{Machine, median, percentile, round};

/// The target: the runner's overhead per model call, excluding fsync.
const TARGET_US: f64 = 200.0;
const TOOL: &str = "noop";
const TOOL_OUTPUT: &str = "ok";
const FINAL_TEXT: &str = "Done.";
const AGGREGATE: &str = "each statistic is taken over the steps of one run; the figure \
                         reported is the median of that statistic over the runs";

#[derive(Debug, Serialize)]
struct Report {
    workload: &'static str,
    description: String,
    steps: usize,
    runs: usize,
    aggregate: &'static str,
    target_us: f64,
    /// The headline: `Durability::Normal` (no fsync per commit).
    #[serde(flatten)]
    normal: Figures,
    /// The same turn with an fsync per commit, for context (not judged).
    with_fsync: Figures,
    /// The same turn in each history mode, without fsync.
    modes: Vec<ModeFigures>,
    machine: Machine,
}

/// One history mode's figures.
#[derive(Debug, Serialize)]
struct ModeFigures {
    mode: &'static str,
    #[serde(flatten)]
    figures: Figures,
}

/// One durability's figures, in microseconds per step.
#[derive(Debug, Serialize)]
struct Figures {
    durability: &'static str,
    median_us: f64,
    p90_us: f64,
    mean_us: f64,
    holds: bool,
    /// The median of the first and of the last tenth of the steps: how
    /// much a step costs more as the turn's history grows.
    first_tenth_median_us: f64,
    last_tenth_median_us: f64,
    /// Each run's median step, in the order they ran.
    runs_median_us: Vec<f64>,
    /// Each run's whole turn (from `Runner::run` to its result), ms.
    runs_turn_ms: Vec<f64>,
    /// The headline only: the median step of logging the same events with
    /// no runner (`runner_floor.rs`), and each run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    store_floor_median_us: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    runs_store_floor_median_us: Vec<f64>,
}

/// The statistics of one run.
#[derive(Debug, Clone, Copy)]
struct RunStats {
    median_us: f64,
    p90_us: f64,
    mean_us: f64,
    first_tenth_median_us: f64,
    last_tenth_median_us: f64,
    turn_ms: f64,
}

pub async fn runner(args: BenchRunnerArgs) -> anyhow::Result<()> {
    let steps = args.steps as usize;
    let runs = args.runs as usize;
    let dir = args.dir.unwrap_or_else(std::env::temp_dir);
    ensure!(dir.is_dir(), "--dir {}: not a directory", dir.display());
    let machine = Machine::probe();
    if machine.build_profile == "debug" {
        eprintln!("warning: this is a debug build; use --release for numbers worth keeping");
    }
    let description = format!(
        "one turn of {} model calls on a fresh SQLite store: {steps} answered at once with one \
         call to an in-process function tool (returns {TOOL_OUTPUT:?}), the last with a short \
         text; one step = from one model request to the next (scripted provider included)",
        steps + 1
    );
    eprintln!("runner: {description}");

    let normal = figures(&dir, Durability::Normal, HistoryMode::Replay, steps, runs).await?;
    let with_fsync = figures(&dir, Durability::Full, HistoryMode::Replay, steps, runs).await?;
    let mut modes = Vec::new();
    for mode in [HistoryMode::PreviousResponseId, HistoryMode::ConversationId] {
        let figures = figures(&dir, Durability::Normal, mode, steps, runs).await?;
        modes.push(ModeFigures {
            mode: mode.as_str(),
            figures,
        });
    }
    let report = Report {
        workload: "runner_step",
        description,
        steps,
        runs,
        aggregate: AGGREGATE,
        target_us: TARGET_US,
        normal,
        with_fsync,
        modes,
        machine,
    };
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &report)?;
    writeln!(stdout)?;
    Ok(())
}

/// `runs` runs at `durability`, summed up.
async fn figures(
    dir: &Path,
    durability: Durability,
    mode: HistoryMode,
    steps: usize,
    runs: usize,
) -> anyhow::Result<Figures> {
    let name = match mode {
        HistoryMode::Replay => durability_name(durability).to_owned(),
        other => format!("{} {}", durability_name(durability), other.as_str()),
    };
    let mut all = Vec::with_capacity(runs);
    let mut floors = Vec::new();
    let with_floor = durability == Durability::Normal && mode == HistoryMode::Replay;
    for run in 1..=runs {
        // A fresh directory, hence a fresh store file, for every run;
        // removed when dropped, also on error.
        let tmp = tempfile::Builder::new()
            .prefix("spool-bench-runner-")
            .tempdir_in(dir)
            .with_context(|| format!("cannot create a directory in {}", dir.display()))?;
        let (stats, logged) = run_once(tmp.path(), durability, mode, steps)
            .await
            .with_context(|| format!("durability {name}, run {run}"))?;
        eprintln!(
            "    {name} run {run}/{runs}: median {:.1} µs, p90 {:.1} µs, mean {:.1} µs per step \
             (first tenth {:.1}, last tenth {:.1}); turn {:.1} ms",
            stats.median_us,
            stats.p90_us,
            stats.mean_us,
            stats.first_tenth_median_us,
            stats.last_tenth_median_us,
            stats.turn_ms
        );
        all.push(stats);
        if with_floor {
            let (thread_id, events) = &logged;
            let times =
                super::runner_floor::store_floor(tmp.path(), durability, thread_id, events, steps)
                    .await
                    .with_context(|| format!("the store floor, run {run}"))?;
            let floor = median(&times);
            eprintln!("    {name} run {run}/{runs}: store floor median {floor:.1} µs per step");
            floors.push(tenths(floor));
        }
    }
    let over_runs =
        |f: fn(&RunStats) -> f64| tenths(median(&all.iter().map(f).collect::<Vec<_>>()));
    let median_us = over_runs(|s| s.median_us);
    eprintln!(
        "    {name}: median {median_us:.1} µs per step (target {TARGET_US} µs: {})",
        if median_us <= TARGET_US {
            "holds"
        } else {
            "MISSED"
        }
    );
    Ok(Figures {
        durability: durability_name(durability),
        median_us,
        p90_us: over_runs(|s| s.p90_us),
        mean_us: over_runs(|s| s.mean_us),
        holds: median_us <= TARGET_US,
        first_tenth_median_us: over_runs(|s| s.first_tenth_median_us),
        last_tenth_median_us: over_runs(|s| s.last_tenth_median_us),
        runs_median_us: all.iter().map(|s| tenths(s.median_us)).collect(),
        runs_turn_ms: all.iter().map(|s| tenths(s.turn_ms)).collect(),
        store_floor_median_us: (!floors.is_empty()).then(|| tenths(median(&floors))),
        runs_store_floor_median_us: floors,
    })
}

/// One turn of `steps` tool steps and a final answer, in `dir`: its
/// figures, and the thread with the events it logged.
async fn run_once(
    dir: &Path,
    durability: Durability,
    mode: HistoryMode,
    steps: usize,
) -> anyhow::Result<(RunStats, (String, Vec<ThreadEvent>))> {
    let options = StoreOptions {
        durability,
        ..StoreOptions::default()
    };
    let store = SqliteStore::open(dir.join("spool.db"), options)?;
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    let mut new = NewThread::new("bench", workspace.display().to_string());
    new.history_mode = mode;
    let thread = store.create_thread(new).await?;
    let thread_id = thread.thread.id;

    let mut scripts: Vec<_> = (0..steps)
        .map(|k| {
            ScriptedProvider::function_call_response(
                &format!("resp_{k}"),
                &format!("call_{k}"),
                TOOL,
                "{}",
            )
        })
        .collect();
    scripts.push(ScriptedProvider::text_response(
        &format!("resp_{steps}"),
        &[FINAL_TEXT],
    ));
    let scripted = ScriptedProvider::new(scripts);
    let provider = Arc::new(Clocked::new(scripted.clone()));
    let tool = FunctionTool::new(
        TOOL,
        "Does nothing and says so.",
        json!({"type": "object", "properties": {}}),
        |_, _| async { Ok(TOOL_OUTPUT.to_owned()) },
    )?;
    let agent = Agent::new("bench", &workspace)
        .with_model("scripted")
        .with_tool(Tool::Function(tool));
    let max_turns = u32::try_from(steps + 1)?;
    let runner = Runner::new(store.clone(), provider.clone()).with_max_turns(max_turns);

    // On a runtime worker, as `spool run` drives its turn (not on the
    // thread that blocks on the runtime).
    let turn_thread = thread_id.clone();
    let (result, turn) = tokio::spawn(async move {
        let start = Instant::now();
        let result = runner
            .run(
                Arc::new(agent),
                &turn_thread,
                vec![UserInput::text("Call the tool until told otherwise.")],
            )
            .await;
        (result, start.elapsed())
    })
    .await
    .context("the turn's task panicked")?;
    let result = result?;

    // What was timed really happened: every call ran, the answer came.
    ensure!(
        result.status == RunStatus::Completed,
        "the turn ended {:?}: {:?}",
        result.status,
        result.error
    );
    ensure!(
        result.final_output() == Some(FINAL_TEXT),
        "the final answer is {:?}",
        result.final_output()
    );
    ensure!(scripted.remaining() == 0, "scripted responses left over");
    let completed_calls = result
        .items()
        .iter()
        .filter(|r| {
            matches!(&r.item, ThreadItem::FunctionCall {
                status: FunctionCallStatus::Completed,
                output: Some(output),
                ..
            } if output == TOOL_OUTPUT)
        })
        .count();
    ensure!(
        completed_calls == steps,
        "{completed_calls} of {steps} tool calls completed"
    );
    let events = store.events_after(&thread_id, 0, usize::MAX).await?;
    store.close().await?;

    let calls = provider.calls();
    ensure!(
        calls.len() == steps + 1,
        "{} model calls, not {}",
        calls.len(),
        steps + 1
    );
    // In `replay`, request k carried the whole turn so far: the user's
    // message and every earlier call with its output. Where the provider
    // holds the history, each carried what it lacked: the user's message,
    // then the one new output.
    for (k, &(_, input)) in calls.iter().enumerate() {
        let expected = match mode {
            HistoryMode::Replay => 1 + 2 * k,
            HistoryMode::PreviousResponseId | HistoryMode::ConversationId => 1,
        };
        ensure!(
            input == expected,
            "request {k}'s input holds {input} items, not {expected}"
        );
    }
    let step_us: Vec<f64> = calls
        .windows(2)
        .map(|w| micros(w[1].0.duration_since(w[0].0)))
        .collect();
    Ok((stats(&step_us, turn), (thread_id, events)))
}

fn stats(step_us: &[f64], turn: Duration) -> RunStats {
    let tenth = step_us.len().div_ceil(10);
    RunStats {
        median_us: median(step_us),
        p90_us: percentile(step_us, 0.9),
        mean_us: step_us.iter().sum::<f64>() / step_us.len() as f64,
        first_tenth_median_us: median(&step_us[..tenth]),
        last_tenth_median_us: median(&step_us[step_us.len() - tenth..]),
        turn_ms: turn.as_secs_f64() * 1000.0,
    }
}

fn tenths(value: f64) -> f64 {
    round(value, 1)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn durability_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Full => "full",
        Durability::Normal => "normal",
    }
}

/// A provider that notes when each request is made (and how long its
/// history is), then hands it to the scripted one.
struct Clocked {
    inner: ScriptedProvider,
    calls: Mutex<Vec<(Instant, usize)>>,
}

impl Clocked {
    fn new(inner: ScriptedProvider) -> Self {
        Clocked {
            inner,
            calls: Mutex::new(Vec::new()),
        }
    }

    fn calls(&self) -> Vec<(Instant, usize)> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ModelProvider for Clocked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// As the Responses API: the scripted responses have ids, so they can
    /// be continued from.
    fn keeps_history(&self) -> bool {
        true
    }

    fn create_conversation(&self) -> ProviderCall<'_, String> {
        Box::pin(async { Ok("conv_bench".to_owned()) })
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let now = Instant::now();
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((now, request.input.len()));
        self.inner.stream(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_growing_run() {
        let steps: Vec<f64> = (1..=20).map(f64::from).collect();
        let s = stats(&steps, Duration::from_millis(3));
        assert_eq!(s.median_us, 10.5);
        assert_eq!(s.p90_us, 18.0);
        assert_eq!(s.mean_us, 10.5);
        assert_eq!(s.first_tenth_median_us, 1.5);
        assert_eq!(s.last_tenth_median_us, 19.5);
        assert_eq!(s.turn_ms, 3.0);
    }
}
