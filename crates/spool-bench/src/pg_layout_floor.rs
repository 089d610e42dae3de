//! The layout floor (l) on PostgreSQL: the rows (e) writes, written with
//! nothing but PostgreSQL, in the best shape spool's writers could give
//! them.
//!
//! Untimed, spool stores (e)'s calls (16 sessions of single-item
//! `add_items`, side by side) in a database of their own; the rows each
//! call wrote (its events, its turn, its item) are read back. Timed, the
//! same rows go into the run's database, freshly migrated and holding
//! only the sessions' thread rows, over as many bare connections as a
//! store has writer lanes, the sessions split evenly among them: each
//! connection writes, per round, one call of each of its sessions as one
//! transaction of three statements (events, turns, items; the arrays
//! unnested, as the writers send them), pipelined in one round trip, with
//! the connections committing side by side.
//!
//! What the floor leaves out is spool's code and its other statements:
//! checking appends, encoding rows, the lease fence, the view-rank update,
//! the notice to other servers, the writer's hand-offs. What it keeps is
//! what PostgreSQL does with the layout: its b-trees, WAL
//! and commits. (l) is the most (e) can get from these rows on this
//! database.

use std::time::Instant;

use anyhow::{Context, ensure};
use spool_store::postgres::PgStore;
use spool_store::{Session, Store, StoreOptions};
use tokio::task::JoinSet;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

use super::items::appender_items;
use super::pg_database::FreshDatabase;
use super::workloads::Sample;

const EVENTS: &str = "INSERT INTO events (thread_id, seq, method, item_id, at_ms, payload) \
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], \
     $6::text[])";
const TURNS: &str = "INSERT INTO turns (thread_id, turn_id, ordinal, seq, status, error, \
     started_at, completed_at, duration_ms, token_usage, view_rank) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], \
     $6::text[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::bigint[])";
const ITEMS: &str = "INSERT INTO items (thread_id, item_id, turn_id, ordinal, seq, kind, status, \
     item, envelope, token_count, input_item, llm) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], \
     $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::boolean[])";

/// The calls of (l): `appenders` sessions of `appends_each` single-item
/// calls, replayed into the database at `url`.
pub async fn concurrent(
    url: &str,
    appenders: usize,
    appends_each: usize,
) -> anyhow::Result<Sample> {
    let lanes = StoreOptions::default().writer_lanes.max(1);
    let source = FreshDatabase::create(url).await?;
    let rows = stored_rows(source.url(), url, appenders, appends_each).await;
    source.drop_now().await?;
    let sessions = rows?;
    let count = appenders * appends_each;
    let stored: usize = sessions
        .iter()
        .flatten()
        .map(|c| c.items.item_ids.len())
        .sum();
    ensure!(
        stored == count,
        "the source database holds {stored} of the {count} items"
    );

    // Each connection's rounds, built before the clock starts.
    let mut work: Vec<Vec<Rows>> = vec![Vec::new(); lanes];
    for (lane, rounds) in work.iter_mut().enumerate() {
        let mine: Vec<&Vec<Rows>> = sessions.iter().skip(lane).step_by(lanes).collect();
        let longest = mine.iter().map(|calls| calls.len()).max().unwrap_or(0);
        for round in 0..longest {
            let mut batch = Rows::default();
            for calls in &mine {
                if let Some(call) = calls.get(round) {
                    batch.extend(call);
                }
            }
            rounds.push(batch);
        }
    }
    let mut clients = Vec::with_capacity(lanes);
    for _ in 0..lanes {
        clients.push(connect(url).await?);
    }

    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (client, rounds) in clients.into_iter().zip(work) {
        tasks.spawn(async move {
            let statements = (
                client.prepare(EVENTS).await?,
                client.prepare(TURNS).await?,
                client.prepare(ITEMS).await?,
            );
            for rows in &rounds {
                rows.write(&client, &statements).await?;
            }
            anyhow::Ok(client)
        });
    }
    let mut clients = Vec::new();
    while let Some(done) = tasks.join_next().await {
        clients.push(done.context("a floor connection panicked")??);
    }
    let sample = Sample::timed(start.elapsed());

    let client = clients.first().context("no floor connection")?;
    let written: i64 = client
        .query_one("SELECT count(*) FROM items", &[])
        .await?
        .get(0);
    ensure!(
        usize::try_from(written) == Ok(count),
        "the floor stored {written} of {count} items"
    );
    Ok(sample)
}

