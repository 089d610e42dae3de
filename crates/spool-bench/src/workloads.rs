//! What each workload is: its sizes, its description, what one operation
//! is, the unit of its headline number and its target.

use super::args::WorkloadId;
use super::report::{Target, WorkloadReport, median};

/// The sizes of every workload: the full ones, or tiny ones for `--quick`.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Items of (a), (b), (c), (d), (h), (i), (j) and (k).
    pub items: usize,
    /// Items per `add_items` call in (b) and per transaction in (i), and
    /// per call in the setup of (c) and (d).
    pub batch: usize,
    /// (d): the `limit` of each call and how many calls.
    pub tail_limit: usize,
    pub tail_calls: usize,
    /// (c) and (q): how many times the whole session is read.
    pub all_reads: usize,
    /// (e): concurrent appenders and single-item appends each.
    pub appenders: usize,
    pub appends_each: usize,
    /// (f): deltas on the one in-progress item.
    pub deltas: usize,
    /// (g): items on the thread (two per turn) and the token budget.
    pub llm_items: usize,
    pub llm_budget: usize,
}

impl Sizes {
    pub const FULL: Sizes = Sizes {
        items: 10_000,
        batch: 100,
        tail_limit: 50,
        tail_calls: 2_000,
        all_reads: 10,
        appenders: 16,
        appends_each: 1_000,
        deltas: 100_000,
        llm_items: 100_000,
        llm_budget: 20_000,
    };

    pub const QUICK: Sizes = Sizes {
        items: 200,
        batch: 10,
        tail_limit: 50,
        tail_calls: 20,
        all_reads: 2,
        appenders: 4,
        appends_each: 25,
        deltas: 500,
        llm_items: 400,
        llm_budget: 20_000,
    };
}

