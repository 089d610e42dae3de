//! The writer's group commit: one transaction for a batch's threads, sent
//! in one round trip (`pipeline.rs`), fenced by their leases
//! (`holder.rs`), with the notice other servers hear (`listen.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use super::batch::{self, Plan};
use super::lease;
use super::pipeline::Pipeline;
use super::query::{CachedClient, Query};
use super::writer::Writer;
use crate::error::StoreError;
use crate::thread_state::ThreadState;

impl Writer {
    /// Writes the dirty threads in one transaction and commits it; answers
    /// the threads this server lost (their leases were fenced: nothing of
    /// them is written, and their states and leases are forgotten). On
    /// failure nothing of the batch is stored, and the states of its
    /// threads are dropped (they held what was not stored): the next
    /// append of each loads it again from what is committed.
    ///
    /// The whole transaction goes in one round trip (`pipeline.rs`): its
    /// fence aborts it unless every lease holds. Only then does a second
    /// try learn which were lost, and write the others.
    pub(super) fn commit(&mut self, dirty: &[String]) -> Result<Vec<String>, Arc<StoreError>> {
        if dirty.is_empty() {
            return Ok(Vec::new());
        }
        let all: Vec<&String> = dirty.iter().collect();
        let result = match self.write(&all, Fencing::InPipeline) {
            Ok(()) => Ok(Vec::new()),
            Err(Failed::Fenced) => {
                let _ = self.conn.block_on(self.conn.client.simple("ROLLBACK"));
                self.conn
                    .block_on(self.conn.client.simple("BEGIN"))
                    .map_err(StoreError::from)
                    .and_then(|()| self.fence(dirty))
                    .and_then(|lost| {
                        let held: Vec<&String> =
                            dirty.iter().filter(|id| !lost.contains(id)).collect();
                        match self.write(&held, Fencing::Done) {
                            Ok(()) => Ok(lost),
                            Err(Failed::Store(error)) => Err(error),
                            Err(Failed::Fenced) => Err(StoreError::StateLost {
                                thread_id: held
                                    .first()
                                    .map(|id| id.to_string())
                                    .unwrap_or_default(),
                                reason: "fenced without a fence".to_owned(),
                            }),
                        }
                    })
            }
            Err(Failed::Store(error)) => Err(error),
        };
        match result {
            Ok(lost) => {
                for thread_id in dirty {
                    if lost.contains(thread_id) {
                        self.forget(thread_id);
                    } else if let Some(state) = self.threads.get_mut(thread_id) {
                        state.committed();
                    }
                }
                Ok(lost)
            }
            Err(error) => {
                let _ = self.conn.block_on(self.conn.client.simple("ROLLBACK"));
                for thread_id in dirty {
                    self.threads.remove(thread_id);
                }
                tracing::error!(%error, "a PostgreSQL group commit failed");
                Err(Arc::new(error))
            }
        }
    }

