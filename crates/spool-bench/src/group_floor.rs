//! The group-commit floor (r): the rows of (e), from (e)'s 16 concurrent
//! callers, through the simplest group commit there is, and nothing else.
//!
//! (l) commits one call of every session in each transaction: the largest
//! group 16 callers can form, which a writer whose callers each wait for
//! their own commit does not reach. While a commit runs, its callers are
//! waiting for it and cannot be queued for the next one, so the next
//! starts with whoever queued meanwhile. (r) measures what such a writer
//! gets from these rows on this machine: 16 async callers (tokio tasks, as
//! in (e)) each hand their session's calls, one at a time, to a writer
//! thread over a `std::sync::mpsc` channel and await a `tokio::sync::oneshot`
//! answer; the thread takes a call, drains whatever else queued, writes
//! them all in one transaction on a bare connection (`layout_floor.rs`),
//! commits and answers. No reducer, no encoding, no seqs: (e) over (r) is
//! spool's code under concurrency, and (r) over (l) what the group sizes
//! waiting callers form cost.

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::Instant;

use anyhow::{Context, anyhow};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::floor::CommitClock;
use super::layout_floor::{
    Replayer, StoredRows, appender_calls, check_count, stored_rows, target_connection,
};
use super::workloads::Sample;

/// One call for the writer thread: its session and its place there, and
/// where to say it is durable.
type Handed = (usize, usize, oneshot::Sender<anyhow::Result<()>>);

/// (r): `appenders` sessions of `appends_each` single-item calls, each
/// session's calls made in turn by a task of its own.
pub async fn concurrent(
    dir: &Path,
    appenders: usize,
    appends_each: usize,
) -> anyhow::Result<Sample> {
    let rows = Arc::new(stored_rows(dir, appender_calls(appenders, appends_each)).await?);
    let (hand, inbox) = mpsc::channel::<Handed>();
    let writer_rows = rows.clone();
    let writer = std::thread::Builder::new()
        .name("bench-group-writer".to_owned())
        .spawn(move || commit_groups(&writer_rows, &inbox))?;

    let start = Instant::now();
    let mut callers = JoinSet::new();
    for (session, calls) in rows.sessions.iter().enumerate() {
        let (hand, calls) = (hand.clone(), calls.len());
        callers.spawn(async move {
            for call in 0..calls {
                let (done, durable) = oneshot::channel();
                hand.send((session, call, done))
                    .map_err(|_| anyhow!("the writer thread stopped early"))?;
                durable
                    .await
                    .context("the writer thread dropped a call")??;
            }
            anyhow::Ok(())
        });
    }
    drop(hand);
    while let Some(done) = callers.join_next().await {
        done??;
    }
    let mut sample = Sample::timed(start.elapsed());
    let (clock, commits) = writer
        .join()
        .map_err(|_| anyhow!("the writer thread panicked"))??;
    clock.report(&mut sample);
    let calls = appenders * appends_each;
    if commits > 0 {
        let per_commit = calls as f64 / commits as f64;
        sample.extra.push(("calls_per_commit", per_commit));
        eprintln!("    group commits: {commits}, {per_commit:.1} calls each");
    }
    Ok(sample)
}

/// The writer thread: a call, then whatever queued behind it, in one
/// transaction; every caller in it answered after its `COMMIT`. Hands back
/// the `COMMIT`s' times (with `--phases`) and how many there were.
fn commit_groups(
    rows: &StoredRows,
    inbox: &mpsc::Receiver<Handed>,
) -> anyhow::Result<(CommitClock, usize)> {
    let conn = target_connection(rows)?;
    let mut replayer = Replayer::new(&conn)?;
    let mut group: Vec<Handed> = Vec::new();
    let mut commits = 0;
    while let Ok(first) = inbox.recv() {
        group.push(first);
        group.extend(inbox.try_iter());
        let calls = group
            .iter()
            .map(|(session, call, _)| rows.sessions.get(*session)?.get(*call))
            .collect::<Option<Vec<_>>>()
            .context("a call that is not in the rows")?;
        let result = replayer.calls(calls);
        commits += 1;
        let failed = result.as_ref().err().map(|e| format!("{e:#}"));
        for (_, _, done) in group.drain(..) {
            // A caller may have stopped waiting; the commit stands anyway.
            let _ = done.send(match &failed {
                None => Ok(()),
                Some(error) => Err(anyhow!("{error}")),
            });
        }
        if let Some(error) = failed {
            anyhow::bail!("group commit {commits}: {error}");
        }
    }
    check_count(&conn, rows.count)?;
    Ok((std::mem::take(&mut replayer.clock), commits))
}
