//! The hand-off floor (m): the layout floor of (a) (see `layout_floor.rs`)
//! with spool's thread architecture around it and nothing else.
//!
//! A writer thread owns the bare connection; an async caller hands it each
//! `add_items` call over a `std::sync::mpsc` channel and awaits a
//! `tokio::sync::oneshot` answer sent after the call's `COMMIT`, as
//! `SqliteStore` does for callers that find its writer busy. Per call that
//! is two cross-thread wake-ups (the idle writer, then the waiting caller)
//! on top of (j)'s SQLite work.
//!
//! So (m) against (j) is what the hand-offs cost on this machine. (a) no
//! longer pays them: a lone caller's append runs on its own thread while
//! the writer is idle (`spool-store`'s `sqlite/writer/shared.rs`), so (a)
//! against (j) is spool's code alone — mapping the items, encoding, the
//! reducer, the writer's bookkeeping — and (m) says what that saves.

use std::path::Path;
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{Context, anyhow};
use serde_json::Value;
use tokio::sync::oneshot;

use super::floor::CommitClock;
use super::layout_floor::{Replayer, StoredRows, check_count, stored_rows, target_connection};
use super::workloads::Sample;

/// One call for the writer thread: the round to commit, and where to say
/// it is durable.
type Handed = (usize, oneshot::Sender<anyhow::Result<()>>);

/// (m): `items` added one per call to one session, replayed through a
/// writer thread.
pub async fn one_session(dir: &Path, items: Vec<Value>) -> anyhow::Result<Sample> {
    let calls = items.into_iter().map(|item| vec![item]).collect();
    let rows = std::sync::Arc::new(stored_rows(dir, vec![calls]).await?);

    let (hand, inbox) = mpsc::channel::<Handed>();
    let writer_rows = rows.clone();
    let writer = std::thread::Builder::new()
        .name("bench-handoff-writer".to_owned())
        .spawn(move || write_handed_calls(&writer_rows, inbox))?;

    let start = Instant::now();
    for round in 0..rows.rounds() {
        let (done, durable) = oneshot::channel();
        hand.send((round, done))
            .map_err(|_| anyhow!("the writer thread stopped early"))?;
        durable
            .await
            .context("the writer thread dropped a call")??;
    }
    let mut sample = Sample::timed(start.elapsed());
    drop(hand);
    let clock = writer
        .join()
        .map_err(|_| anyhow!("the writer thread panicked"))??;
    clock.report(&mut sample);
    Ok(sample)
}

/// The writer thread: commits each handed call, answers, and at the end
/// checks that every item landed; hands back its `COMMIT`s' times (with
/// `--phases`), to set beside the store's, whose writer sleeps between
/// commits as this one does.
fn write_handed_calls(
    rows: &StoredRows,
    inbox: mpsc::Receiver<Handed>,
) -> anyhow::Result<CommitClock> {
    let conn = target_connection(rows)?;
    let mut replayer = Replayer::new(&conn)?;
    while let Ok((round, done)) = inbox.recv() {
        let result = replayer.round(&rows.sessions, round);
        let failed = result.as_ref().err().map(|e| format!("{e:#}"));
        // The caller may have stopped waiting; the commit stands anyway.
        let _ = done.send(result);
        if let Some(error) = failed {
            anyhow::bail!("round {round}: {error}");
        }
    }
    check_count(&conn, rows.count)?;
    Ok(std::mem::take(&mut replayer.clock))
}
