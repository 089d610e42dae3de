//! The writer's leases (`docs/internals/replicas.md`): holding a thread
//! before writing it, taking over what a lost holder left, fencing every
//! commit, renewing on a heartbeat, and letting go.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::lease;
use super::query::Query;
use super::requests::run_states;
use super::writer::{Batch, Writer};
use crate::error::StoreError;
use crate::thread_state::ThreadState;
use crate::thread_state::ops::{interrupt_abandoned, stage};
use crate::thread_state::prepare::now_ms;

/// Threads whose holder is gone (its lease ran out, or was released) with
/// a turn in progress that no run state says is paused: what a takeover
/// closes. Also those whose lease runs out within `$1` seconds (before
/// the next beat), with the seconds left (`<= 0`: gone already), so the
/// writer can look again the moment a dead holder's lease ends instead of
/// at its next beat. A live holder renews a fifth of the way into its
/// lease, so its leases are seldom that close to their end. (A released
/// lease ends at `-infinity`, which PostgreSQL cannot subtract from.)
const LAPSING: &str = "SELECT l.thread_id, \
       CASE WHEN l.expires_at <= now() THEN 0 \
         ELSE extract(epoch FROM l.expires_at - now())::float8 END AS secs_left \
     FROM thread_leases l \
     WHERE l.expires_at <= now() + make_interval(secs => $1::float8) \
       AND EXISTS (SELECT 1 FROM turns t \
       WHERE t.thread_id = l.thread_id AND t.status = 'inProgress' \
       AND NOT EXISTS (SELECT 1 FROM run_states r \
         WHERE r.thread_id = t.thread_id AND r.turn_id = t.turn_id)) \
     ORDER BY l.thread_id LIMIT 256";

/// How long after a lease's end the writer looks at it: the database's
/// clock and this machine's may tick apart by a little.
const AFTER_LAPSE: Duration = Duration::from_millis(5);

const HOLDER: &str = "SELECT holder FROM thread_leases WHERE thread_id = $1";
/// A new holder runs again what a lost one claimed and did not finish
/// (`commands.rs`), unless it had taken effect: the claims go, and this
/// server is told.
const FREE_CLAIMS: &str = "WITH freed AS (UPDATE commands SET claimed_by = NULL \
     WHERE thread_id = $1 AND done_at IS NULL AND applied_at IS NULL \
       AND claimed_by IS NOT NULL AND claimed_by <> $2 \
     RETURNING id) SELECT pg_notify('spool_commands', $2 || ' ' || freed.id) FROM freed";
/// What a lost holder began and did not answer is never run again: it
/// ends with an error (`$3`), and its sender is told.
const END_APPLIED: &str = "WITH ended AS (UPDATE commands SET done_at = now(), error = $3 \
     WHERE thread_id = $1 AND done_at IS NULL AND applied_at IS NOT NULL \
       AND claimed_by IS NOT NULL AND claimed_by <> $2 \
     RETURNING from_server, id) \
     SELECT pg_notify('spool_replies', ended.from_server || ' ' || ended.id) FROM ended";
const SERVER_BEAT: &str = "INSERT INTO servers (id) VALUES ($1) \
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()";
const SERVER_GONE: &str = "DELETE FROM servers WHERE id = $1";
/// Lets go of the threads `$2` (a lane's), held by this server (`$1`).
const RELEASE_ALL: &str = "UPDATE thread_leases SET expires_at = '-infinity' \
     WHERE holder = $1 AND thread_id = ANY($2::text[]) AND expires_at > now()";

impl Writer {
    /// How often leases are renewed: a fifth of their life, so a renewal
    /// can be late four times before the lease runs out.
    pub(super) fn heartbeat(&self) -> Duration {
        heartbeat(self.ttl)
    }

