//! (e) of `spool bench server`: two servers on one PostgreSQL database.
//!
//! Server A and server B are two hubs in this process, each on a `PgStore`
//! of its own (its own writer, pool, lease holder id and `LISTEN`
//! connection) over one fresh database, each serving its own WebSocket
//! listener with live tails and forwarding started as `spool serve`
//! starts them. They share nothing but the database: what B knows of A's
//! turns it learns from the notices of A's commits and reads from the log.
//! One client is connected to each. A runs every turn; B's client
//! resumes each thread first, so it follows the turn from the log.
//!
//! Both clients read the same turns at the same time, so each figure has
//! its floor beside it: the holder's own client.
//! - events/s: one turn of `--replica-deltas` deltas streamed as fast as
//!   the provider is polled, from `turn/start` sent (to A) to
//!   `turn/completed` received, on A and on B; B must receive every delta,
//!   in order.
//! - delivery latency: `--replica-threads` threads streaming
//!   `--thread-deltas` deltas each, a delta every `--pace-ms` per thread;
//!   p50/p99/max of (client received − provider emitted) per delta on A
//!   and on B. The target is a p99 of 20 ms on B.
//! - the floor of that latency (`notify_floor.rs`): the same deltas
//!   committed and announced by bare connections, after the servers have
//!   stopped, on the same database.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use serde::Serialize;
use serde_json::json;
use spool_server::{Hub, Running, Shutdown};
use spool_store::postgres::PgStore;
use spool_store::{Store, StoreOptions};

use super::pg_database::FreshDatabase;
use super::report::{percentile, round};
use super::server::{hub_options, serve_on_loopback, turn_params};
use super::stamping::{Stamping, delta_stamp};
use super::ws_client::Client;

/// Cross-server delivery latency, p99 on the other server.
const TARGET_P99_MS: f64 = 20.0;

#[derive(Debug, Serialize)]
pub(super) struct Replicas {
    servers: &'static str,
    events: Events,
    latency: Latency,
    /// The delivery latency's floor (`notify_floor.rs`), after the servers
    /// stopped, on the same database.
    floor: Floor,
}

#[derive(Debug, Serialize)]
struct Floor {
    what: &'static str,
    latency: Percentiles,
    /// B's p99 over the floor's.
    other_p99_over_floor: f64,
}

/// One turn's notifications, as each server's client received them.
#[derive(Debug, Serialize)]
struct Events {
    deltas: usize,
    /// On A, the server that runs the turn: the floor.
    holder: Rate,
    /// On B, which follows it through the database.
    other: Rate,
    /// B's rate over A's.
    ratio: f64,
}

#[derive(Debug, Serialize)]
struct Rate {
    notifications: usize,
    seconds: f64,
    per_s: f64,
}

#[derive(Debug, Serialize)]
struct Latency {
    threads: usize,
    deltas_per_thread: usize,
    pace_ms: f64,
    /// On A: the floor.
    holder: Percentiles,
    /// On B.
    other: Percentiles,
    /// B's p99 over A's.
    p99_ratio: f64,
    target_p99_ms: f64,
    holds: bool,
}

