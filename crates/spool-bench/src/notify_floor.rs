//! The floor of (e)'s cross-server delivery latency: the same pace of
//! deltas, committed and announced by nothing but PostgreSQL.
//!
//! `threads` producers each emit a delta every `pace`, as the stamping
//! provider does for spool. As many bare connections as a store has
//! writer lanes commit them in groups, the way a writer does: each takes
//! whatever its producers queued while its last commit ran and sends one
//! pipelined transaction (`BEGIN`, one `INSERT` of the rows from unnested
//! arrays, one `pg_notify` per delta, `COMMIT`). Another connection
//! `LISTEN`s, as another server does; a delta's latency is from the moment
//! it was emitted to the moment its notice is received.
//!
//! What the floor leaves out is spool: the provider's stream, the run
//! loop, the reducer, the encoding of events, the lease fence, the log
//! read on the other side, the hub, the WebSocket and the client. What it
//! keeps is what every cross-server delivery pays on this machine and
//! database: a group's wait for the commit before it, a round trip, the WAL
//! flush, and the notice's trip through PostgreSQL to a listening
//! connection. On a machine whose cores are busy, each of those is also a
//! wait for the scheduler, so the floor moves with the load as spool does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use spool_store::StoreOptions;
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, NoTls};

const TABLE: &str = "CREATE TABLE notify_floor (thread_id text COLLATE \"C\" NOT NULL, \
     seq bigint NOT NULL, at_ms bigint NOT NULL, payload text NOT NULL, \
     PRIMARY KEY (thread_id, seq))";
const INSERT: &str = "INSERT INTO notify_floor (thread_id, seq, at_ms, payload) \
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])";
const NOTIFY: &str = "SELECT pg_notify('notify_floor', x) FROM unnest($1::text[]) AS x";

/// A delta's payload: about the size of a delta event's.
const PAYLOAD: &str = "{\"method\":\"item/agentMessage/delta\",\"params\":{\"delta\":\"token \"}}";

/// One delta: its thread, seq and when it was emitted (ns after `start`).
struct Delta {
    thread: usize,
    seq: i64,
    emitted_ns: u64,
}

/// Latencies in ns, one per delta, of `threads` × `deltas` deltas paced
/// by `pace`, on the database at `url`.
pub(super) async fn latencies(
    url: &str,
    threads: usize,
    deltas: usize,
    pace: Duration,
) -> anyhow::Result<Vec<f64>> {
    let lanes = StoreOptions::default().writer_lanes.max(1);
    let setup = connect(url).await?;
    setup.batch_execute(TABLE).await?;
    let start = Instant::now();
    let expected = threads * deltas;
    let listening = listen(url, start, expected).await?;

    let mut writers = Vec::with_capacity(lanes);
    let mut queues = Vec::with_capacity(lanes);
    for _ in 0..lanes {
        let (queue, inbox) = mpsc::unbounded_channel::<Delta>();
        queues.push(queue);
        writers.push(tokio::spawn(write(connect(url).await?, inbox)));
    }
    let queues = Arc::new(queues);
    let mut producers = Vec::with_capacity(threads);
    for thread in 0..threads {
        let queues = Arc::clone(&queues);
        producers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(pace);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for seq in 1..=deltas {
                tick.tick().await;
                let delta = Delta {
                    thread,
                    seq: seq as i64,
                    emitted_ns: start.elapsed().as_nanos() as u64,
                };
                // A lane that stopped reports its error when joined.
                let _ = queues[thread % queues.len()].send(delta);
            }
        }));
    }
    for producer in producers {
        producer.await.context("a floor producer panicked")?;
    }
    drop(queues);
    for writer in writers {
        writer.await.context("a floor writer panicked")??;
    }
    let latencies = tokio::time::timeout(Duration::from_secs(60), listening)
        .await
        .context("the floor's notices did not all arrive within 60 s")?
        .context("the floor's listener panicked")??;
    ensure!(
        latencies.len() == expected,
        "the floor heard {} notices of {expected}",
        latencies.len()
    );
    setup.batch_execute("DROP TABLE notify_floor").await?;
    Ok(latencies)
}

async fn connect(url: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// A lane: commits what queued while its last commit ran, until every
/// producer is done.
async fn write(client: Client, mut inbox: mpsc::UnboundedReceiver<Delta>) -> anyhow::Result<()> {
    let insert = client.prepare(INSERT).await?;
    let notify = client.prepare(NOTIFY).await?;
    while let Some(first) = inbox.recv().await {
        let mut group = vec![first];
        while let Ok(delta) = inbox.try_recv() {
            group.push(delta);
        }
        let thread_ids: Vec<String> = group.iter().map(|d| format!("t-{}", d.thread)).collect();
        let seqs: Vec<i64> = group.iter().map(|d| d.seq).collect();
        let at_ms: Vec<i64> = group
            .iter()
            .map(|d| (d.emitted_ns / 1_000_000) as i64)
            .collect();
        let payloads: Vec<&str> = group.iter().map(|_| PAYLOAD).collect();
        let notices: Vec<String> = group
            .iter()
            .map(|d| format!("{} {} {}", d.thread, d.seq, d.emitted_ns))
            .collect();
        let rows: [&(dyn ToSql + Sync); 4] = [&thread_ids, &seqs, &at_ms, &payloads];
        let notices: [&(dyn ToSql + Sync); 1] = [&notices];
        tokio::try_join!(
            client.batch_execute("BEGIN"),
            client.execute(&insert, &rows),
            client.query(&notify, &notices),
            client.batch_execute("COMMIT"),
        )?;
    }
    Ok(())
}

/// Listens on its own connection; the task answers the latency of each of
/// `expected` notices.
async fn listen(
    url: &str,
    start: Instant,
    expected: usize,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<Vec<f64>>>> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await?;
    let (heard, mut notices) = mpsc::unbounded_channel::<(Instant, String)>();
    let driver = tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(notice) = message? {
                let _ = heard.send((Instant::now(), notice.payload().to_owned()));
            }
        }
        anyhow::Ok(())
    });
    client.batch_execute("LISTEN notify_floor").await?;
    Ok(tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(expected);
        while latencies.len() < expected {
            let (at, payload) = notices
                .recv()
                .await
                .context("the floor's listening connection ended")?;
            let emitted_ns: u64 = payload
                .rsplit(' ')
                .next()
                .and_then(|ns| ns.parse().ok())
                .with_context(|| format!("a floor notice without its time: {payload}"))?;
            let emitted = start + Duration::from_nanos(emitted_ns);
            latencies.push(at.saturating_duration_since(emitted).as_nanos() as f64);
        }
        drop(client);
        driver.abort();
        Ok(latencies)
    }))
}