    /// Holds `thread_id`, acquiring its lease unless this server holds it
    /// already. A grant drops any cached state of the thread (another
    /// server may have written it since) and stages the closing of turns
    /// the previous holder left in progress, as crash recovery does: a
    /// takeover is the recovery of one thread. The thread is then dirty in
    /// `batch`. A thread that does not exist yet is simply held.
    pub(super) fn hold(&mut self, thread_id: &str, batch: &mut Batch) -> Result<(), StoreError> {
        if self.leases.contains_key(thread_id) {
            return Ok(());
        }
        let client = self.conn.client.raw();
        let granted = self
            .conn
            .block_on(lease::acquire(client, thread_id, &self.me, self.ttl))?;
        let Some(granted) = granted else {
            let holder = self
                .conn
                .block_on(self.conn.client.opt_row(HOLDER, &[&thread_id]))?
                .map(|row| row.try_get::<_, String>(0))
                .transpose()?
                .unwrap_or_default();
            return Err(StoreError::HeldElsewhere {
                thread_id: thread_id.to_owned(),
                holder,
            });
        };
        self.leases.insert(thread_id.to_owned(), granted.generation);
        self.threads.remove(thread_id);
        let client = &self.conn.client;
        let (me, ended) = (&*self.me, super::commands::ended_by_takeover());
        self.conn.block_on(async {
            client.rows(FREE_CLAIMS, &[&thread_id, &me]).await?;
            client.rows(END_APPLIED, &[&thread_id, &me, &ended]).await
        })?;
        if self.take_over(thread_id)? {
            batch.taken_over.push(thread_id.to_owned());
            if !batch.dirty.iter().any(|id| id == thread_id) {
                batch.dirty.push(thread_id.to_owned());
            }
        }
        Ok(())
    }

    /// Loads a thread just granted and stages the closing of what is left
    /// in progress; whether it staged anything.
    fn take_over(&mut self, thread_id: &str) -> Result<bool, StoreError> {
        let Some(mut state) = ThreadState::load(&self.conn, thread_id)? else {
            return Ok(false);
        };
        if !state.streaming() {
            self.threads.insert(thread_id.to_owned(), state);
            return Ok(false);
        }
        let resumable: HashSet<String> = self
            .conn
            .block_on(run_states(&self.conn.client, thread_id))?
            .into_iter()
            .map(|state| state.turn_id)
            .collect();
        let closing = interrupt_abandoned(&state.reducer, &resumable, now_ms());
        let staged = !closing.is_empty();
        if staged {
            let items = closing
                .iter()
                .filter(|n| matches!(n, spool_protocol::ServerNotification::ItemCompleted(_)))
                .count();
            stage(&self.conn, &mut state, thread_id, closing.clone())?;
            tracing::info!(
                thread_id,
                items,
                turns = closing.len() - items,
                "took a thread over: items incomplete, turns interrupted"
            );
        }
        self.threads.insert(thread_id.to_owned(), state);
        Ok(staged)
    }

    /// Inside a transaction: takes the fences of `threads` (until it
    /// ends) and answers those this server no longer holds.
    pub(super) fn fence(&self, threads: &[String]) -> Result<Vec<String>, StoreError> {
        let generations: Vec<i64> = threads
            .iter()
            .map(|id| self.leases.get(id).copied().unwrap_or(-1))
            .collect();
        let (me, ttl) = (&*self.me, lease::ttl_millis(self.ttl));
        let client = &self.conn.client;
        let rows = self.conn.block_on(async {
            client.rows(lease::FENCE_LOCK, &[&threads]).await?;
            client
                .rows(lease::FENCE_ALL, &[&threads, &generations, &me, &ttl])
                .await
        })?;
        let held = rows
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<HashSet<String>, _>>()?;
        Ok(threads
            .iter()
            .filter(|id| !held.contains(*id))
            .cloned()
            .collect())
    }

    /// Forgets a thread this server lost: its lease and its state.
    pub(super) fn forget(&mut self, thread_id: &str) {
        if self.leases.remove(thread_id).is_some() {
            tracing::warn!(thread_id, "lost the lease on a thread");
        }
        self.threads.remove(thread_id);
        self.applying.remove(thread_id);
    }

    /// Lets an idle thread go: any server may take it at once.
    pub(super) fn release(&mut self, thread_id: &str) {
        let Some(generation) = self.leases.remove(thread_id) else {
            return;
        };
        let held = lease::Lease {
            thread_id: thread_id.to_owned(),
            holder: self.me.to_string(),
            generation,
            upto: 0,
        };
        if let Err(error) = self
            .conn
            .block_on(lease::release(self.conn.client.raw(), &held))
        {
            tracing::warn!(thread_id, %error, "cannot release a thread's lease");
        }
    }

