//! `spool bench live`: the path users run, end to end — a model server
//! streaming Server-Sent Events over a real loopback socket, the app
//! server (`spool serve`, a child process) parsing, logging and writing
//! them, and a client reading every message — with Codex's app server on
//! the same streams in the same run when `--codex-bin` is given.
//!
//! For each server and transport (stdio, WebSocket), on a fresh process:
//! - the first turn: `turn/start` sent → the model request arrived, and
//!   → the first delta read;
//! - a later turn's first delta;
//! - throughput for each `--deltas` size (fast mode: the model server
//!   writes the whole stream at once): deltas/s from the model server's
//!   first delta written to the client's last delta read, the median of
//!   `--runs` turns, or of as many as stream `--timed-deltas` in all for
//!   short replies; and the server's CPU time per delta
//!   (`/proc/PID/stat`, 10 ms ticks: coarse below a few thousand deltas);
//! - paced: each stream writes a delta every `--pace-ms` carrying the
//!   instant it was written; p50/p99/max of (read by the client − written
//!   by the model server), with 1 stream and with `--streams` at once
//!   (threads started on the same connection, turns started together).
//!
//! The relay floor (`relay.rs`: the model's deltas relayed to stdout and
//! nothing else) runs the same workloads over stdio, so every figure has
//! the least this machine allows beside it; so does the durable relay
//! floor, which also keeps each delta in a file synced within 5 ms, as
//! spool commits them: the least a server that keeps its deltas can do;
//! and the store relay floor, which keeps each delta as a row of spool's
//! own log in a store file instead (`store_relay.rs`): what writing the
//! deltas in spool's layout costs, without spool's hops.
//!
//! Servers alternate transport by transport, so all see the same machine
//! state; ratios are spool's figure over Codex's.

mod group;
pub(crate) mod model_server;
pub(crate) mod peer;
mod relay;
mod store_relay;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde::Serialize;
use serde_json::{Value, json};

use self::model_server::{FAST_DELTA, ModelServer, Plan};
use self::peer::{Peer, Target, Transport, cpu_time};
use super::args::BenchLiveArgs;
use super::host::{HostClock, stolen};
use super::report::{Machine, median, percentile, round};

pub use self::relay::relay;

#[derive(Debug, Serialize)]
struct Report {
    workload: &'static str,
    description: &'static str,
    runs: Vec<RunReport>,
    machine: Machine,
}

#[derive(Debug, Serialize)]
struct RunReport {
    server: &'static str,
    transport: &'static str,
    /// The first turn of a fresh process.
    first_turn_request_ms: f64,
    first_turn_first_delta_ms: f64,
    /// A later turn (the second).
    later_turn_first_delta_ms: f64,
    throughput: Vec<Throughput>,
    paced: Vec<Paced>,
}