/// How a workload's headline number is derived from its median run.
#[derive(Debug, Clone, Copy)]
enum Headline {
    /// Operations per second, in this unit (`items/s`, `deltas/s`).
    Rate(&'static str),
    /// Milliseconds per operation (a latency).
    MsPerOp(&'static str),
}

/// The timed part of one run, plus untimed numbers worth reporting.
#[derive(Debug, Clone)]
pub struct Sample {
    pub seconds: f64,
    pub extra: Vec<(&'static str, f64)>,
}

impl Sample {
    pub fn timed(elapsed: std::time::Duration) -> Self {
        Sample {
            seconds: elapsed.as_secs_f64(),
            extra: Vec::new(),
        }
    }
}

/// The description of a workload at the given sizes.
pub struct Spec {
    id: WorkloadId,
    description: String,
    ops: usize,
    op: &'static str,
    headline: Headline,
}

impl Spec {
    pub fn new(id: WorkloadId, s: &Sizes) -> Spec {
        let (description, ops, op, headline) = match id {
            WorkloadId::A => (
                format!(
                    "{} items, one add_items([item]) per call, sequential, durability full",
                    s.items
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::B => (
                format!(
                    "the same {} items, add_items of {} items per call, durability full",
                    s.items, s.batch
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::C => (
                format!(
                    "get_items(None) of all {} items, each decoded into a JSON value, {} times",
                    s.items, s.all_reads
                ),
                s.items * s.all_reads,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::D => (
                format!(
                    "get_items(Some({})) on a session of {} items, mean of {} calls",
                    s.tail_limit, s.items, s.tail_calls
                ),
                s.tail_calls,
                "call",
                Headline::MsPerOp("ms/call"),
            ),
            WorkloadId::N => (
                format!(
                    "get_items_raw(Some({})) on a session of {} items, mean of {} calls: (d) \
                     with each item as its JSON text, not built into a Value",
                    s.tail_limit, s.items, s.tail_calls
                ),
                s.tail_calls,
                "call",
                Headline::MsPerOp("ms/call"),
            ),
            WorkloadId::E => (
                format!(
                    "{} concurrent appenders (a tokio task and a session each, one store), \
                     {} single-item durable add_items each",
                    s.appenders, s.appends_each
                ),
                s.appenders * s.appends_each,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::F => (
                format!(
                    "{} agentMessage deltas on one in-progress item, pushed one at a time \
                     through the runtime's Appender, then its completion; timed until the \
                     completion is committed (which commits every delta before it)",
                    s.deltas
                ),
                s.deltas,
                "delta",
                Headline::Rate("deltas/s"),
            ),
            WorkloadId::G => (
                format!(
                    "llm view with a {}-token budget on a thread of {} items ({} turns of a \
                     user and an agent message); setup and a first call (which counts \
                     the tokens not yet cached) untimed; times the next call",
                    s.llm_budget,
                    s.llm_items,
                    s.llm_items / 2
                ),
                1,
                "call",
                Headline::MsPerOp("ms"),
            ),
            WorkloadId::H => (
                format!(
                    "the floor: the loop of (a) on bare rusqlite, {} items, one table, \
                     prepared INSERT of the item JSON + COMMIT per item, WAL, synchronous=FULL",
                    s.items
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::I => (
                format!(
                    "the batch floor: the loop of (b) on bare rusqlite, {} items, one table, \
                     {} prepared INSERTs of the item JSON + COMMIT per transaction, WAL, \
                     synchronous=FULL",
                    s.items, s.batch
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::J => (
                format!(
                    "the layout floor of (a): spool's own rows for the {} items of (a) (events, \
                     turn, item), replayed on bare rusqlite into a fresh store file, one \
                     transaction per add_items call, WAL, synchronous=FULL, through the store \
                     writer's VFS (spool-wal)",
                    s.items
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::K => (
                format!(
                    "the layout floor of (b): spool's own rows for the {} items of (b), \
                     replayed on bare rusqlite, one transaction per add_items call of {} items, \
                     WAL, synchronous=FULL, through spool-wal",
                    s.items, s.batch
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::L => (
                format!(
                    "the layout floor of (e): spool's own rows for the {} sessions of (e) \
                     (made round by round, as concurrent calls are, so their ids grow by round), \
                     replayed on bare rusqlite, one transaction per round of one single-item \
                     call of every session (the largest group commit), WAL, synchronous=FULL, \
                     through spool-wal; \
                     on PostgreSQL, bare connections, one per writer lane, each committing a \
                     round of its sessions' calls in one pipelined transaction",
                    s.appenders
                ),
                s.appenders * s.appends_each,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::M => (
                format!(
                    "the hand-off floor of (a): the rows of (j), {} calls, each handed from an \
                     async caller to a writer thread (std mpsc) and answered after its COMMIT \
                     (tokio oneshot), as the store does for concurrent callers, WAL, synchronous=FULL, through \
                     spool-wal",
                    s.items
                ),
                s.items,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::R => (
                format!(
                    "the group-commit floor of (e): the rows of (l), from {} async callers \
                     (a task a session, each call awaited before the next), handed to a writer \
                     thread (std mpsc) that writes whatever queued in one transaction on bare \
                     rusqlite, commits and answers (tokio oneshot): the simplest group commit, \
                     WAL, synchronous=FULL, through spool-wal",
                    s.appenders
                ),
                s.appenders * s.appends_each,
                "item",
                Headline::Rate("items/s"),
            ),
            WorkloadId::O => (
                format!(
                    "the read floor of (d): the file (d) reads, on bare rusqlite, the newest {} \
                     rows of the session in the model's view on the store's key (its query), \
                     each raw input item parsed into a JSON value, mean of {} calls",
                    s.tail_limit, s.tail_calls
                ),
                s.tail_calls,
                "call",
                Headline::MsPerOp("ms/call"),
            ),
            WorkloadId::P => (
                format!(
                    "the read floor of (n): (o) with each raw input item checked and copied \
                     out as its JSON text, not built into a value, mean of {} calls",
                    s.tail_calls
                ),
                s.tail_calls,
                "call",
                Headline::MsPerOp("ms/call"),
            ),
            WorkloadId::Q => (
                format!(
                    "the read floor of (c): (o) for all {} items, {} times, each parsed into a \
                     JSON value",
                    s.items, s.all_reads
                ),
                s.items * s.all_reads,
                "item",
                Headline::Rate("items/s"),
            ),
        };
        Spec {
            id,
            description,
            ops,
            op,
            headline,
        }
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    /// The report of this workload from its runs on PostgreSQL, with that
    /// backend's targets.
    pub fn report_postgres(self, samples: &[Sample]) -> WorkloadReport {
        let id = self.id;
        let mut report = self.report(samples);
        report.backend = "postgres";
        report.target = postgres_target(id, report.value);
        report
    }

    /// The report of this workload from its runs.
    pub fn report(self, samples: &[Sample]) -> WorkloadReport {
        let runs_s: Vec<f64> = samples.iter().map(|s| s.seconds).collect();
        let median_s = median(&runs_s);
        let per_s = self.ops as f64 / median_s;
        let (value, unit) = match self.headline {
            Headline::Rate(unit) => (per_s, unit),
            Headline::MsPerOp(unit) => (median_s * 1000.0 / self.ops as f64, unit),
        };
        let mut extra = serde_json::Map::new();
        for sample in samples {
            for (name, v) in &sample.extra {
                let runs = extra
                    .entry(name.to_string())
                    .or_insert_with(|| serde_json::Value::Array(Vec::new()));
                if let serde_json::Value::Array(runs) = runs {
                    runs.push((*v).into());
                }
            }
        }
        WorkloadReport {
            name: self.id.letter(),
            backend: "sqlite",
            description: self.description,
            ops: self.ops,
            op: self.op,
            runs_s,
            median_s,
            per_s,
            value,
            unit,
            extra,
            target: target(self.id, value),
        }
    }
}

/// PostgreSQL's targets: several servers' durable appends (e).
fn postgres_target(id: WorkloadId, value: f64) -> Option<Target> {
    (id == WorkloadId::E).then(|| Target::at_least(10_000.0, "items/s", value))
}

/// The store's absolute targets; those relative to the Agents SDK are
/// judged by `bench/compare_agents_sdk.sh`, and (a)'s floor ratio by the caller
/// ((b)'s against the batch floor (i) is reported, not a target).
fn target(id: WorkloadId, value: f64) -> Option<Target> {
    match id {
        WorkloadId::E => Some(Target::at_least(20_000.0, "items/s", value)),
        WorkloadId::F => Some(Target::at_least(200_000.0, "deltas/s", value)),
        WorkloadId::G => Some(Target::at_most(5.0, "ms", value)),
        WorkloadId::A
        | WorkloadId::B
        | WorkloadId::C
        | WorkloadId::D
        | WorkloadId::H
        | WorkloadId::I
        | WorkloadId::J
        | WorkloadId::K
        | WorkloadId::L
        | WorkloadId::M
        | WorkloadId::N
        | WorkloadId::O
        | WorkloadId::P
        | WorkloadId::Q
        | WorkloadId::R => None,
    }
}
