//! The parent side: start the child (this very test binary, running only
//! `child_main`), read its acknowledgements, SIGKILL it at a random point,
//! then reopen the file and check it.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use spool_protocol::TurnStatus;
use spool_store::{AnyStore, Durability, SqliteStore, Store, StoreOptions};
use spool_testkit::postgres::TestDatabase;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::check::{self, Recovered};
use crate::child::{CHILD_LEASE, Config, Mode, Target};
use crate::script::Rng;

/// Replays the plans of an earlier run (the kill instants still depend on
/// timing, so a failure may need a few replays).
const SEED_VAR: &str = "SPOOL_CRASH_SEED";

/// Longer than anything here takes on a loaded machine; past it, a wait is
/// a hang (a lock never released, a child stuck) and the test fails.
const STUCK: Duration = Duration::from_secs(60);

/// One kill: the child's workload and when to kill it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub run: usize,
    pub seed: u64,
    pub threads: usize,
    pub durability: Durability,
    pub delta_commit_delay: Duration,
    /// Kill once this many acknowledgements were read…
    pub kill_after_acks: u64,
    /// …and this much later.
    pub kill_delay: Duration,
    /// Open a second handle on the file after this many acknowledgements
    /// and keep it until the child is dead: it must not recover anything.
    pub observer_after_acks: Option<u64>,
}

impl Plan {
    fn draw(base_seed: u64, run: usize) -> Plan {
        // Seeded with a hash of (base seed, run): seeds a fixed step apart
        // would give splitmix sequences that are shifted copies.
        let mut rng = Rng::new(Rng::new(base_seed ^ run as u64).next_u64());
        let kill_after_acks = rng.between(0, 80);
        Plan {
            run,
            seed: rng.next_u64(),
            threads: rng.between(3, 4) as usize,
            // SIGKILL does not lose what the OS has buffered, so `Normal`
            // must keep every acknowledgement too; only a power loss
            // separates the two levels. Both are run, alternately.
            durability: match run % 2 {
                0 => Durability::Full,
                _ => Durability::Normal,
            },
            delta_commit_delay: Duration::from_millis([1, 5, 20][rng.between(0, 2) as usize]),
            kill_after_acks,
            kill_delay: Duration::from_micros(rng.between(0, 5_000)),
            observer_after_acks: rng.one_in(3).then(|| rng.between(0, kill_after_acks)),
        }
    }
}

/// Where the children write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file: the child is the store's process, and the check
    /// opens the file again, which recovers.
    Sqlite,
    /// A PostgreSQL database: the child is a server, and the check is
    /// another server, which takes its threads over once its leases ran
    /// out.
    Postgres,
}

/// Kills `runs` children at random points and checks each store.
pub async fn kill_runs(runs: usize, backend: Backend) {
    let base_seed = match std::env::var(SEED_VAR) {
        Ok(seed) => seed.parse().expect("SPOOL_CRASH_SEED is a u64"),
        Err(_) => clock_seed(),
    };
    eprintln!("crash runs: {runs}, seed {base_seed} (replay with {SEED_VAR}={base_seed})");
    let started = Instant::now();
    let mut total = Recovered::default();
    let mut acks = 0;
    for run in 0..runs {
        let plan = Plan::draw(base_seed, run);
        eprintln!("{plan:?}");
        let (acked, recovered) = kill_and_check(&plan, backend).await;
        acks += acked;
        total += recovered;
    }
    eprintln!(
        "crash runs: {runs} in {:.1?}; {acks} acknowledgements checked; {total:?}",
        started.elapsed()
    );
    // Guards the test itself: if no run ever died mid-turn, the kill
    // points are not exercising recovery.
    if runs >= 10 {
        assert!(total.turns > 0, "no run was killed mid-turn");
    }
}

/// One run; returns how many acknowledgements were read and what recovery
/// closed.
async fn kill_and_check(plan: &Plan, backend: Backend) -> (u64, Recovered) {
    let dir = tempfile::tempdir().unwrap();
    let database = (backend == Backend::Postgres).then(TestDatabase::create);
    let db = match &database {
        Some(database) => Target::Postgres(database.url().to_owned()),
        None => Target::File(dir.path().join("spool.db")),
    };
    let config = Config {
        db,
        mode: Mode::Workload,
        seed: plan.seed,
        threads: plan.threads,
        durability: plan.durability,
        delta_commit_delay: plan.delta_commit_delay,
    };
    let mut child = spawn_child(&config);
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut acks = Acks::default();
    let mut observer = None;
    while acks.count < plan.kill_after_acks {
        if plan.observer_after_acks == Some(acks.count) && observer.is_none() {
            observer = Some(open(&config.db).await);
        }
        if !acks.read_line(&mut lines).await {
            let status = child.wait().await.unwrap();
            panic!(
                "run {}: the child ended before the kill: {status}",
                plan.run
            );
        }
    }
    tokio::time::sleep(plan.kill_delay).await;
    child.start_kill().expect("SIGKILL the child");
    // What it printed before dying counts: each line was written after the
    // store said durable.
    while acks.read_line(&mut lines).await {}
    let status = child.wait().await.unwrap();
    assert_killed(status, plan);

    if let Some(observer) = observer {
        close(observer).await;
    }
    check::wait_for_child_sessions(&config.db);
    let before = check::read_before(&config.db);
    let store = open(&config.db).await;
    settled(&store, &config.db, &before).await;
    let recovered = check::after_recovery(&store, &config, &acks.durable, &before).await;
    let snapshot = check::snapshot(&store, &before).await;
    close(store).await;
    // The second open finds nothing left to recover.
    let store = open(&config.db).await;
    settled(&store, &config.db, &before).await;
    assert_eq!(
        check::snapshot(&store, &before).await,
        snapshot,
        "run {}: opening again changed the log",
        plan.run
    );
    close(store).await;
    (acks.count, recovered)
}

