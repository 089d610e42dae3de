//! The child process: appends through the public API and prints an
//! acknowledgement for everything the store reported durable, until the
//! parent kills it.
//!
//! Acknowledgement lines are `ack <thread> <seq>`: every event of the
//! thread up to `seq` is durable. That is said after
//! - `create_thread` returned (seq 1);
//! - an append holding a lifecycle event returned: it waited for the commit
//!   covering it, and a commit covers everything assigned before it, so the
//!   thread's earlier deltas too;
//! - `flush` returned after an append of deltas only. Deltas are
//!   acknowledged with their seqs before they are committed, by design, so
//!   the child never counts them durable on that answer alone.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use spool_store::postgres::PgStore;
use spool_store::{AnyStore, Durability, NewThread, SqliteStore, Store, StoreOptions};
use tokio::task::JoinSet;

use crate::common::{agent_delta, agent_message, started, turn_started};
use crate::script::{Script, thread_id, thread_seed};

const DB: &str = "SPOOL_CRASH_CHILD_DB";
const MODE: &str = "SPOOL_CRASH_CHILD_MODE";
const SEED: &str = "SPOOL_CRASH_CHILD_SEED";
const THREADS: &str = "SPOOL_CRASH_CHILD_THREADS";
const DURABILITY: &str = "SPOOL_CRASH_CHILD_DURABILITY";
const DELTA_DELAY_MS: &str = "SPOOL_CRASH_CHILD_DELTA_DELAY_MS";

/// The thread of [`Mode::Hold`].
pub const HELD_THREAD: &str = "held";

/// The leases of a child on PostgreSQL: short, so that the server which
/// checks after the kill takes its threads over soon.
pub const CHILD_LEASE: Duration = Duration::from_millis(1_000);

/// Where the child's store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database: the child is a server, and the one that
    /// checks after it died takes its threads over.
    Postgres(String),
}

impl Target {
    fn parse(value: String) -> Target {
        match value.starts_with("postgres://") {
            true => Target::Postgres(value),
            false => Target::File(PathBuf::from(value)),
        }
    }

    fn env_value(&self) -> String {
        match self {
            Target::File(path) => path.display().to_string(),
            Target::Postgres(url) => url.clone(),
        }
    }

    /// Opens a store there.
    pub async fn open(&self, options: StoreOptions) -> AnyStore {
        match self {
            Target::File(path) => SqliteStore::open(path, options)
                .expect("open the SQLite store")
                .into(),
            Target::Postgres(url) => PgStore::open(url, options)
                .await
                .expect("open the PostgreSQL store")
                .into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Several threads appending turns, concurrently, forever.
    Workload,
    /// One thread left with a turn and an item in progress, then the store
    /// is held open (and "ready" printed) until the process is killed.
    Hold,
}

/// What the parent tells the child, through the environment.
#[derive(Debug, Clone)]
pub struct Config {
    pub db: Target,
    pub mode: Mode,
    pub seed: u64,
    pub threads: usize,
    pub durability: Durability,
    pub delta_commit_delay: Duration,
}

impl Config {
    /// The child's configuration, or `None` in the ordinary test run.
    pub fn from_env() -> Option<Config> {
        let db = std::env::var(DB).ok()?;
        let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("child: {name}"));
        let number = |name: &str| -> u64 {
            var(name)
                .parse()
                .unwrap_or_else(|_| panic!("child: {name} is not a number"))
        };
        Some(Config {
            db: Target::parse(db),
            mode: match var(MODE).as_str() {
                "hold" => Mode::Hold,
                _ => Mode::Workload,
            },
            seed: number(SEED),
            threads: number(THREADS) as usize,
            durability: match var(DURABILITY).as_str() {
                "normal" => Durability::Normal,
                _ => Durability::Full,
            },
            delta_commit_delay: Duration::from_millis(number(DELTA_DELAY_MS)),
        })
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (DB, self.db.env_value()),
            (
                MODE,
                match self.mode {
                    Mode::Workload => "workload",
                    Mode::Hold => "hold",
                }
                .to_owned(),
            ),
            (SEED, self.seed.to_string()),
            (THREADS, self.threads.to_string()),
            (
                DURABILITY,
                match self.durability {
                    Durability::Full => "full",
                    Durability::Normal => "normal",
                }
                .to_owned(),
            ),
            (
                DELTA_DELAY_MS,
                self.delta_commit_delay.as_millis().to_string(),
            ),
        ]
    }
}

/// The child's main. Returns only if the parent closes its stdin in
/// [`Mode::Hold`]; otherwise it runs until killed.
pub fn run(config: Config) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("child: runtime");
    runtime.block_on(async move {
        let options = StoreOptions {
            durability: config.durability,
            delta_commit_delay: config.delta_commit_delay,
            lease_ttl: CHILD_LEASE,
            ..StoreOptions::default()
        };
        let store = config.db.open(options).await;
        match config.mode {
            Mode::Workload => workload(store, &config).await,
            Mode::Hold => hold(store).await,
        }
    });
}

async fn workload(store: AnyStore, config: &Config) {
    let mut tasks = JoinSet::new();
    for index in 0..config.threads {
        let store = store.clone();
        let seed = thread_seed(config.seed, index);
        tasks.spawn(async move { run_thread(store, thread_id(index), seed).await });
    }
    // The tasks never end; a panic in one (a failed append) ends the child
    // with it, which the parent reports.
    while let Some(joined) = tasks.join_next().await {
        joined.expect("child: a thread task failed");
    }
}

async fn run_thread(store: AnyStore, thread: String, seed: u64) {
    let new = NewThread {
        id: Some(thread.clone()),
        ..NewThread::new("openai", "/work")
    };
    store
        .create_thread(new)
        .await
        .expect("child: create thread");
    ack(&thread, 1);
    let mut script = Script::new(&thread, seed);
    loop {
        let step = script.next_step();
        let lifecycle = step.has_lifecycle();
        let appended = store
            .append(&thread, step.events)
            .await
            .unwrap_or_else(|error| panic!("child: append to {thread}: {error}"));
        let last = appended
            .iter()
            .filter_map(|appended| appended.seq())
            .max()
            .expect("child: every event of the script is stored");
        if lifecycle {
            ack(&thread, last);
        } else if step.flush {
            store.flush().await.expect("child: flush");
            ack(&thread, last);
        }
    }
}

async fn hold(store: AnyStore) {
    let t = HELD_THREAD;
    let new = NewThread {
        id: Some(t.to_owned()),
        ..NewThread::new("openai", "/work")
    };
    store
        .create_thread(new)
        .await
        .expect("child: create thread");
    store
        .append(
            t,
            vec![
                turn_started(t, "turn-1"),
                started(t, "turn-1", agent_message("a1", "")),
            ],
        )
        .await
        .expect("child: start a turn");
    store
        .append(t, vec![agent_delta(t, "turn-1", "a1", "kept")])
        .await
        .expect("child: delta");
    store.flush().await.expect("child: flush");
    ack(t, 4);
    say("ready");
    // Holds the store, and so its lock, until the parent kills this
    // process (its stdin stays open until then).
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
}

fn ack(thread: &str, seq: u64) {
    say(&format!("ack {thread} {seq}"));
}

/// One line to the parent, flushed at once: the parent may kill this
/// process right after reading it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        // The parent is gone (broken pipe): nobody is left to tell.
        std::process::exit(0);
    }
}