    /// Sends the pending changes of `ids`, the notification of the commit
    /// and `COMMIT` in one pipeline; with [`Fencing::InPipeline`], `BEGIN`
    /// and the fence go first in it (otherwise the caller began the
    /// transaction and fenced it).
    fn write(&mut self, ids: &[&String], fencing: Fencing) -> Result<(), Failed> {
        let Writer {
            conn,
            threads,
            me,
            leases,
            ttl,
            applying,
            ..
        } = self;
        let q = &conn.client;
        let shapes = conn.block_on(async {
            let mut shapes = Vec::with_capacity(ids.len());
            for &id in ids {
                let state = threads.get_mut(id).ok_or_else(|| StoreError::StateLost {
                    thread_id: id.clone(),
                    reason: "its state was dropped before the commit".to_owned(),
                })?;
                shapes.push(batch::prepare(q, id, state).await?);
            }
            let mut plan = Plan::default();
            for (&id, shape) in ids.iter().zip(&shapes) {
                if let Some(state) = threads.get(id) {
                    plan.add(id, state, shape)?;
                }
            }
            let (notify_ids, notify_seqs) = last_seqs(ids, threads);
            let generations: Vec<i64> = ids
                .iter()
                .map(|&id| leases.get(id).copied().unwrap_or(-1))
                .collect();
            let (me, ttl) = (&**me, lease::ttl_millis(*ttl));

            let applied = applied_commands(applying, ids.iter().copied());
            let mut pipeline = Pipeline::default();
            let fence_at = match fencing {
                Fencing::InPipeline => {
                    let lock = q.statement(lease::FENCE_LOCK).await?;
                    let fence = q.statement(lease::FENCE_ALL_OR_ABORT).await?;
                    let (ids, generations) = (&ids, &generations);
                    pipeline.push(q.simple("BEGIN"));
                    pipeline.push(async move { q.query_prepared(&lock, &[ids]).await });
                    Some(pipeline.push(async move {
                        q.execute_prepared(&fence, &[ids, generations, &me, &ttl])
                            .await
                    }))
                }
                Fencing::Done => None,
            };
            plan.queue(q, &mut pipeline).await?;
            if !applied.is_empty() {
                let statement = q.statement(APPLIED).await?;
                let applied = &applied;
                pipeline.push(async move { q.execute_prepared(&statement, &[applied]).await });
            }
            if !notify_ids.is_empty() {
                let notify = q.statement(NOTIFY).await?;
                let (ids, seqs) = (&notify_ids, &notify_seqs);
                pipeline.push(async move { q.query_prepared(&notify, &[&me, ids, seqs]).await });
            }
            pipeline.push(q.simple("COMMIT"));
            match pipeline.run().await {
                Ok(()) => Ok(shapes),
                Err(failed)
                    if Some(failed.index) == fence_at && lease::fence_failed(&failed.error) =>
                {
                    Err(Failed::Fenced)
                }
                Err(failed) => Err(Failed::Store(failed.error.into())),
            }
        })?;
        for (&id, shape) in ids.iter().zip(&shapes) {
            if let Some(state) = threads.get_mut(id) {
                batch::wrote(state, shape);
            }
            applying.remove(id);
        }
        Ok(())
    }
}

/// Tells the other servers (`listen.rs`) which threads a commit wrote, up
/// to which seq: `$1` is this server, `$2` and `$3` the threads and their
/// last seqs. Run inside the commit's transaction, it is delivered with
/// the commit.
const NOTIFY: &str = "SELECT pg_notify('spool_events', $1 || ' ' || x.seq || ' ' || x.thread_id) \
     FROM unnest($2::text[], $3::bigint[]) AS x(thread_id, seq)";

/// Records that forwarded commands took effect (`commands.rs`): in the
/// transaction of the first events written after they began to run.
pub(super) const APPLIED: &str =
    "UPDATE commands SET applied_at = now() WHERE id = ANY($1::text[]) AND applied_at IS NULL";

/// The commands running on `threads` ([`Writer::applying`]).
pub(super) fn applied_commands<'a>(
    applying: &'a HashMap<String, Vec<String>>,
    threads: impl Iterator<Item = &'a String>,
) -> Vec<&'a str> {
    threads
        .filter_map(|id| applying.get(id))
        .flatten()
        .map(String::as_str)
        .collect()
}

/// [`NOTIFY`]'s threads and their last seqs, for the threads `written`.
fn last_seqs<'a>(
    written: &[&'a String],
    threads: &HashMap<String, ThreadState>,
) -> (Vec<&'a str>, Vec<i64>) {
    written
        .iter()
        .filter_map(|&id| {
            let state = threads.get(id)?;
            Some((id.as_str(), crate::codec::sql_int(state.reducer.last_seq())))
        })
        .unzip()
}

/// [`NOTIFY`] on its own.
pub(super) async fn notify(
    q: &CachedClient,
    me: &str,
    written: &[&String],
    threads: &HashMap<String, ThreadState>,
) -> Result<(), StoreError> {
    let (ids, seqs) = last_seqs(written, threads);
    if !ids.is_empty() {
        q.rows(NOTIFY, &[&me, &ids, &seqs]).await?;
    }
    Ok(())
}

/// How a commit is fenced.
#[derive(Clone, Copy)]
enum Fencing {
    /// In the commit's own pipeline, aborting it unless every lease holds.
    InPipeline,
    /// Already, by the caller, in the transaction.
    Done,
}

/// Why [`Writer::write`] failed.
enum Failed {
    /// A lease did not hold: nothing was stored.
    Fenced,
    Store(StoreError),
}

impl<E: Into<StoreError>> From<E> for Failed {
    fn from(error: E) -> Self {
        Failed::Store(error.into())
    }
}
