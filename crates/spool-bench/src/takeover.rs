//! (f) of `spool bench server`: how long a thread is left without a
//! server when the one running it dies, measured on real processes.
//!
//! Each round, on a fresh database of the PostgreSQL server given with
//! `--store`: two `spool serve` children (A and B, this very binary, each
//! listening on a WebSocket of its own and sharing only the database) and
//! the live bench's model server on a loopback socket, streaming one delta
//! every 10 ms for as long as anyone reads. A client on A starts a turn; a
//! client on B follows the thread (`thread/resume`) until a delta of A's
//! turn reaches it; then A is killed with `SIGKILL` and reaped. Timed from
//! the kill:
//!
//! - `interrupted`: B's client receives `turn/completed` with status
//!   `interrupted`, which B appends once it has taken the thread over;
//! - `next_turn`: a `turn/start` sent to B right after is answered, and
//!   that turn (a short fast reply) completes on B.
//!
//! The floor is the lease's time to live (the store's default): a lease
//! renewed just before the kill stays A's that long, and no server may
//! take the thread before it runs out. Anything above it is how soon B
//! notices, takes over and appends the closing events.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde::Serialize;
use serde_json::{Value, json};
use spool_store::StoreOptions;

use super::live::configure;
use super::live::model_server::{ModelServer, Plan};
use super::live::peer::{Peer, Target, Transport};
use super::pg_database::FreshDatabase;
use super::report::round;

/// The takeover's target, from the kill to the interrupted turn on B.
const TARGET_S: f64 = 10.0;
/// How long the bench waits for B to take over before it gives up.
const GIVE_UP: Duration = Duration::from_secs(60);
/// The pace of A's never-ending stream.
const PACE: Duration = Duration::from_millis(10);

#[derive(Debug, Serialize)]
pub(super) struct Takeover {
    servers: &'static str,
    rounds: usize,
    /// The floor: how long a lease outlives its last renewal.
    lease_ttl_s: f64,
    /// Per round: kill → B's client has `turn/completed` (interrupted).
    interrupted_s: Vec<f64>,
    /// Per round: kill → a turn started on B after it completed there.
    next_turn_s: Vec<f64>,
    max_interrupted_s: f64,
    /// The slowest takeover over the floor.
    max_over_ttl: f64,
    target_s: f64,
    holds: bool,
}

/// `rounds` takeovers, each on a fresh database of the server at `url`,
/// the servers' homes under `dir`.
pub(super) async fn takeover(url: &str, dir: &Path, rounds: usize) -> anyhow::Result<Takeover> {
    let spool = std::env::current_exe().context("cannot find the spool binary")?;
    let model = ModelServer::start(Instant::now()).await?;
    let (mut interrupted, mut next_turn) = (Vec::new(), Vec::new());
    for n in 0..rounds {
        let db = FreshDatabase::create(url).await?;
        let homes = dir.join(format!("takeover-{n}"));
        let result = one(&spool, db.url(), &homes, &model).await;
        db.drop_now().await?;
        let (stopped, resumed) = result.with_context(|| format!("takeover round {n}"))?;
        eprintln!(
            "(f) round {n}: interrupted on B {:.2} s after the kill, next turn done {:.2} s",
            stopped.as_secs_f64(),
            resumed.as_secs_f64()
        );
        interrupted.push(round(stopped.as_secs_f64(), 3));
        next_turn.push(round(resumed.as_secs_f64(), 3));
    }
    let ttl = StoreOptions::default().lease_ttl.as_secs_f64();
    let max = interrupted.iter().copied().fold(0.0, f64::max);
    Ok(Takeover {
        servers: "two `spool serve` processes on one fresh database, a WebSocket client on each",
        rounds,
        lease_ttl_s: ttl,
        interrupted_s: interrupted,
        next_turn_s: next_turn,
        max_interrupted_s: max,
        max_over_ttl: round(max / ttl, 3),
        target_s: TARGET_S,
        holds: max <= TARGET_S,
    })
}

/// One takeover: (kill → interrupted on B, kill → next turn done on B).
async fn one(
    spool: &Path,
    store: &str,
    homes: &Path,
    model: &ModelServer,
) -> anyhow::Result<(Duration, Duration)> {
    let (home_a, home_b) = (homes.join("a"), homes.join("b"));
    for home in [&home_a, &home_b] {
        std::fs::create_dir_all(home)?;
        configure(Target::Spool, home, model.url())?;
    }
    let start = |home| {
        Peer::start(
            Target::Spool,
            spool,
            Transport::WebSocket,
            home,
            model.url(),
            Some(store),
        )
    };
    let mut a = start(&home_a).await?;
    let mut b = start(&home_b).await?;
    a.initialize().await?;
    b.initialize().await?;

    // A's turn streams until A dies.
    model.set_plan(Plan {
        deltas: 1_000_000,
        pace: Some(PACE),
    });
    let thread = a.start_thread().await?;
    a.call("turn/start", turn(&thread)).await?;
    b.call("thread/resume", json!({"threadId": thread})).await?;
    until(&mut b, |m| method(m) == "item/agentMessage/delta").await?;

    a.kill().await?;
    let killed = Instant::now();
    let done = until(&mut b, |m| method(m) == "turn/completed").await?;
    let interrupted = killed.elapsed();
    let status = &done["params"]["turn"]["status"];
    ensure!(status == "interrupted", "A's turn ended {status} on B");

    // B holds the thread now: a turn sent there runs there.
    model.set_plan(Plan {
        deltas: 10,
        pace: None,
    });
    b.call("turn/start", turn(&thread)).await?;
    let done = until(&mut b, |m| method(m) == "turn/completed").await?;
    let next_turn = killed.elapsed();
    let status = &done["params"]["turn"]["status"];
    ensure!(status == "completed", "B's own turn ended {status}");
    b.stop().await;
    Ok((interrupted, next_turn))
}

fn turn(thread: &str) -> Value {
    json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]})
}

fn method(message: &Value) -> &str {
    message["method"].as_str().unwrap_or("")
}

/// The first message `peer` receives that `wanted` accepts, within
/// [`GIVE_UP`].
async fn until(peer: &mut Peer, wanted: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    let wait = async {
        loop {
            let (message, _) = peer.next().await?;
            if wanted(&message) {
                return anyhow::Ok(message);
            }
        }
    };
    tokio::time::timeout(GIVE_UP, wait)
        .await
        .with_context(|| format!("the message waited for did not come in {GIVE_UP:?}"))?
}
