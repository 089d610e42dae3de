//! spool's benchmarks, run by `spool bench`.
//!
//! `spool bench store`: the store on its workloads, each run on
//! a fresh store file, the median of the runs reported as JSON on stdout
//! (progress goes to stderr, so stdout can be piped to a file or `jq`).
//!
//! `bench/compare_agents_sdk.sh` runs (a)–(d) against the Agents SDK's
//! `SQLiteSession` with the same items and sets the two side by side.
//!
//! `spool bench runner` (`runner.rs`): the agent loop's own overhead per
//! model call, with a provider that answers at once.
//!
//! `spool bench server` (`server.rs`): the app server end to end over a
//! WebSocket, in process; with `--store postgres://…`, also two servers
//! on one database (`replicas.rs`).
//!
//! `spool bench mcp` (`mcp.rs`): one MCP tool call through spool's client
//! against a bare rmcp client, over stdio and streamable HTTP.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod args;
mod floor;
mod group_floor;
mod handoff_floor;
mod host;
mod items;
mod layout_floor;
mod live;
mod log_workloads;
#[cfg(feature = "mcp")]
mod mcp;
mod notify_floor;
mod pg_database;
mod pg_layout_floor;
mod read_floor;

use read_floor::Read;
mod replicas;
mod report;
mod runner;
mod runner_floor;
mod server;
mod server_resume;
mod session_workloads;
mod stamping;
mod takeover;
mod workloads;
mod ws_client;

use std::io::Write;
use std::path::Path;

use anyhow::{Context, ensure};
use serde_json::Value;
use spool_store::postgres::PgStore;
use spool_store::{AnyStore, Durability, SqliteStore, StoreOptions};

pub use self::args::{BenchCommand, BenchStoreArgs, WorkloadId};
use self::report::{ItemsInfo, LayoutSplit, Machine, Report, Settings, Target, WorkloadReport};
use self::workloads::{Sample, Sizes, Spec};

/// The store's targets against its floors: (a) within this factor of the
/// one-row floor's (h) time, (b) within that of the batch floor's (i).
const FLOOR_FACTOR: f64 = 1.3;
const BATCH_FLOOR_FACTOR: f64 = 2.0;

pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Store(args) => store(args).await,
        BenchCommand::Runner(args) => runner::runner(args).await,
        BenchCommand::Server(args) => server::server(args).await,
        BenchCommand::Live(args) => live::live(args).await,
        #[cfg(feature = "mcp")]
        BenchCommand::Mcp(args) => mcp::mcp(args).await,
        #[cfg(not(feature = "mcp"))]
        BenchCommand::Mcp(_) => {
            anyhow::bail!("this spool was built without MCP (the `mcp` cargo feature)")
        }
        BenchCommand::Relay(args) => live::relay(args.model_url, args.log, args.store).await,
    }
}

