//! `spool bench …` on the command line.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time the store on its workloads (a)–(i); JSON on stdout, progress
    /// on stderr. Build with `--release` for numbers worth keeping.
    Store(BenchStoreArgs),
    /// Time the agent loop's own overhead per model call, with a
    /// scripted provider that answers at once; JSON on stdout, progress on
    /// stderr. Build with `--release` for numbers worth keeping.
    Runner(BenchRunnerArgs),
    /// Time the app server (`docs/internals/server.md`) end to end over a
    /// WebSocket, in process: notifications/s, delta latency with many
    /// threads streaming, memory per idle thread, `thread/resume` of a long
    /// thread; JSON on stdout, progress on stderr. Build with `--release`.
    Server(BenchServerArgs),
    /// Time the path users run: a streaming model server on a loopback
    /// socket, `spool serve` as a child over stdio and WebSocket, a client
    /// parsing every message (and Codex's app server on the same streams
    /// with `--codex-bin`): deltas/s, server CPU per delta, first-delta
    /// latency, paced delivery latency; JSON on stdout. Build with
    /// `--release`.
    Live(BenchLiveArgs),
    /// Time one MCP tool call through spool's client against a bare rmcp
    /// client (the floor), over stdio and streamable HTTP, with the test
    /// MCP server (`spool-mcp-test-server`, built beside spool): median
    /// and p99 per call, and their ratio. Build with `--release`.
    Mcp(BenchMcpArgs),
    /// The relay floor `bench live` runs as a child: relays model deltas
    /// from stdin's `turn/start`s to stdout and nothing else.
    #[command(hide = true)]
    Relay(BenchRelayArgs),
}

