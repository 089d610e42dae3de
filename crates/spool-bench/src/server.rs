//! `spool bench server`: the app server end to end, in process.
//!
//! A `spool_server::Hub` on a fresh `SqliteStore` (the options `spool
//! serve` uses: full durability, deltas through group commit) is served on
//! a real WebSocket listener (`Listeners::bind` on `ws://127.0.0.1:0`); one
//! client in the same process speaks JSON-RPC to it over TCP with a
//! minimal WebSocket client of its own. The model is a provider whose
//! deltas carry the instant they were emitted (nanoseconds since the
//! bench's start), so the client can tell how long a delta took to reach it.
//!
//! - (a) throughput, notifications/s: after one short warm-up turn (the
//!   process's first model call loads the tokenizer), one turn of
//!   `--deltas` deltas streamed as fast as the provider is polled; every
//!   notification the client receives counts, from `turn/start` sent to
//!   `turn/completed` received; the log is checked to hold every delta.
//! - (b) delivery latency: `--threads` threads streaming `--thread-deltas`
//!   deltas each at once, each thread a delta every `--pace-ms` (10 ms by
//!   default: 100 tokens/s per thread, like a model streaming; each stream
//!   starts at its own phase within a period); p50/p99/max of (client
//!   received − provider emitted) per delta, and the p99 of how late the
//!   provider's timer emitted them (not part of the latency). `--pace-ms 0`
//!   streams as fast as polled: that measures the backlog, not delivery.
//! - (c) resident memory per loaded idle thread: the RSS growth
//!   (`/proc/self/statm`) over `--idle-threads` `thread/start`s, per thread.
//! - (d) `thread/resume` (with turns) of a thread of `--items` items:
//!   request sent to reply received; the median of a few resumes
//!   (`server_resume.rs`).
//! - (e), with `spool --store postgres://… bench server`: two servers on
//!   one database (`replicas.rs`);
//! - (f), likewise: a takeover after `kill -9` of the server running a
//!   turn, on real `spool serve` processes (`takeover.rs`).
//!
//! `--workloads` runs some of them only (the others are `null` in the
//! report).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde::Serialize;
use serde_json::{Value, json};
use spool_runtime::Agent;
use spool_server::{AccessRules, Hub, HubOptions, ListenUrl, Listeners, Shutdown, ThreadSettings};
use spool_store::{SqliteStore, Store, StoreOptions};

use super::ws_client::Client;

use super::args::{BenchServerArgs, ServerWorkload};
use super::report::{Machine, percentile, round};
use super::server_resume;
use super::stamping::{Stamping, delta_stamp};

const TARGET_NOTIFICATIONS_PER_S: f64 = 100_000.0;
const TARGET_P99_MS: f64 = 2.0;
const TARGET_KIB_PER_THREAD: f64 = 64.0;
/// How long the client waits for any one message before giving up.
pub(super) const WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Serialize)]
struct Report {
    workload: &'static str,
    transport: &'static str,
    store: &'static str,
    notifications: Option<Notifications>,
    latency: Option<Latency>,
    idle_thread_memory: Option<Memory>,
    resume: Option<server_resume::Resume>,
    /// (e), with `spool --store postgres://… bench server`.
    replicas: Option<super::replicas::Replicas>,
    /// (f), likewise.
    takeover: Option<super::takeover::Takeover>,
    machine: Machine,
}

#[derive(Debug, Serialize)]
struct Notifications {
    deltas: usize,
    notifications: usize,
    seconds: f64,
    per_s: f64,
    target_per_s: f64,
    holds: bool,
    /// The thread's log ends at this seq (every delta logged).
    last_seq: u64,
}

#[derive(Debug, Serialize)]
struct Latency {
    threads: usize,
    deltas_per_thread: usize,
    /// Between two deltas of one thread; 0: as fast as polled.
    pace_ms: f64,
    samples: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// How late the provider emitted its deltas (emitted − due), p99: the
    /// runtime's timer and scheduling slack, not part of the latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    emit_lag_p99_ms: Option<f64>,
    target_p99_ms: f64,
    holds: bool,
}