async fn connect(url: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// spool stores the calls in `source` (untimed, the sessions side by side
/// as in (e)); `target` is migrated and given the sessions' threads. The
/// rows of each session, one entry per call.
async fn stored_rows(
    source: &str,
    target: &str,
    appenders: usize,
    appends_each: usize,
) -> anyhow::Result<Vec<Vec<Rows>>> {
    let store = PgStore::open(source, StoreOptions::default()).await?;
    let mut tasks = JoinSet::new();
    for k in 0..appenders {
        let session = Session::open(store.clone(), &format!("bench-{k}")).await?;
        tasks.spawn(async move {
            for item in appender_items(k, appends_each) {
                session.add_items(vec![item]).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("a floor appender panicked")??;
    }
    store.close().await?;

    let store = PgStore::open(target, StoreOptions::default()).await?;
    for k in 0..appenders {
        Session::open(store.clone(), &format!("bench-{k}")).await?;
    }
    store.close().await?;

    let client = connect(source).await?;
    let mut sessions = Vec::with_capacity(appenders);
    for k in 0..appenders {
        sessions.push(read_calls(&client, &format!("bench-{k}")).await?);
    }
    Ok(sessions)
}

/// The rows of one thread, one entry per turn (per call); its first event
/// (`thread/started`) is left out: the target has it.
async fn read_calls(client: &Client, thread_id: &str) -> anyhow::Result<Vec<Rows>> {
    let turns = client
        .query(
            "SELECT thread_id, turn_id, ordinal, seq, status, error, started_at, completed_at, \
             duration_ms, token_usage, view_rank FROM turns WHERE thread_id = $1 ORDER BY ordinal",
            &[&thread_id],
        )
        .await?;
    let mut calls: Vec<Rows> = Vec::with_capacity(turns.len());
    let mut index = std::collections::HashMap::new();
    for row in &turns {
        let mut call = Rows::default();
        let t = &mut call.turns;
        t.thread_ids.push(row.try_get(0)?);
        let turn_id: String = row.try_get(1)?;
        index.insert(turn_id.clone(), calls.len());
        t.turn_ids.push(turn_id);
        t.ordinals.push(row.try_get(2)?);
        t.seqs.push(row.try_get(3)?);
        t.statuses.push(row.try_get(4)?);
        t.errors.push(row.try_get(5)?);
        t.started.push(row.try_get(6)?);
        t.completed.push(row.try_get(7)?);
        t.durations.push(row.try_get(8)?);
        t.token_usages.push(row.try_get(9)?);
        t.view_ranks.push(row.try_get(10)?);
        calls.push(call);
    }
    let items = client
        .query(
            "SELECT thread_id, item_id, turn_id, ordinal, seq, kind, status, item, envelope, \
             token_count, input_item, llm FROM items WHERE thread_id = $1 ORDER BY ordinal",
            &[&thread_id],
        )
        .await?;
    for row in &items {
        let turn_id: String = row.try_get(2)?;
        let call = *index.get(&turn_id).context("an item of an unknown turn")?;
        let i = &mut calls[call].items;
        i.thread_ids.push(row.try_get(0)?);
        i.item_ids.push(row.try_get(1)?);
        i.turn_ids.push(turn_id);
        i.ordinals.push(row.try_get(3)?);
        i.seqs.push(row.try_get(4)?);
        i.kinds.push(row.try_get(5)?);
        i.statuses.push(row.try_get(6)?);
        i.items.push(row.try_get(7)?);
        i.envelopes.push(row.try_get(8)?);
        i.token_counts.push(row.try_get(9)?);
        i.input_items.push(row.try_get(10)?);
        i.llm.push(row.try_get(11)?);
    }
    // Every event of a call names its turn: by id, or as the turn itself.
    let events = client
        .query(
            "SELECT thread_id, seq, method, item_id, at_ms, payload, \
             coalesce(payload::jsonb #>> '{params,turnId}', payload::jsonb #>> '{params,turn,id}') \
             FROM events WHERE thread_id = $1 AND seq > 1 ORDER BY seq",
            &[&thread_id],
        )
        .await?;
    for row in &events {
        let turn_id: Option<String> = row.try_get(6)?;
        let turn_id = turn_id.context("an event outside a turn")?;
        let call = *index.get(&turn_id).context("an event of an unknown turn")?;
        let e = &mut calls[call].events;
        e.thread_ids.push(row.try_get(0)?);
        e.seqs.push(row.try_get(1)?);
        e.methods.push(row.try_get(2)?);
        e.item_ids.push(row.try_get(3)?);
        e.ats.push(row.try_get(4)?);
        e.payloads.push(row.try_get(5)?);
    }
    Ok(calls)
}

/// Rows of one or more calls, column by column.
#[derive(Default, Clone)]
struct Rows {
    events: Events,
    turns: Turns,
    items: Items,
}

#[derive(Default, Clone)]
struct Events {
    thread_ids: Vec<String>,
    seqs: Vec<i64>,
    methods: Vec<String>,
    item_ids: Vec<Option<String>>,
    ats: Vec<i64>,
    payloads: Vec<String>,
}

#[derive(Default, Clone)]
struct Turns {
    thread_ids: Vec<String>,
    turn_ids: Vec<String>,
    ordinals: Vec<i64>,
    seqs: Vec<i64>,
    statuses: Vec<String>,
    errors: Vec<Option<String>>,
    started: Vec<Option<i64>>,
    completed: Vec<Option<i64>>,
    durations: Vec<Option<i64>>,
    token_usages: Vec<Option<String>>,
    view_ranks: Vec<i64>,
}

#[derive(Default, Clone)]
struct Items {
    thread_ids: Vec<String>,
    item_ids: Vec<String>,
    turn_ids: Vec<String>,
    ordinals: Vec<i64>,
    seqs: Vec<i64>,
    kinds: Vec<String>,
    statuses: Vec<String>,
    items: Vec<String>,
    envelopes: Vec<String>,
    token_counts: Vec<Option<i64>>,
    input_items: Vec<Option<String>>,
    llm: Vec<bool>,
}

/// Appends `from`'s columns to `into`'s, field by field.
macro_rules! extend {
    ($into:expr, $from:expr, $($field:ident),+) => {
        $( $into.$field.extend_from_slice(&$from.$field); )+
    };
}

impl Rows {
    fn extend(&mut self, call: &Rows) {
        let (e, ce) = (&mut self.events, &call.events);
        extend!(e, ce, thread_ids, seqs, methods, item_ids, ats, payloads);
        let (t, ct) = (&mut self.turns, &call.turns);
        extend!(
            t,
            ct,
            thread_ids,
            turn_ids,
            ordinals,
            seqs,
            statuses,
            errors,
            started,
            completed,
            durations,
            token_usages,
            view_ranks
        );
        let (i, ci) = (&mut self.items, &call.items);
        extend!(
            i,
            ci,
            thread_ids,
            item_ids,
            turn_ids,
            ordinals,
            seqs,
            kinds,
            statuses,
            items,
            envelopes,
            token_counts,
            input_items,
            llm
        );
    }

    /// One transaction, in one round trip: the futures are polled in
    /// order, so the connection sends them in order without waiting for
    /// the answers between.
    async fn write(
        &self,
        client: &Client,
        (events, turns, items): &(
            tokio_postgres::Statement,
            tokio_postgres::Statement,
            tokio_postgres::Statement,
        ),
    ) -> anyhow::Result<()> {
        let (e, t, i) = (&self.events, &self.turns, &self.items);
        let event_params: [&(dyn ToSql + Sync); 6] = [
            &e.thread_ids,
            &e.seqs,
            &e.methods,
            &e.item_ids,
            &e.ats,
            &e.payloads,
        ];
        let turn_params: [&(dyn ToSql + Sync); 11] = [
            &t.thread_ids,
            &t.turn_ids,
            &t.ordinals,
            &t.seqs,
            &t.statuses,
            &t.errors,
            &t.started,
            &t.completed,
            &t.durations,
            &t.token_usages,
            &t.view_ranks,
        ];
        let item_params: [&(dyn ToSql + Sync); 12] = [
            &i.thread_ids,
            &i.item_ids,
            &i.turn_ids,
            &i.ordinals,
            &i.seqs,
            &i.kinds,
            &i.statuses,
            &i.items,
            &i.envelopes,
            &i.token_counts,
            &i.input_items,
            &i.llm,
        ];
        tokio::try_join!(
            client.batch_execute("BEGIN"),
            client.execute(events, &event_params),
            client.execute(turns, &turn_params),
            client.execute(items, &item_params),
            client.batch_execute("COMMIT"),
        )?;
        Ok(())
    }
}