#[derive(Debug, clap::Args)]
pub struct BenchMcpArgs {
    /// Timed calls per path and transport (after 50 warm-up calls).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub calls: u32,
    /// JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The test MCP server (default: `spool-mcp-test-server` beside this
    /// `spool`, where `cargo build -p spool-mcp` puts it).
    #[arg(long)]
    pub server: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct BenchRelayArgs {
    /// The model server's base URL (`http://127.0.0.1:PORT/v1`).
    #[arg(long)]
    pub model_url: String,
    /// Also append every delta to this file, synced (`fdatasync`) within
    /// 5 ms of its write as spool commits deltas: the durable relay floor.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Also keep every delta as a row of spool's log in a new store file
    /// at this path, committed within 5 ms of its write: the store relay
    /// floor.
    #[arg(long, conflicts_with = "log")]
    pub store: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct BenchLiveArgs {
    /// Reply lengths timed for throughput, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2_000u32, 20_000, 100_000])]
    pub deltas: Vec<u32>,
    /// Turns per reply length, at least (see `--timed-deltas`); the
    /// median is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Replies shorter than this are timed over as many turns as stream
    /// this many deltas in all (a 2,000-delta reply streams for ~10 ms,
    /// where one scheduling hiccup moves its rate by half); 0: `--runs`
    /// turns only.
    #[arg(long, default_value_t = 20_000)]
    pub timed_deltas: u32,
    /// Paced: streams at once in the second paced workload (the first has one).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub streams: u32,
    /// Paced: deltas each stream writes.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub paced_deltas: u32,
    /// Paced: milliseconds between two deltas of one stream.
    #[arg(long, default_value_t = 10.0)]
    pub pace_ms: f64,
    /// Paced: also append every delta's latency to this file, a line each
    /// (server, transport, streams, stream, place, written ms, latency ms).
    #[arg(long)]
    pub paced_log: Option<PathBuf>,
    /// A Codex binary (`codex app-server`) to run the same workloads
    /// against, alternating with spool (see `bench/compare_codex.sh`).
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct BenchServerArgs {
    /// (a) Deltas streamed in the one turn timed for notifications/s.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub deltas: u32,
    /// (b) Threads streaming at once.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: u32,
    /// (b) Deltas each of those threads streams.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub thread_deltas: u32,
    /// (b) Milliseconds between two deltas of one thread, as a model
    /// streaming tokens (10: 100 tokens/s per thread, 10,000 deltas/s in
    /// all with 100 threads); 0 streams as fast as polled, which measures
    /// the backlog rather than delivery.
    #[arg(long, default_value_t = 10.0)]
    pub pace_ms: f64,
    /// (c) Idle threads loaded to measure memory per thread.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub idle_threads: u32,
    /// (d) Items of the thread resumed (two per turn).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(2..))]
    pub items: u32,
    /// (e) Deltas of the turn timed for events/s across servers.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub replica_deltas: u32,
    /// (e) Threads streaming at once, paced by `--pace-ms`, for the
    /// delivery latency across servers (`--thread-deltas` each).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub replica_threads: u32,
    /// (f) Takeovers timed, each on a fresh database.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..100))]
    pub takeovers: u32,
    /// Which workloads to run, comma-separated (default: all, a to d, and
    /// e and f with `spool --store postgres://… bench server`).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Vec<ServerWorkload>,
    /// Where the temporary store goes (default: the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// A PostgreSQL server (`spool --store postgres://… bench server`):
    /// (e) runs two servers on a database of their own there.
    #[arg(skip)]
    pub postgres: Option<String>,
}

/// The workloads of `spool bench server`, named by their letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ServerWorkload {
    A,
    B,
    C,
    D,
    /// Two servers on one PostgreSQL database.
    E,
    /// Takeover after `kill -9` of the server running a turn (two `spool
    /// serve` processes on one PostgreSQL database).
    F,
}

#[derive(Debug, clap::Args)]
pub struct BenchRunnerArgs {
    /// Model calls answered with a tool call in the one turn (a last call
    /// answers with text); one step is the time from one model request to
    /// the next.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..100_000))]
    pub steps: u32,
    /// Runs per durability, each on a fresh store file; the median of the
    /// runs' statistics is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Where the temporary store files go (default: the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct BenchStoreArgs {
    /// Which workloads to run, comma-separated (default: all, a to n).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Vec<WorkloadId>,
    /// Runs per workload, each on a fresh store file; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Tiny sizes, to check that every workload works (the numbers mean nothing).
    #[arg(long)]
    pub quick: bool,
    /// Also time the phases of an append, (a), (b) and (e): mean times of
    /// each phase per call or commit, and WAL frames per commit, in each
    /// run's `extra` and on stderr. The clock reads cost a little.
    #[arg(long)]
    pub phases: bool,
    /// Where the temporary store files go (default: the system temp dir).
    /// Compare only numbers taken on the same filesystem.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// A PostgreSQL server (`spool --store postgres://… bench store`): the
    /// store's workloads, (a) to (g) and (n), run there too, beside
    /// SQLite's, each run on a database of its own.
    #[arg(skip)]
    pub postgres: Option<String>,
}

/// The store's workloads, named by their letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum WorkloadId {
    A,
    B,
    C,
    D,
    E,
    F,
    G,
    H,
    I,
    J,
    K,
    L,
    M,
    N,
    O,
    P,
    Q,
    R,
}

impl WorkloadId {
    /// The workloads that run on PostgreSQL too: the store's own, and the
    /// layout floor (l) beside (e).
    pub fn runs_on_postgres(self) -> bool {
        matches!(
            self,
            WorkloadId::A
                | WorkloadId::B
                | WorkloadId::C
                | WorkloadId::D
                | WorkloadId::E
                | WorkloadId::F
                | WorkloadId::G
                | WorkloadId::L
                | WorkloadId::N
        )
    }

    pub const ALL: [WorkloadId; 18] = [
        WorkloadId::A,
        WorkloadId::B,
        WorkloadId::C,
        WorkloadId::D,
        WorkloadId::E,
        WorkloadId::F,
        WorkloadId::G,
        WorkloadId::H,
        WorkloadId::I,
        WorkloadId::J,
        WorkloadId::K,
        WorkloadId::L,
        WorkloadId::M,
        WorkloadId::N,
        WorkloadId::O,
        WorkloadId::P,
        WorkloadId::Q,
        WorkloadId::R,
    ];

    pub fn letter(self) -> &'static str {
        match self {
            WorkloadId::A => "a",
            WorkloadId::B => "b",
            WorkloadId::C => "c",
            WorkloadId::D => "d",
            WorkloadId::E => "e",
            WorkloadId::F => "f",
            WorkloadId::G => "g",
            WorkloadId::H => "h",
            WorkloadId::I => "i",
            WorkloadId::J => "j",
            WorkloadId::K => "k",
            WorkloadId::L => "l",
            WorkloadId::M => "m",
            WorkloadId::N => "n",
            WorkloadId::O => "o",
            WorkloadId::P => "p",
            WorkloadId::Q => "q",
            WorkloadId::R => "r",
        }
    }
}