#[derive(Debug, Serialize)]
struct Throughput {
    deltas: usize,
    /// `item/agentMessage/delta` notifications that carried them (a
    /// server may send deltas that arrived together as one).
    notifications: usize,
    deltas_per_s: f64,
    /// The server's CPU over all the runs of this length, per delta: a
    /// mean, not a median, because `/proc` counts CPU in 10 ms ticks (a
    /// 2,000-delta turn is a handful of them) and the runs together are
    /// that many more ticks.
    cpu_us_per_delta: f64,
    turn_ms: f64,
    /// The median time from the model server's first delta written to the
    /// client's first delta read: what the rate's clock holds beyond the
    /// stream itself.
    first_delta_ms: f64,
    /// The share of the machine's CPU time the host took for other guests
    /// over all the runs of this length, percent (`host.rs`); `None`
    /// without `/proc/stat`.
    host_steal_pct: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Paced {
    streams: usize,
    deltas_per_stream: usize,
    pace_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// The server's CPU over the workload (its turns' starts and ends
    /// too), per delta: at a trickle each delta wakes each hop.
    cpu_us_per_delta: f64,
    /// The share of the machine's CPU time the host took for other guests
    /// during the workload, percent (`host.rs`).
    host_steal_pct: Option<f64>,
}

pub async fn live(args: BenchLiveArgs) -> anyhow::Result<()> {
    let machine = Machine::probe();
    if machine.build_profile == "debug" {
        eprintln!("warning: this is a debug build; use --release for numbers worth keeping");
    }
    let spool = std::env::current_exe().context("cannot find the spool binary")?;
    let mut servers = vec![(Target::Spool, spool.clone())];
    if let Some(codex) = &args.codex_bin {
        servers.push((Target::Codex, codex.clone()));
    }
    servers.push((Target::Relay, spool.clone()));
    servers.push((Target::DurableRelay, spool.clone()));
    servers.push((Target::StoreRelay, spool));
    let epoch = Instant::now();
    let model = ModelServer::start(epoch).await?;
    let work = tempfile::Builder::new()
        .prefix("spool-bench-live-")
        .tempdir()?;
    let mut runs = Vec::new();
    for transport in [Transport::Stdio, Transport::WebSocket] {
        for (target, program) in &servers {
            let relay = matches!(
                target,
                Target::Relay | Target::DurableRelay | Target::StoreRelay
            );
            if relay && transport != Transport::Stdio {
                continue;
            }
            let home = work
                .path()
                .join(format!("{}-{}", target.name(), transport.name()));
            std::fs::create_dir_all(&home)?;
            configure(*target, &home, model.url())?;
            eprintln!("live: {} over {}", target.name(), transport.name());
            let report = run(*target, program, transport, &home, &model, epoch, &args)
                .await
                .with_context(|| {
                    format!(
                        "{} over {} (its log: {})",
                        target.name(),
                        transport.name(),
                        home.join("server.log").display()
                    )
                });
            match report {
                Ok(report) => runs.push(report),
                Err(error) => {
                    // Keep the log for a look before the directory goes.
                    let log = std::fs::read_to_string(home.join("server.log")).unwrap_or_default();
                    eprintln!("{log}");
                    return Err(error);
                }
            }
        }
    }
    let report = Report {
        workload: "live",
        description: "a loopback SSE model server → the app server as a child process → a client parsing every message",
        runs,
        machine,
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// Points the server at the bench's model server.
pub(crate) fn configure(target: Target, home: &Path, model_url: &str) -> anyhow::Result<()> {
    match target {
        Target::Spool => std::fs::write(
            home.join("spool.toml"),
            format!(
                "provider = \"bench\"\n[providers.bench]\nbase_url = \"{model_url}\"\nmodel = \"bench-model\"\n"
            ),
        )?,
        // No shell snapshot: Codex starts a login shell for each new thread
        // to capture its environment, which sources the user's shell
        // startup files. On a machine whose `~/.bashrc` runs `pyenv init`,
        // the paced workload's 100 threads left ~80 `pyenv rehash`
        // processes contending for its lock for a minute, on the cores the
        // next runs (spool's among them) were timed on. The app server's
        // delta path does not use the snapshot.
        Target::Codex => std::fs::write(
            home.join("config.toml"),
            format!(
                "model = \"bench-model\"\nmodel_provider = \"bench\"\n\
                 [model_providers.bench]\nname = \"bench\"\nbase_url = \"{model_url}\"\n\
                 wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\
                 [features]\nshell_snapshot = false\n"
            ),
        )?,
        Target::Relay | Target::DurableRelay | Target::StoreRelay => {}
    }
    Ok(())
}

/// What the client saw of one turn.
struct TurnSeen {
    started: Instant,
    first_delta: Option<Instant>,
    last_delta: Option<Instant>,
    completed: Instant,
    /// Deltas by their text (fast: `x ` each; paced: one stamp each).
    deltas: usize,
    notifications: usize,
    /// Paced: (read − written) per delta, ms.
    latencies_ms: Vec<f64>,
    /// Paced: when each delta was written, ms since the bench began.
    written_ms: Vec<f64>,
}

async fn run(
    target: Target,
    program: &Path,
    transport: Transport,
    home: &Path,
    model: &ModelServer,
    epoch: Instant,
    args: &BenchLiveArgs,
) -> anyhow::Result<RunReport> {
    let mut peer = Peer::start(target, program, transport, home, model.url(), None).await?;
    let pid = peer.pid().context("the server has no pid")?;
    peer.initialize().await?;
    let thread = peer.start_thread().await?;

    let first_size = args.deltas.first().copied().unwrap_or(2_000) as usize;
    let fast = |deltas| Plan { deltas, pace: None };
    model.set_plan(fast(first_size));
    let before = model.requests().len();
    let first = turns(&mut peer, std::slice::from_ref(&thread), epoch).await?;
    // Deltas the client read in all: the store relay's file must hold as
    // many when it exits.
    let mut delivered = first[0].deltas;
    let request = *model
        .requests()
        .get(before)
        .context("the first turn made no model request")?;
    let first_turn_request_ms = ms(request.duration_since(first[0].started));
    let first_turn_first_delta_ms = ms(first_delta(&first[0])?.duration_since(first[0].started));
    let second = turns(&mut peer, std::slice::from_ref(&thread), epoch).await?;
    delivered += second[0].deltas;
    let later_turn_first_delta_ms = ms(first_delta(&second[0])?.duration_since(second[0].started));

    // Work a server does once, after it starts (spool builds its token
    // encoder on a background thread), is not CPU per delta.
    settle(pid).await?;
    let mut throughput = Vec::new();
    for &size in &args.deltas {
        let size = size as usize;
        model.set_plan(fast(size));
        let mut rates = Vec::new();
        let mut cpu_total = Duration::ZERO;
        let mut turn_ms = Vec::new();
        let mut first_ms = Vec::new();
        let mut notifications = 0;
        let runs = args
            .runs
            .max(args.timed_deltas.div_ceil(size.max(1) as u32));
        let host = HostClock::now();
        for _ in 0..runs {
            let cpu_before = cpu_time(pid)?;
            let before = model.delta_starts().len();
            let seen = turns(&mut peer, std::slice::from_ref(&thread), epoch).await?;
            let cpu = cpu_time(pid)? - cpu_before;
            let seen = &seen[0];
            ensure!(seen.deltas == size, "{} deltas read of {size}", seen.deltas);
            delivered += seen.deltas;
            let starts = model.delta_starts();
            ensure!(
                starts.len() == before + 1,
                "the turn opened {} model streams, not one",
                starts.len() - before
            );
            let written = starts[before];
            let last = seen.last_delta.context("the turn streamed no delta")?;
            let streaming = last.duration_since(written);
            rates.push(size as f64 / streaming.as_secs_f64().max(1e-9));
            first_ms.push(ms(first_delta(seen)?.duration_since(written)));
            cpu_total += cpu;
            turn_ms.push(ms(seen.completed.duration_since(seen.started)));
            notifications = seen.notifications;
        }
        let entry = Throughput {
            deltas: size,
            notifications,
            deltas_per_s: median(&rates).round(),
            cpu_us_per_delta: round(
                cpu_total.as_secs_f64() * 1e6 / (size as f64 * f64::from(runs)),
                1,
            ),
            turn_ms: round(median(&turn_ms), 1),
            first_delta_ms: round(median(&first_ms), 2),
            host_steal_pct: host.and_then(HostClock::steal_pct),
        };
        eprintln!(
            "    {size} deltas in {notifications} notifications: {:.0}/s, {:.1} µs CPU per delta, first delta after {:.2} ms{}",
            entry.deltas_per_s,
            entry.cpu_us_per_delta,
            entry.first_delta_ms,
            stolen(entry.host_steal_pct)
        );
        throughput.push(entry);
    }

    let mut paced = Vec::new();
    let mut threads = vec![thread];
    for streams in [1, args.streams as usize] {
        while threads.len() < streams {
            threads.push(peer.start_thread().await?);
        }
        let pace = Duration::from_secs_f64(args.pace_ms / 1000.0);
        let deltas = args.paced_deltas as usize;
        model.set_plan(Plan {
            deltas,
            pace: Some(pace),
        });
        let cpu_before = cpu_time(pid)?;
        let host = HostClock::now();
        let seen = turns(&mut peer, &threads[..streams], epoch).await?;
        let cpu = cpu_time(pid)? - cpu_before;
        let host_steal_pct = host.and_then(HostClock::steal_pct);
        if let Some(path) = &args.paced_log {
            log_paced(path, target, transport, &seen)?;
        }
        let mut latencies: Vec<f64> = seen.iter().flat_map(|t| t.latencies_ms.clone()).collect();
        ensure!(
            latencies.len() == streams * deltas,
            "{} stamped deltas read of {}",
            latencies.len(),
            streams * deltas
        );
        latencies.sort_by(f64::total_cmp);
        delivered += seen.iter().map(|turn| turn.deltas).sum::<usize>();
        let entry = Paced {
            streams,
            deltas_per_stream: deltas,
            pace_ms: args.pace_ms,
            p50_ms: round(percentile(&latencies, 0.5), 2),
            p99_ms: round(percentile(&latencies, 0.99), 2),
            max_ms: round(*latencies.last().unwrap_or(&f64::NAN), 2),
            cpu_us_per_delta: round(cpu.as_secs_f64() * 1e6 / latencies.len() as f64, 1),
            host_steal_pct,
        };
        eprintln!(
            "    paced, {streams} stream(s): p50 {:.2} ms, p99 {:.2} ms, {:.1} µs CPU per delta{}",
            entry.p50_ms,
            entry.p99_ms,
            entry.cpu_us_per_delta,
            stolen(entry.host_steal_pct)
        );
        paced.push(entry);
    }
    peer.stop().await;
    if target == Target::StoreRelay {
        let kept = store_relay::kept(&store_relay::path(home))?;
        ensure!(
            kept == delivered as i64,
            "the store relay kept {kept} of the {delivered} deltas it sent"
        );
    }
    Ok(RunReport {
        server: target.name(),
        transport: transport.name(),
        first_turn_request_ms: round(first_turn_request_ms, 1),
        first_turn_first_delta_ms: round(first_turn_first_delta_ms, 1),
        later_turn_first_delta_ms: round(later_turn_first_delta_ms, 1),
        throughput,
        paced,
    })
}

/// Starts a turn on each thread at once and reads until all completed.
async fn turns(
    peer: &mut Peer,
    threads: &[String],
    epoch: Instant,
) -> anyhow::Result<Vec<TurnSeen>> {
    let mut seen = Vec::with_capacity(threads.len());
    for thread in threads {
        let started = Instant::now();
        peer.request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "stream", "text_elements": []}]}),
        )
        .await?;
        seen.push(TurnSeen {
            started,
            first_delta: None,
            last_delta: None,
            completed: started,
            deltas: 0,
            notifications: 0,
            latencies_ms: Vec::new(),
            written_ms: Vec::new(),
        });
    }
    let mut open = threads.len();
    while open > 0 {
        let (message, at) = peer.next().await?;
        let Some(method) = message["method"].as_str() else {
            if let Some(error) = message.get("error") {
                anyhow::bail!("a request failed: {error}");
            }
            continue;
        };
        let params = &message["params"];
        let Some(index) = params["threadId"]
            .as_str()
            .and_then(|id| threads.iter().position(|t| t == id))
        else {
            continue;
        };
        let turn = &mut seen[index];
        match method {
            "item/agentMessage/delta" => {
                turn.first_delta.get_or_insert(at);
                turn.last_delta = Some(at);
                turn.notifications += 1;
                count(params, turn, at, epoch);
            }
            "turn/completed" => {
                turn.completed = at;
                open -= 1;
                let status = &params["turn"]["status"];
                ensure!(status == "completed", "a turn ended {status}: {params}");
            }
            "error" => anyhow::bail!("the server reported an error: {params}"),
            _ => {}
        }
    }
    Ok(seen)
}