async fn store(args: BenchStoreArgs) -> anyhow::Result<()> {
    let sizes = if args.quick {
        Sizes::QUICK
    } else {
        Sizes::FULL
    };
    let dir = args.dir.unwrap_or_else(std::env::temp_dir);
    ensure!(dir.is_dir(), "--dir {}: not a directory", dir.display());
    let mut selected = match args.workloads.is_empty() {
        true => WorkloadId::ALL.to_vec(),
        false => args.workloads,
    };
    selected.sort();
    selected.dedup();
    let runs = args.runs as usize;
    let machine = Machine::probe();
    if machine.build_profile == "debug" && !args.quick {
        eprintln!("warning: this is a debug build; use --release for numbers worth keeping");
    }

    spool_store::phases::enable(args.phases);
    let items = items::items(sizes.items);
    // Run-major: run 1 of every workload, then run 2, so that a change
    // in this machine's speed over the minutes of a benchmark (a shared,
    // noisy VM) reaches every workload alike, and the ratios between
    // them (spool over its floors) compare runs taken side by side.
    for &id in &selected {
        eprintln!("({}) {}", id.letter(), Spec::new(id, &sizes).description());
    }
    let mut samples: Vec<Vec<Sample>> = selected.iter().map(|_| Vec::with_capacity(runs)).collect();
    for run in 1..=runs {
        for (&id, samples) in selected.iter().zip(&mut samples) {
            // A fresh directory, hence a fresh store file, for every run;
            // removed when dropped, also on error.
            let tmp = tempfile::Builder::new()
                .prefix("spool-bench-")
                .tempdir_in(&dir)
                .with_context(|| format!("cannot create a directory in {}", dir.display()))?;
            let host = host::HostClock::now();
            let mut sample = run_once(id, tmp.path(), &items, &sizes)
                .await
                .with_context(|| format!("workload ({}), run {run}", id.letter()))?;
            // Over the whole run, its setup too: the host's state while it ran.
            let stolen = host.and_then(host::HostClock::steal_pct);
            if let Some(pct) = stolen {
                sample.extra.push(("host_steal_pct", pct));
            }
            eprintln!(
                "({}) run {run}/{runs}: {:.3} s{}",
                id.letter(),
                sample.seconds,
                host::stolen(stolen)
            );
            samples.push(sample);
        }
    }
    let mut reports = Vec::with_capacity(selected.len());
    for (id, samples) in selected.into_iter().zip(samples) {
        let report = Spec::new(id, &sizes).report(&samples);
        eprintln!("({}) median: {}", id.letter(), headline(&report));
        reports.push(report);
        // The same workload on PostgreSQL, beside it, when asked.
        if let Some(url) = &args.postgres
            && id.runs_on_postgres()
        {
            let samples = postgres_runs(id, url, runs, &items, &sizes).await?;
            let report = Spec::new(id, &sizes).report_postgres(&samples);
            eprintln!("    postgres median: {}", headline(&report));
            reports.push(report);
        }
    }

    // Median time of one workload over another's, when both ran.
    let time_ratio = |over: &str, under: &str| match (find(&reports, over), find(&reports, under)) {
        (Some(o), Some(u)) => Some(o.median_s / u.median_s),
        _ => None,
    };
    let pg = |name: &str| {
        reports
            .iter()
            .find(|r| r.name == name && r.backend == "postgres")
    };
    let pg_time_ratio = |over: &str, under: &str| match (pg(over), pg(under)) {
        (Some(o), Some(u)) => Some(o.median_s / u.median_s),
        _ => None,
    };
    let a_vs_floor = time_ratio("a", "h")
        .map(|ratio| Target::at_most(FLOOR_FACTOR, "x the floor's time", ratio));
    let b_vs_batch_floor = time_ratio("b", "i")
        .map(|ratio| Target::at_most(BATCH_FLOOR_FACTOR, "x the batch floor's time", ratio));
    let layout = LayoutSplit {
        a_vs_layout_floor: time_ratio("a", "j"),
        a_vs_handoff_floor: time_ratio("a", "m"),
        handoff_floor_vs_layout_floor: time_ratio("m", "j"),
        layout_floor_a_vs_floor: time_ratio("j", "h"),
        b_vs_layout_floor: time_ratio("b", "k"),
        layout_floor_b_vs_batch_floor: time_ratio("k", "i"),
        e_vs_layout_floor: time_ratio("e", "l"),
        e_vs_group_floor: time_ratio("e", "r"),
        group_floor_vs_layout_floor: time_ratio("r", "l"),
        e_vs_layout_floor_postgres: pg_time_ratio("e", "l"),
        c_vs_read_floor: time_ratio("c", "q"),
        d_vs_read_floor: time_ratio("d", "o"),
        n_vs_read_floor: time_ratio("n", "p"),
    };
    for (what, ratio) in [
        (
            "(b) time / batch floor (i) time",
            b_vs_batch_floor.as_ref().map(|t| t.measured),
        ),
        ("(a) time / layout floor (j) time", layout.a_vs_layout_floor),
        (
            "(a) time / hand-off floor (m) time",
            layout.a_vs_handoff_floor,
        ),
        (
            "(m) time / layout floor (j) time",
            layout.handoff_floor_vs_layout_floor,
        ),
        ("(j) time / floor (h) time", layout.layout_floor_a_vs_floor),
        ("(b) time / layout floor (k) time", layout.b_vs_layout_floor),
        (
            "(k) time / batch floor (i) time",
            layout.layout_floor_b_vs_batch_floor,
        ),
        ("(e) time / layout floor (l) time", layout.e_vs_layout_floor),
        (
            "(e) time / group-commit floor (r) time",
            layout.e_vs_group_floor,
        ),
        (
            "(r) time / layout floor (l) time",
            layout.group_floor_vs_layout_floor,
        ),
        (
            "PostgreSQL: (e) time / layout floor (l) time",
            layout.e_vs_layout_floor_postgres,
        ),
        ("(c) time / read floor (q) time", layout.c_vs_read_floor),
        ("(d) time / read floor (o) time", layout.d_vs_read_floor),
        ("(n) time / read floor (p) time", layout.n_vs_read_floor),
    ] {
        if let Some(ratio) = ratio {
            eprintln!("{what}: {ratio:.2}x");
        }
    }
    let report = Report {
        machine,
        settings: Settings {
            runs,
            quick: args.quick,
            dir: dir.display().to_string(),
            durability: "full",
        },
        items: ItemsInfo {
            count: items.len(),
            fnv1a64: items::digest(&items),
        },
        workloads: reports,
        a_vs_floor,
        b_vs_batch_floor,
        layout,
    };
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &report)?;
    writeln!(stdout)?;
    Ok(())
}