#[derive(Debug, Serialize)]
struct Memory {
    threads: usize,
    rss_before_kib: f64,
    rss_after_kib: f64,
    kib_per_thread: f64,
    target_kib_per_thread: f64,
    holds: bool,
}

pub async fn server(args: BenchServerArgs) -> anyhow::Result<()> {
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    ensure!(dir.is_dir(), "--dir {}: not a directory", dir.display());
    let machine = Machine::probe();
    if machine.build_profile == "debug" {
        eprintln!("warning: this is a debug build; use --release for numbers worth keeping");
    }
    let tmp = tempfile::Builder::new()
        .prefix("spool-bench-server-")
        .tempdir_in(&dir)
        .with_context(|| format!("cannot create a directory in {}", dir.display()))?;
    let report = run(&args, tmp.path(), machine).await?;
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &report)?;
    writeln!(stdout)?;
    Ok(())
}

async fn run(args: &BenchServerArgs, dir: &Path, machine: Machine) -> anyhow::Result<Report> {
    ensure!(
        args.pace_ms.is_finite() && (0.0..=10_000.0).contains(&args.pace_ms),
        "--pace-ms {}: not a number of milliseconds from 0 to 10000",
        args.pace_ms
    );
    let pace = Duration::from_secs_f64(args.pace_ms / 1000.0);
    let store = SqliteStore::open(dir.join("spool.db"), StoreOptions::default())?;
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    let cwd = workspace.display().to_string();
    let provider = Arc::new(Stamping::new());
    let options = hub_options(&cwd);
    let hub = Hub::new(store.clone(), provider.clone(), options);
    let (addr, shutdown, running) = serve_on_loopback(&hub).await?;
    eprintln!("server: listening on ws://{addr}");
    let mut client = Client::connect_initialized(&addr).await?;

    let runs = |w: ServerWorkload| args.workloads.is_empty() || args.workloads.contains(&w);
    // (c) first, on a heap the other workloads have not grown.
    let mut memory = None;
    if runs(ServerWorkload::C) {
        let m = idle_memory(&mut client, args.idle_threads as usize).await?;
        eprintln!(
            "(c) {} idle threads: {:.1} KiB per thread",
            m.threads, m.kib_per_thread
        );
        memory = Some(m);
    }
    let mut resumed = None;
    if runs(ServerWorkload::D) {
        let r = server_resume::resume(&mut client, &store, &cwd, args.items as usize).await?;
        eprintln!(
            "(d) thread/resume of {} items: median {:.2} ms",
            r.items, r.median_ms
        );
        resumed = Some(r);
    }
    let mut notified = None;
    if runs(ServerWorkload::A) {
        let n = notifications(&mut client, &store, &provider, args.deltas as usize).await?;
        eprintln!(
            "(a) {} notifications in {:.3} s: {:.0}/s",
            n.notifications, n.seconds, n.per_s
        );
        notified = Some(n);
    }
    let mut latency = None;
    if runs(ServerWorkload::B) {
        let l = delivery_latency(
            &mut client,
            &provider,
            args.threads as usize,
            args.thread_deltas as usize,
            pace,
        )
        .await?;
        eprintln!(
            "(b) {} threads at once, a delta every {} ms each: p50 {:.3} ms, p99 {:.3} ms",
            l.threads, l.pace_ms, l.p50_ms, l.p99_ms
        );
        latency = Some(l);
    }

    drop(client);
    shutdown.run(&hub, Duration::from_secs(10)).await;
    running.finish(Duration::from_secs(5)).await;
    store.close().await?;

    // (e) last, with the first server gone.
    let mut replicas = None;
    let asked_e = args.workloads.contains(&ServerWorkload::E);
    match &args.postgres {
        Some(url) if runs(ServerWorkload::E) => {
            let sizes = super::replicas::Sizes {
                deltas: args.replica_deltas as usize,
                threads: args.replica_threads as usize,
                thread_deltas: args.thread_deltas as usize,
                pace,
            };
            replicas = Some(super::replicas::two_servers(url, dir, &sizes).await?);
        }
        None if asked_e => {
            anyhow::bail!(
                "(e) runs two servers on PostgreSQL: `spool --store postgres://… bench server`"
            )
        }
        _ => {}
    }
    let mut takeover = None;
    match &args.postgres {
        Some(url) if runs(ServerWorkload::F) => {
            takeover = Some(super::takeover::takeover(url, dir, args.takeovers as usize).await?);
        }
        None if args.workloads.contains(&ServerWorkload::F) => {
            anyhow::bail!(
                "(f) runs two servers on PostgreSQL: `spool --store postgres://… bench server`"
            )
        }
        _ => {}
    }
    Ok(Report {
        workload: "server",
        transport: "WebSocket on 127.0.0.1 (spool_server::Listeners), one client in process",
        store: "SqliteStore, StoreOptions::default() (full durability, group commit)",
        notifications: notified,
        latency,
        idle_thread_memory: memory,
        resume: resumed,
        replicas,
        takeover,
        machine,
    })
}

