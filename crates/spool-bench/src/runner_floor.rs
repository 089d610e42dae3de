//! The store's share of a runner step: the floor beside `spool bench
//! runner`'s figure.
//!
//! A `replay` step logs what the model's response and the tool made, waits
//! until the store holds it, and reads back the records logged since the
//! last request. The floor does exactly that and nothing else: the events
//! a measured turn logged, step by step, pushed through an [`Appender`]
//! into a fresh store in the same two pushes the runner makes (the
//! response with the call's filing, then the call's completion), one
//! `sync`, and the same `llm_records_after` read. What a step costs above
//! the floor is the runner's own work (mapping the stream, filing, running
//! the tool, growing the view) and the hand-offs between its tasks.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use spool_protocol::{ItemKind, ServerNotification, ThreadEvent};
use spool_store::{Appender, Durability, NewThread, SqliteStore, Store, StoreOptions};
use tokio::sync::mpsc;

/// One step's events: the response with the filing, then the completion.
struct Step {
    filing: Vec<ServerNotification>,
    completion: Vec<ServerNotification>,
}

/// The per-step times (µs) of logging `events` (a measured turn of `steps`
/// tool steps, from the thread `thread_id`) again into a fresh store in
/// `dir`, as the runner logs them.
pub(super) async fn store_floor(
    dir: &Path,
    durability: Durability,
    thread_id: &str,
    events: &[ThreadEvent],
    steps: usize,
) -> anyhow::Result<Vec<f64>> {
    let options = StoreOptions {
        durability,
        ..StoreOptions::default()
    };
    let store = SqliteStore::open(dir.join("floor.db"), options)?;
    // A `replay` thread, as the measured one.
    let thread = store
        .create_thread(NewThread::new("floor", dir.display().to_string()))
        .await?;
    let floor_thread = thread.thread.id;
    let (opening, steps_events) = split(events, thread_id, &floor_thread, steps)?;

    let (outcomes, mut received) = mpsc::unbounded_channel();
    // The runner's consumer drains the outcomes; so does this one.
    let drain = tokio::spawn(async move { while received.recv().await.is_some() {} });
    let appender = Appender::spawn(store.clone(), floor_thread.clone(), outcomes);
    appender.push(opening)?;
    appender.sync().await?;
    let mut after = last_seq(&store, &floor_thread).await?;
    let mut times = Vec::with_capacity(steps);
    for step in steps_events {
        let start = Instant::now();
        appender.push(step.filing)?;
        appender.push(step.completion)?;
        appender.sync().await?;
        let records = store.llm_records_after(&floor_thread, after, &[]).await?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
        ensure!(!records.is_empty(), "a floor step read back nothing");
        after = records.iter().map(|r| r.ordinal).max().unwrap_or(after);
    }
    appender.finish().await?;
    drain.await.context("the outcome drain panicked")?;
    store.close().await?;
    Ok(times)
}

async fn last_seq(store: &SqliteStore, thread_id: &str) -> anyhow::Result<u64> {
    Ok(store
        .thread(thread_id)
        .await?
        .context("the floor's thread is gone")?
        .last_seq)
}

/// The turn's events as the floor logs them, moved to `to` thread: what
/// came before the first step, then each of the `steps` steps, cut after
/// the completion of each function call and, within a step, after the
/// call's `item/started`.
fn split(
    events: &[ThreadEvent],
    from: &str,
    to: &str,
    steps: usize,
) -> anyhow::Result<(Vec<ServerNotification>, Vec<Step>)> {
    let moved = |event: &ThreadEvent| -> anyhow::Result<ServerNotification> {
        let json = serde_json::to_string(&event.payload)?.replace(from, to);
        Ok(serde_json::from_str(&json)?)
    };
    let mut opening = Vec::new();
    let mut out = Vec::new();
    let mut current: Vec<ServerNotification> = Vec::new();
    // What `create_thread` logged is the floor's own thread's already.
    let turn = events
        .iter()
        .position(|e| matches!(e.payload, ServerNotification::TurnStarted(_)))
        .context("the turn never started")?;
    for event in &events[turn..] {
        let payload = moved(event)?;
        let call_completed = matches!(&payload,
            ServerNotification::ItemCompleted(done) if done.item.kind() == ItemKind::FunctionCall);
        let opens_first_step = out.is_empty()
            && opening.is_empty()
            && matches!(payload, ServerNotification::ItemCompleted(_));
        current.push(payload);
        if opens_first_step {
            // The user's message: the turn's opening, logged before the
            // first model call.
            opening = std::mem::take(&mut current);
            continue;
        }
        if call_completed {
            let started = current
                .iter()
                .rposition(|n| matches!(n, ServerNotification::ItemStarted(_)))
                .context("a call completed that never started")?;
            let completion = current.split_off(started + 1);
            out.push(Step {
                filing: std::mem::take(&mut current),
                completion,
            });
            if out.len() == steps {
                break;
            }
        }
    }
    ensure!(
        out.len() == steps,
        "the turn logged {} tool steps, not {steps}",
        out.len()
    );
    Ok((opening, out))
}