/// Where one run's fresh store is: a directory of its own (a SQLite
/// file in it), or a database of its own.
pub(crate) enum StoreAt<'a> {
    Sqlite(&'a Path),
    Postgres(&'a str),
}

/// One run of one workload in `dir`, a directory of its own.
async fn run_once(
    id: WorkloadId,
    dir: &Path,
    items: &[Value],
    sizes: &Sizes,
) -> anyhow::Result<Sample> {
    let at = StoreAt::Sqlite(dir);
    match id {
        WorkloadId::H => floor::floor(dir, items.to_vec(), 1).await,
        WorkloadId::I => floor::floor(dir, items.to_vec(), sizes.batch).await,
        WorkloadId::J => layout_floor::one_session(dir, items.to_vec(), 1).await,
        WorkloadId::K => layout_floor::one_session(dir, items.to_vec(), sizes.batch).await,
        WorkloadId::L => layout_floor::concurrent(dir, sizes.appenders, sizes.appends_each).await,
        WorkloadId::M => handoff_floor::one_session(dir, items.to_vec()).await,
        WorkloadId::R => group_floor::concurrent(dir, sizes.appenders, sizes.appends_each).await,
        WorkloadId::O => {
            read_floor::newest(dir, items.to_vec(), sizes.batch, Read::tail(sizes, true)).await
        }
        WorkloadId::P => {
            read_floor::newest(dir, items.to_vec(), sizes.batch, Read::tail(sizes, false)).await
        }
        WorkloadId::Q => {
            read_floor::newest(dir, items.to_vec(), sizes.batch, Read::all(sizes)).await
        }
        _ => run_store_workload(id, &at, items, sizes).await,
    }
}

/// One run of one of the store's workloads, (a) to (g) or (n), on `at`.
async fn run_store_workload(
    id: WorkloadId,
    at: &StoreAt<'_>,
    items: &[Value],
    sizes: &Sizes,
) -> anyhow::Result<Sample> {
    match id {
        WorkloadId::A => session_workloads::add(at, items.to_vec(), 1).await,
        WorkloadId::B => session_workloads::add(at, items.to_vec(), sizes.batch).await,
        WorkloadId::C => session_workloads::get_all(at, items.to_vec(), sizes).await,
        WorkloadId::D => session_workloads::get_tail(at, items.to_vec(), sizes, false).await,
        WorkloadId::N => session_workloads::get_tail(at, items.to_vec(), sizes, true).await,
        WorkloadId::E => session_workloads::concurrent(at, sizes).await,
        WorkloadId::F => log_workloads::deltas(at, sizes).await,
        WorkloadId::G => log_workloads::llm_view(at, sizes).await,
        WorkloadId::L => match at {
            StoreAt::Postgres(url) => {
                pg_layout_floor::concurrent(url, sizes.appenders, sizes.appends_each).await
            }
            StoreAt::Sqlite(dir) => {
                layout_floor::concurrent(dir, sizes.appenders, sizes.appends_each).await
            }
        },
        floor => anyhow::bail!("({}) is a floor: SQLite only", floor.letter()),
    }
}

/// A fresh store at `at`, at the durability every workload uses.
async fn open_store(at: &StoreAt<'_>) -> anyhow::Result<AnyStore> {
    let options = StoreOptions {
        durability: Durability::Full,
        ..StoreOptions::default()
    };
    Ok(match at {
        StoreAt::Sqlite(dir) => SqliteStore::open(dir.join("spool.db"), options)?.into(),
        StoreAt::Postgres(url) => PgStore::open(url, options).await?.into(),
    })
}

/// The runs of workload `id` on PostgreSQL, each on a database of its own.
async fn postgres_runs(
    id: WorkloadId,
    url: &str,
    runs: usize,
    items: &[Value],
    sizes: &Sizes,
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::with_capacity(runs);
    for run in 1..=runs {
        let db = pg_database::FreshDatabase::create(url).await?;
        let sample = run_store_workload(id, &StoreAt::Postgres(db.url()), items, sizes).await;
        db.drop_now().await?;
        let sample = sample
            .with_context(|| format!("workload ({}) on PostgreSQL, run {run}", id.letter()))?;
        eprintln!("    postgres run {run}/{runs}: {:.3} s", sample.seconds);
        samples.push(sample);
    }
    Ok(samples)
}

fn find<'a>(reports: &'a [WorkloadReport], name: &str) -> Option<&'a WorkloadReport> {
    reports
        .iter()
        .find(|r| r.name == name && r.backend == "sqlite")
}

fn headline(report: &WorkloadReport) -> String {
    let target = match &report.target {
        Some(t) => format!(
            " (target {} {} {}: {})",
            t.op,
            t.value,
            t.unit,
            if t.holds { "holds" } else { "MISSED" }
        ),
        None => String::new(),
    };
    if report.value >= 100.0 {
        format!("{:.0} {}{target}", report.value, report.unit)
    } else {
        format!("{:.3} {}{target}", report.value, report.unit)
    }
}