/// Serves `hub` on a WebSocket listener on a free port of 127.0.0.1: the
/// address to connect to, and what stops it.
pub(super) async fn serve_on_loopback(
    hub: &Arc<Hub>,
) -> anyhow::Result<(String, Shutdown, spool_server::Running)> {
    let listeners = Listeners::bind(
        &[ListenUrl::Ws("127.0.0.1:0".to_owned())],
        None,
        AccessRules::default(),
    )
    .await?;
    let url = listeners
        .addresses()
        .into_iter()
        .next()
        .context("no listener bound")?;
    let shutdown = Shutdown::new();
    let running = listeners.serve(hub.clone(), shutdown.clone());
    Ok((
        url.trim_start_matches("ws://").to_owned(),
        shutdown,
        running,
    ))
}

/// The hub's options: a provider named `bench`, the scripted model, every
/// thread in `cwd`.
pub(super) fn hub_options(cwd: &str) -> HubOptions {
    let agent_cwd = cwd.to_owned();
    HubOptions {
        provider_name: "bench".to_owned(),
        defaults: ThreadSettings {
            model: Some("scripted".to_owned()),
            cwd: Some(cwd.to_owned()),
            ..ThreadSettings::default()
        },
        agent_for: Arc::new(move |settings: &ThreadSettings| {
            let root = settings.cwd.clone().unwrap_or_else(|| agent_cwd.clone());
            Agent::new("bench", root).with_model("scripted")
        }),
        rules_file: None,
        compaction: None,
        ceilings: spool_server::Ceilings::none(),
        facts: spool_server::ServerFacts::default(),
        max_input_chars: spool_server::DEFAULT_MAX_INPUT_CHARS,
        mcp: None,
    }
}