/// Appends one line per paced delta to `path`: server, transport, streams
/// at once, stream, place in the stream, written (ms since the bench
/// began) and latency (ms).
fn log_paced(
    path: &Path,
    target: Target,
    transport: Transport,
    seen: &[TurnSeen],
) -> anyhow::Result<()> {
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for (stream, turn) in seen.iter().enumerate() {
        let deltas = turn.latencies_ms.iter().zip(&turn.written_ms);
        for (place, (latency, written)) in deltas.enumerate() {
            writeln!(
                out,
                "{} {} {} {stream} {place} {written:.3} {latency:.3}",
                target.name(),
                transport.name(),
                seen.len()
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Counts a delta notification's deltas (and their latencies, paced).
fn count(params: &Value, turn: &mut TurnSeen, at: Instant, epoch: Instant) {
    let text = params["delta"].as_str().unwrap_or("");
    if text.starts_with('@') {
        let read = at.duration_since(epoch).as_nanos() as f64;
        for stamp in text.split_whitespace() {
            if let Some(Ok(written)) = stamp.strip_prefix('@').map(str::parse::<f64>) {
                turn.latencies_ms.push((read - written) / 1e6);
                turn.written_ms.push(written / 1e6);
                turn.deltas += 1;
            }
        }
    } else {
        turn.deltas += text.len() / FAST_DELTA.len();
    }
}

/// Waits until the server uses no CPU for a while (no `/proc` tick in
/// [`QUIET`]), at most [`SETTLE_LIMIT`]: a server idle between turns has
/// finished whatever it started on its own.
async fn settle(pid: u32) -> anyhow::Result<()> {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let mut last = cpu_time(pid)?;
    while Instant::now() < deadline {
        tokio::time::sleep(QUIET).await;
        let now = cpu_time(pid)?;
        if now == last {
            return Ok(());
        }
        last = now;
    }
    eprintln!("    (the server was still busy after {SETTLE_LIMIT:?} idle between turns)");
    Ok(())
}

const QUIET: Duration = Duration::from_millis(300);
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

fn first_delta(seen: &TurnSeen) -> anyhow::Result<Instant> {
    seen.first_delta.context("the turn streamed no delta")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