#[derive(Debug, Serialize)]
struct Percentiles {
    samples: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// One server: its store, hub and listener.
struct Server {
    store: PgStore,
    hub: Arc<Hub>,
    shutdown: Shutdown,
    running: Running,
}

/// The client of each server.
struct Clients {
    a: Client,
    b: Client,
}

/// Sizes of the workload, from the command line.
pub(super) struct Sizes {
    pub(super) deltas: usize,
    pub(super) threads: usize,
    pub(super) thread_deltas: usize,
    pub(super) pace: Duration,
}

/// Runs (e) on a fresh database of the server `url` names.
pub(super) async fn two_servers(url: &str, dir: &Path, sizes: &Sizes) -> anyhow::Result<Replicas> {
    let db = FreshDatabase::create(url)
        .await
        .context("cannot create the benchmark's database")?;
    let result = on_database(db.url(), dir, sizes).await;
    db.drop_now().await?;
    result
}

async fn on_database(url: &str, dir: &Path, sizes: &Sizes) -> anyhow::Result<Replicas> {
    let workspace = dir.join("replicas");
    std::fs::create_dir_all(&workspace)?;
    let cwd = workspace.display().to_string();
    let provider = Arc::new(Stamping::new());
    let (a, a_client) = Server::start(url, &cwd, &provider).await?;
    let (b, b_client) = Server::start(url, &cwd, &provider).await?;
    let mut clients = Clients {
        a: a_client,
        b: b_client,
    };

    // A short turn first, followed by both: first calls, first reads.
    provider.set_deltas(10);
    provider.set_pace(Duration::ZERO);
    let warm_up = started_on_a_followed_on_b(&mut clients).await?;
    clients
        .a
        .send_request("turn/start", turn_params(&warm_up))
        .await?;
    let (clients, _) = read_both(clients, 1, &provider).await?;

    let (clients, events) = events(clients, &provider, sizes.deltas).await?;
    eprintln!(
        "(e) one turn of {} deltas: {:.0} notifications/s on A, {:.0}/s on B",
        events.deltas, events.holder.per_s, events.other.per_s
    );
    let (clients, latency) = latency(clients, &provider, sizes).await?;
    eprintln!(
        "(e) {} threads, a delta every {} ms each: p99 {:.3} ms on A, {:.3} ms on B",
        latency.threads, latency.pace_ms, latency.holder.p99_ms, latency.other.p99_ms
    );

    drop(clients);
    a.stop().await?;
    b.stop().await?;
    let mut floor =
        super::notify_floor::latencies(url, sizes.threads, sizes.thread_deltas, sizes.pace)
            .await
            .context("the delivery floor")?;
    let floor = percentiles(&mut floor);
    eprintln!(
        "(e) floor: the same deltas committed in groups by bare connections and heard by \
         LISTEN: p99 {:.3} ms (B's p99 is {:.2}x it)",
        floor.p99_ms,
        latency.other.p99_ms / floor.p99_ms
    );
    Ok(Replicas {
        servers: "two hubs in this process, each on a PgStore of its own over one database, \
                  each with a WebSocket listener on 127.0.0.1 and one client",
        events,
        floor: Floor {
            what: "the same threads, deltas and pace, committed in groups (one pipelined \
                   transaction per writer lane's queue, a NOTIFY per delta) by bare \
                   connections and heard by a LISTEN connection: emitted -> notice received",
            other_p99_over_floor: round(latency.other.p99_ms / floor.p99_ms, 3),
            latency: floor,
        },
        latency,
    })
}

impl Server {
    async fn start(
        url: &str,
        cwd: &str,
        provider: &Arc<Stamping>,
    ) -> anyhow::Result<(Server, Client)> {
        let store = PgStore::open(url, StoreOptions::default()).await?;
        let hub = Hub::new(store.clone(), provider.clone(), hub_options(cwd));
        spool_server::tail::start(&hub);
        spool_server::forward::start(&hub);
        let (addr, shutdown, running) = serve_on_loopback(&hub).await?;
        let client = Client::connect_initialized(&addr).await?;
        let server = Server {
            store,
            hub,
            shutdown,
            running,
        };
        Ok((server, client))
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.run(&self.hub, Duration::from_secs(10)).await;
        self.running.finish(Duration::from_secs(5)).await;
        self.store.close().await?;
        Ok(())
    }
}

/// A thread started on A, which B's client then follows.
async fn started_on_a_followed_on_b(clients: &mut Clients) -> anyhow::Result<String> {
    let thread = clients.a.start_thread().await?;
    clients
        .b
        .call("thread/resume", json!({"threadId": thread}))
        .await?;
    Ok(thread)
}

/// What a client saw of a set of turns.
struct Seen {
    /// Every frame up to the last `turn/completed`, counted.
    notifications: usize,
    /// The agent message deltas among them.
    deltas: usize,
    /// When the last `turn/completed` arrived.
    done: Instant,
    /// Received − emitted, per delta, in nanoseconds.
    latencies_ns: Vec<f64>,
    /// Whether each thread's deltas arrived in the order emitted.
    in_order: bool,
}

/// Reads `client` until `turns` turns completed; gives the client back.
async fn read_turns(
    mut client: Client,
    turns: usize,
    provider: &Stamping,
) -> anyhow::Result<(Client, Seen)> {
    let mut seen = Seen {
        notifications: 0,
        deltas: 0,
        done: Instant::now(),
        latencies_ns: Vec::new(),
        in_order: true,
    };
    let mut last_stamp = std::collections::HashMap::<String, u64>::new();
    let mut completed = 0;
    while completed < turns {
        let frame = client.next_frame().await?;
        let now = provider.now_ns();
        if !frame.contains("\"method\"") {
            continue; // a reply
        }
        seen.notifications += 1;
        if let Some(stamp) = delta_stamp(&frame) {
            seen.deltas += 1;
            seen.latencies_ns
                .push(now.saturating_sub(stamp.emitted) as f64);
            let message: serde_json::Value = serde_json::from_str(&frame)?;
            let thread = message["params"]["threadId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let previous = last_stamp.insert(thread, stamp.emitted);
            seen.in_order &= previous.is_none_or(|previous| previous <= stamp.emitted);
        } else if frame.contains("\"turn/completed\"") {
            completed += 1;
        }
    }
    seen.done = Instant::now();
    Ok((client, seen))
}

/// Both servers' clients read `turns` turns at once.
async fn read_both(
    clients: Clients,
    turns: usize,
    provider: &Arc<Stamping>,
) -> anyhow::Result<(Clients, (Seen, Seen))> {
    let b_provider = provider.clone();
    let b_reader = tokio::spawn(async move { read_turns(clients.b, turns, &b_provider).await });
    let (a, on_a) = read_turns(clients.a, turns, provider).await?;
    let (b, on_b) = b_reader.await??;
    Ok((Clients { a, b }, (on_a, on_b)))
}

async fn events(
    mut clients: Clients,
    provider: &Arc<Stamping>,
    deltas: usize,
) -> anyhow::Result<(Clients, Events)> {
    let thread = started_on_a_followed_on_b(&mut clients).await?;
    provider.set_deltas(deltas);
    provider.set_pace(Duration::ZERO);
    let start = Instant::now();
    clients
        .a
        .send_request("turn/start", turn_params(&thread))
        .await?;
    let (clients, (on_a, on_b)) = read_both(clients, 1, provider).await?;
    all_received(&on_a, &on_b, deltas)?;
    let rate = |seen: &Seen| {
        let seconds = seen.done.duration_since(start).as_secs_f64();
        Rate {
            notifications: seen.notifications,
            seconds: round(seconds, 4),
            per_s: round(seen.notifications as f64 / seconds, 0),
        }
    };
    let (holder, other) = (rate(&on_a), rate(&on_b));
    let events = Events {
        deltas,
        ratio: round(other.per_s / holder.per_s, 3),
        holder,
        other,
    };
    Ok((clients, events))
}

async fn latency(
    mut clients: Clients,
    provider: &Arc<Stamping>,
    sizes: &Sizes,
) -> anyhow::Result<(Clients, Latency)> {
    let mut threads = Vec::with_capacity(sizes.threads);
    for _ in 0..sizes.threads {
        threads.push(started_on_a_followed_on_b(&mut clients).await?);
    }
    provider.set_deltas(sizes.thread_deltas);
    provider.set_pace(sizes.pace);
    for thread in &threads {
        clients
            .a
            .send_request("turn/start", turn_params(thread))
            .await?;
    }
    let (clients, (mut on_a, mut on_b)) = read_both(clients, sizes.threads, provider).await?;
    provider.set_pace(Duration::ZERO);
    let expected = sizes.threads * sizes.thread_deltas;
    all_received(&on_a, &on_b, expected)?;
    let holder = percentiles(&mut on_a.latencies_ns);
    let other = percentiles(&mut on_b.latencies_ns);
    let latency = Latency {
        threads: sizes.threads,
        deltas_per_thread: sizes.thread_deltas,
        pace_ms: round(sizes.pace.as_secs_f64() * 1000.0, 3),
        p99_ratio: round(other.p99_ms / holder.p99_ms, 3),
        target_p99_ms: TARGET_P99_MS,
        holds: other.p99_ms <= TARGET_P99_MS,
        holder,
        other,
    };
    Ok((clients, latency))
}

/// Both clients received every one of `deltas`, each thread's in order.
fn all_received(on_a: &Seen, on_b: &Seen, deltas: usize) -> anyhow::Result<()> {
    for (name, seen) in [("A", on_a), ("B", on_b)] {
        ensure!(
            seen.deltas == deltas && seen.in_order,
            "server {name}'s client received {} deltas of {deltas} (in order: {})",
            seen.deltas,
            seen.in_order
        );
    }
    Ok(())
}

fn percentiles(latencies_ns: &mut [f64]) -> Percentiles {
    latencies_ns.sort_by(f64::total_cmp);
    let ms = |p: f64| round(percentile(latencies_ns, p) / 1e6, 3);
    Percentiles {
        samples: latencies_ns.len(),
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        max_ms: ms(1.0),
    }
}