/// (a): one turn of `deltas` deltas.
async fn notifications(
    client: &mut Client,
    store: &SqliteStore,
    provider: &Stamping,
    deltas: usize,
) -> anyhow::Result<Notifications> {
    // One short turn first: the process's first model call pays one-time
    // costs (the tokenizer's tables, first reads) that are not per
    // notification.
    let warm_up = client.start_thread().await?;
    provider.set_deltas(10);
    client
        .send_request("turn/start", turn_params(&warm_up))
        .await?;
    while !client.next_frame().await?.contains("\"turn/completed\"") {}
    let thread = client.start_thread().await?;
    provider.set_deltas(deltas);
    let start = Instant::now();
    let id = client
        .send_request("turn/start", turn_params(&thread))
        .await?;
    let mut received = 0usize;
    let mut delta_count = 0usize;
    loop {
        let frame = client.next_frame().await?;
        if frame.contains("\"item/agentMessage/delta\"") {
            delta_count += 1;
        } else if frame.contains("\"turn/completed\"") {
            received += 1;
            break;
        } else if is_reply(&frame, id) {
            continue;
        }
        received += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    ensure!(
        delta_count == deltas,
        "{delta_count} deltas received, not {deltas}"
    );
    store.flush().await?;
    let last_seq = store
        .thread(&thread)
        .await?
        .map(|t| t.last_seq)
        .unwrap_or(0);
    ensure!(
        last_seq >= deltas as u64,
        "the log ends at seq {last_seq}, below the {deltas} deltas streamed"
    );
    let per_s = received as f64 / seconds;
    Ok(Notifications {
        deltas,
        notifications: received,
        seconds: round(seconds, 4),
        per_s: round(per_s, 0),
        target_per_s: TARGET_NOTIFICATIONS_PER_S,
        holds: per_s >= TARGET_NOTIFICATIONS_PER_S,
        last_seq,
    })
}

/// (b): `threads` threads streaming at once, each a delta every `pace`
/// (as fast as polled when zero).
async fn delivery_latency(
    client: &mut Client,
    provider: &Stamping,
    threads: usize,
    deltas: usize,
    pace: Duration,
) -> anyhow::Result<Latency> {
    let mut ids = Vec::with_capacity(threads);
    for _ in 0..threads {
        ids.push(client.start_thread().await?);
    }
    provider.set_deltas(deltas);
    provider.set_pace(pace);
    for thread in &ids {
        client
            .send_request("turn/start", turn_params(thread))
            .await?;
    }
    let mut latencies_ns = Vec::with_capacity(threads * deltas);
    let mut lags_ns = Vec::with_capacity(threads * deltas);
    let mut completed = 0;
    while completed < threads {
        let frame = client.next_frame().await?;
        let now = provider.now_ns();
        if let Some(stamp) = delta_stamp(&frame) {
            latencies_ns.push(now.saturating_sub(stamp.emitted) as f64);
            if let Some(due) = stamp.due {
                lags_ns.push(stamp.emitted.saturating_sub(due) as f64);
            }
        } else if frame.contains("\"turn/completed\"") {
            completed += 1;
        }
    }
    provider.set_pace(Duration::ZERO);
    ensure!(
        latencies_ns.len() == threads * deltas,
        "{} deltas received, not {}",
        latencies_ns.len(),
        threads * deltas
    );
    latencies_ns.sort_by(f64::total_cmp);
    lags_ns.sort_by(f64::total_cmp);
    let ms = |values: &[f64], p: f64| round(percentile(values, p) / 1e6, 3);
    let p99_ms = ms(&latencies_ns, 0.99);
    Ok(Latency {
        threads,
        deltas_per_thread: deltas,
        pace_ms: round(pace.as_secs_f64() * 1000.0, 3),
        samples: latencies_ns.len(),
        p50_ms: ms(&latencies_ns, 0.5),
        p99_ms,
        max_ms: ms(&latencies_ns, 1.0),
        emit_lag_p99_ms: (!lags_ns.is_empty()).then(|| ms(&lags_ns, 0.99)),
        target_p99_ms: TARGET_P99_MS,
        holds: p99_ms <= TARGET_P99_MS,
    })
}

/// (c): RSS growth over `threads` loaded idle threads.
async fn idle_memory(client: &mut Client, threads: usize) -> anyhow::Result<Memory> {
    // Warm up: the first threads pay for caches and connections.
    for _ in 0..10 {
        client.start_thread().await?;
    }
    let before = settled_rss_kib().await?;
    for _ in 0..threads {
        client.start_thread().await?;
    }
    let after = settled_rss_kib().await?;
    let per_thread = (after - before) / threads as f64;
    Ok(Memory {
        threads,
        rss_before_kib: before,
        rss_after_kib: after,
        kib_per_thread: round(per_thread, 2),
        target_kib_per_thread: TARGET_KIB_PER_THREAD,
        holds: per_thread <= TARGET_KIB_PER_THREAD,
    })
}

pub(super) fn turn_params(thread: &str) -> Value {
    json!({"threadId": thread, "input": [{"type": "text", "text": "Stream."}]})
}

/// Whether `frame` is the reply to request `id`.
pub(super) fn is_reply(frame: &str, id: u64) -> bool {
    !frame.contains("\"method\"") && frame.contains(&format!("\"id\":{id}"))
}

/// The resident set once the allocator has given back what is free: it
/// keeps a free page for a quarter of a second and looks for such pages
/// once a second when nothing allocates (`spool-cli/src/alloc.rs`), so
/// what the workloads before this one freed would otherwise count.
async fn settled_rss_kib() -> anyhow::Result<f64> {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    rss_kib()
}

/// The process's resident set, in KiB (`/proc/self/statm`, 4 KiB pages).
fn rss_kib() -> anyhow::Result<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").context("/proc/self/statm")?;
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .context("/proc/self/statm has no resident field")?;
    Ok(pages * 4.0)
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
