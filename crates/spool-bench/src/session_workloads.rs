//! (a)–(e): the Session API, the one the Agents SDK's `SQLiteSession` is
//! compared with. Every call's argument is built before the clock starts, so
//! only the store is timed; after the clock stops, each workload checks that
//! what it timed really happened.

use std::time::Instant;

use anyhow::ensure;
use serde_json::Value;
use spool_store::{AnyStore, Session, Store, phases};
use tokio::task::JoinSet;

use super::workloads::{Sample, Sizes};
use super::{StoreAt, open_store};

/// (a) and (b): `items` in calls of `per_call` items each.
pub async fn add(at: &StoreAt<'_>, items: Vec<Value>, per_call: usize) -> anyhow::Result<Sample> {
    let store = open_store(at).await?;
    let session = Session::open(store.clone(), "bench").await?;
    let count = items.len();
    let calls = chunks(items, per_call);

    phases::clear();
    let start = Instant::now();
    for call in calls {
        session.add_items(call).await?;
    }
    let mut sample = Sample::timed(start.elapsed());
    phase_extras(&mut sample);

    let stored = session.get_items(None).await?.len();
    ensure!(stored == count, "stored {stored} of {count} items");
    store.close().await?;
    // The file once closed (its WAL checkpointed into it and removed),
    // with the thread row and the free pages it holds: what the items
    // cost on disk.
    if let StoreAt::Sqlite(dir) = at {
        let bytes = std::fs::metadata(dir.join("spool.db"))?.len();
        sample
            .extra
            .push(("bytes_per_item", bytes as f64 / count as f64));
    }
    Ok(sample)
}

/// The phase times of the timed loop, when `--phases` timed them: in the
/// run's extras, and on stderr.
fn phase_extras(sample: &mut Sample) {
    let mut line = String::new();
    for (phase, mean_us) in phases::take() {
        sample.extra.push((phase.key(), mean_us));
        line.push_str(&format!(" {} {mean_us:.1}", phase.key()));
    }
    if let Some(frames) = phases::frames_per_commit() {
        sample.extra.push(("wal_frames_per_commit", frames));
        line.push_str(&format!(" wal_frames_per_commit {frames:.1}"));
    }
    if !line.is_empty() {
        eprintln!("    phases (means per call or commit):{line}");
    }
}

/// (c): every item back, decoded, `all_reads` times (one read of 10,000
/// items takes ~20 ms: a run of one read was mostly the machine's noise).
pub async fn get_all(at: &StoreAt<'_>, items: Vec<Value>, sizes: &Sizes) -> anyhow::Result<Sample> {
    let store = open_store(at).await?;
    let session = filled(&store, items, sizes.batch).await?;

    let mut got = Vec::new();
    let start = Instant::now();
    for _ in 0..sizes.all_reads {
        got = std::hint::black_box(session.get_items(None).await?);
    }
    let sample = Sample::timed(start.elapsed());

    ensure!(
        got.len() == sizes.items,
        "got {} of {} items",
        got.len(),
        sizes.items
    );
    drop(std::hint::black_box(got));
    store.close().await?;
    Ok(sample)
}

/// (d): the latest `tail_limit` items, `tail_calls` times; with `raw`,
/// (n): the same through `get_items_raw`, each item as its JSON text,
/// checked after the clock stops to be the very items `get_items` gives.
pub async fn get_tail(
    at: &StoreAt<'_>,
    items: Vec<Value>,
    sizes: &Sizes,
    raw: bool,
) -> anyhow::Result<Sample> {
    let store = open_store(at).await?;
    let expected_last = items.last().cloned();
    let session = filled(&store, items, sizes.batch).await?;
    let limit = Some(sizes.tail_limit);

    let (sample, last) = if raw {
        let mut last = Vec::new();
        let start = Instant::now();
        for _ in 0..sizes.tail_calls {
            last = std::hint::black_box(session.get_items_raw(limit).await?);
        }
        let sample = Sample::timed(start.elapsed());
        let parsed = last
            .iter()
            .map(|item| serde_json::from_str::<Value>(item.get()))
            .collect::<Result<Vec<_>, _>>()?;
        ensure!(
            parsed == session.get_items(limit).await?,
            "get_items_raw and get_items gave different items"
        );
        (sample, parsed)
    } else {
        let mut last = Vec::new();
        let start = Instant::now();
        for _ in 0..sizes.tail_calls {
            last = std::hint::black_box(session.get_items(limit).await?);
        }
        (Sample::timed(start.elapsed()), last)
    };

    ensure!(
        last.len() == sizes.tail_limit.min(sizes.items),
        "got {} items, asked for {}",
        last.len(),
        sizes.tail_limit
    );
    ensure!(
        last.last() == expected_last.as_ref(),
        "the newest item is not last"
    );
    store.close().await?;
    Ok(sample)
}

/// (e): concurrent appenders, each on its own session of one shared store,
/// every append single-item and durable: what group commit is for.
pub async fn concurrent(at: &StoreAt<'_>, sizes: &Sizes) -> anyhow::Result<Sample> {
    let store = open_store(at).await?;
    let mut appenders = Vec::with_capacity(sizes.appenders);
    for k in 0..sizes.appenders {
        let session = Session::open(store.clone(), &format!("bench-{k}")).await?;
        let calls = chunks(super::items::appender_items(k, sizes.appends_each), 1);
        appenders.push((session, calls));
    }

    phases::clear();
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (session, calls) in appenders {
        tasks.spawn(async move {
            for call in calls {
                session.add_items(call).await?;
            }
            anyhow::Ok(session)
        });
    }
    let mut sessions = Vec::with_capacity(sizes.appenders);
    while let Some(done) = tasks.join_next().await {
        sessions.push(done??);
    }
    let mut sample = Sample::timed(start.elapsed());
    phase_extras(&mut sample);

    for session in &sessions {
        let stored = session.get_items(None).await?.len();
        ensure!(
            stored == sizes.appends_each,
            "a session stored {stored} items"
        );
    }
    store.close().await?;
    Ok(sample)
}

/// A session holding `items`, added `batch` at a time (untimed setup).
pub(crate) async fn filled(
    store: &AnyStore,
    items: Vec<Value>,
    batch: usize,
) -> anyhow::Result<Session<AnyStore>> {
    let session = Session::open(store.clone(), "bench").await?;
    for call in chunks(items, batch) {
        session.add_items(call).await?;
    }
    Ok(session)
}

/// `items` split into calls of `size` items, in order.
fn chunks(items: Vec<Value>, size: usize) -> Vec<Vec<Value>> {
    let mut calls = Vec::with_capacity(items.len().div_ceil(size));
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        calls.push(items.by_ref().take(size).collect());
    }
    calls
}