/// On PostgreSQL, waits until the checking server took over every thread
/// the child left with a turn in progress (its leases run out first). A
/// SQLite store recovered when it opened.
async fn settled(store: &AnyStore, db: &Target, before: &check::Before) {
    if matches!(db, Target::File(_)) {
        return;
    }
    let deadline = Instant::now() + STUCK;
    for thread in before.last_seq.keys() {
        loop {
            let turns = store.turns(thread).await.unwrap();
            if turns
                .iter()
                .all(|turn| turn.status != TurnStatus::InProgress)
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{thread}: not taken over in {STUCK:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Runs this test binary as the child: libtest runs only `child_main`,
/// which the environment turns into the child's main.
pub fn spawn_child(config: &Config) -> Child {
    let exe = std::env::current_exe().expect("the test binary's path");
    Command::new(exe)
        .args(["--exact", crate::CHILD_TEST, "--nocapture"])
        .envs(config.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Inherited: a failing child's panic shows in this test's output.
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the child")
}

fn assert_killed(status: ExitStatus, plan: &Plan) {
    assert_eq!(
        status.signal(),
        Some(9),
        "run {}: the child was to die of SIGKILL, but ended with {status}",
        plan.run
    );
}

/// The child's acknowledgements: per thread, the seq up to which it is
/// durable.
#[derive(Debug, Default)]
pub struct Acks {
    pub durable: BTreeMap<String, u64>,
    pub count: u64,
    pub ready: bool,
}

impl Acks {
    /// Reads one line; false at the end of the child's output.
    pub async fn read_line(&mut self, lines: &mut Lines<BufReader<ChildStdout>>) -> bool {
        let line = tokio::time::timeout(STUCK, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the child said nothing for {STUCK:?}"))
            .expect("read the child's output");
        let Some(line) = line else {
            return false;
        };
        // Anything else is libtest's own chatter.
        if let Some(ack) = line.strip_prefix("ack ") {
            let (thread, seq) = ack.split_once(' ').expect("ack <thread> <seq>");
            let seq: u64 = seq.parse().expect("ack seq");
            let durable = self.durable.entry(thread.to_owned()).or_default();
            assert!(seq >= *durable, "acks of {thread} go backwards");
            *durable = seq;
            self.count += 1;
        } else if line == "ready" {
            self.ready = true;
        }
        true
    }
}

/// Opens the store: a file off the async runtime (opening waits for the
/// lock and may recover, which blocks); a database as a server with the
/// child's lease length, so that it takes the child's threads over soon.
pub async fn open(db: &Target) -> AnyStore {
    match db {
        Target::File(path) => {
            let path = path.clone();
            blocking("opening the store", move || {
                SqliteStore::open(path, StoreOptions::default())
            })
            .await
            .expect("open the store")
            .into()
        }
        Target::Postgres(_) => {
            let options = StoreOptions {
                lease_ttl: CHILD_LEASE,
                ..StoreOptions::default()
            };
            tokio::time::timeout(STUCK, db.open(options))
                .await
                .expect("opening the store is stuck")
        }
    }
}

/// Closes and drops a handle (dropping joins the writer, which blocks).
pub async fn close(store: AnyStore) {
    store.close().await.expect("close the store");
    blocking("dropping the store", move || drop(store)).await;
}

/// Runs `work` on a thread of its own and fails the test if it is stuck: a
/// lock that is never shared must fail the test, not hang it. (A stuck
/// `spawn_blocking` task would hang the runtime's shutdown as well.)
async fn blocking<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match tokio::time::timeout(STUCK, result).await {
        Ok(Ok(value)) => value,
        Ok(Err(_)) => panic!("{what} panicked"),
        Err(_) => panic!("{what} is stuck after {STUCK:?}"),
    }
}

fn clock_seed() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    now.as_secs() ^ u64::from(now.subsec_nanos()).rotate_left(32)
}