    /// The store closes: every lease of this lane goes, and with the
    /// first lane's, this server.
    pub(super) fn release_all(&mut self) {
        let me = &*self.me;
        let client = &self.conn.client;
        let held: Vec<&str> = self.leases.keys().map(String::as_str).collect();
        let first = self.lane.is_first();
        let released = self.conn.block_on(async {
            if !held.is_empty() {
                client.exec(RELEASE_ALL, &[&me, &held]).await?;
            }
            match first {
                true => client.exec(SERVER_GONE, &[&me]).await,
                false => Ok(0),
            }
        });
        if let Err(error) = released {
            tracing::warn!(%error, "cannot release this server's leases");
        }
        self.leases.clear();
    }

    /// Renews this lane's leases, says the server is alive (the first
    /// lane), and takes over the threads of this lane whose holder is gone
    /// with a turn in progress. The next beat is due a heartbeat later, or
    /// as soon as the lease of such a thread runs out, if sooner. Errors
    /// are logged: a missed beat only shortens what is left of the leases.
    pub(super) fn beat(&mut self) {
        let heartbeat = self.heartbeat();
        self.next_beat = Instant::now() + heartbeat;
        let me = &*self.me;
        let client = &self.conn.client;
        let held: Vec<&str> = self.leases.keys().map(String::as_str).collect();
        let first = self.lane.is_first();
        let renewed = self.conn.block_on(async {
            if !held.is_empty() {
                lease::renew(client.raw(), me, &held, self.ttl).await?;
            }
            if first {
                client.exec(SERVER_BEAT, &[&me]).await?;
            }
            client.rows(LAPSING, &[&heartbeat.as_secs_f64()]).await
        });
        let lapsing = match renewed {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(%error, "cannot renew this server's leases");
                return;
            }
        };
        let mut batch = Batch::default();
        let mut soonest: Option<f64> = None;
        for row in lapsing {
            let (Ok(thread_id), Ok(secs_left)) =
                (row.try_get::<_, String>(0), row.try_get::<_, f64>(1))
            else {
                continue;
            };
            if !self.lane.owns(&thread_id) {
                continue;
            }
            if secs_left > 0.0 {
                soonest = Some(soonest.map_or(secs_left, |s| s.min(secs_left)));
                continue;
            }
            // Held here once: this server's own lease ran out.
            self.forget(&thread_id);
            match self.hold(&thread_id, &mut batch) {
                Ok(()) | Err(StoreError::HeldElsewhere { .. }) => {}
                Err(error) => tracing::warn!(thread_id, %error, "cannot take a thread over"),
            }
        }
        self.finish(&mut batch);
        self.next_beat = self
            .next_beat
            .min(Instant::now() + next_look(heartbeat, soonest));
    }
}

/// How often leases of `ttl` are renewed ([`Writer::heartbeat`]).
pub(super) fn heartbeat(ttl: Duration) -> Duration {
    ttl / 5
}

/// How long until the next beat: a heartbeat, or just after the soonest
/// lease of a thread to take over ends (`secs_left` of it) if sooner.
fn next_look(heartbeat: Duration, soonest: Option<f64>) -> Duration {
    soonest
        .and_then(|secs_left| Duration::try_from_secs_f64(secs_left).ok())
        .map_or(heartbeat, |left| heartbeat.min(left + AFTER_LAPSE))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{AFTER_LAPSE, next_look};

    #[test]
    fn the_next_beat_comes_as_a_lapsing_lease_ends_if_before_the_heartbeat() {
        let beat = Duration::from_secs(1);
        assert_eq!(next_look(beat, None), beat);
        assert_eq!(
            next_look(beat, Some(0.25)),
            Duration::from_millis(250) + AFTER_LAPSE
        );
        assert_eq!(next_look(beat, Some(0.999)), beat);
        assert_eq!(next_look(beat, Some(3.0)), beat);
        // What no clock should say is no reason to beat sooner.
        assert_eq!(next_look(beat, Some(f64::NAN)), beat);
        assert_eq!(next_look(beat, Some(-1.0)), beat);
    }
}
