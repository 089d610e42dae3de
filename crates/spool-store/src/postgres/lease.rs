//! Thread leases: which server may append to a thread, and the fence every
//! append checks (`docs/internals/replicas.md`, "Leases").
//!
//! Expiry is always judged by the database's clock (`now()`), never by a
//! server's: two servers whose clocks disagree still agree on who holds a
//! thread. A released lease keeps its row, so that its generation only
//! ever grows and its seq reservation (`upto`) survives for the next
//! holder.

use std::time::Duration;

use tokio_postgres::GenericClient;

use super::PgError;

/// A thread held by a server: what its appends present to the fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) thread_id: String,
    pub(crate) holder: String,
    /// Raised by every grant to a new holder (or after an expiry): an
    /// older generation is a holder that lost the thread.
    pub(crate) generation: i64,
    /// The thread's seq reservation (`log.md`, "Cursors across crashes").
    pub(crate) upto: i64,
}

fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// The class of the advisory locks that fence appends: the first of the
/// two keys of `pg_advisory_xact_lock(int, int)`, whose second is the
/// thread id's `hashtext` (two threads may share a lock: one then waits
/// for the other's grant, nothing worse). Any constant the database's
/// other users do not use: these are the bytes of "sfen" (0x7366656e).
macro_rules! fence_class {
    () => {
        "1936090478"
    };
}

/// Takes the fence of `$1` (a thread id) exclusively, until the
/// transaction ends: it waits for every append in flight on the thread.
const LOCK_EXCLUSIVE: &str = concat!(
    "SELECT pg_advisory_xact_lock(",
    fence_class!(),
    ", hashtext($1))"
);

/// Grants the thread to `me` for `ttl` if nobody else holds it: it was
/// never leased, its lease expired or was released, or `me` holds it
/// already (then the grant renews it at the same generation). `None` when
/// another server holds it.
///
/// The grant takes the thread's fence exclusively first, in its own
/// transaction: an append of the holder it replaces that is in flight
/// (fenced, not yet committed) commits before the grant judges the
/// expiry, and every later append of that holder sees the new generation.
pub(crate) async fn acquire(
    client: &impl GenericClient,
    thread_id: &str,
    me: &str,
    ttl: Duration,
) -> Result<Option<Lease>, PgError> {
    client.batch_execute("BEGIN").await?;
    let granted = grant(client, thread_id, me, ttl).await;
    let ended = match granted {
        Ok(_) => client.batch_execute("COMMIT").await,
        Err(_) => client.batch_execute("ROLLBACK").await,
    };
    let row = granted?;
    ended?;
    Ok(row.map(|row| Lease {
        thread_id: thread_id.to_owned(),
        holder: me.to_owned(),
        generation: row.get(0),
        upto: row.get(1),
    }))
}

/// [`acquire`]'s statements, in its transaction.
async fn grant(
    client: &impl GenericClient,
    thread_id: &str,
    me: &str,
    ttl: Duration,
) -> Result<Option<tokio_postgres::Row>, PgError> {
    client.execute(LOCK_EXCLUSIVE, &[&thread_id]).await?;
    client
        .query_opt(
            "INSERT INTO thread_leases (thread_id, holder, generation, expires_at)
             VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond')
             ON CONFLICT (thread_id) DO UPDATE SET
                 holder = excluded.holder,
                 generation = CASE
                     WHEN thread_leases.holder = excluded.holder
                          AND thread_leases.expires_at > now()
                     THEN thread_leases.generation
                     ELSE thread_leases.generation + 1
                 END,
                 expires_at = excluded.expires_at
             WHERE thread_leases.holder = excluded.holder
                OR thread_leases.expires_at <= now()
             RETURNING generation, upto",
            &[&thread_id, &me, &millis(ttl)],
        )
        .await
}

/// Extends by `ttl` the unexpired leases of `threads` that `me` holds; how
/// many. An expired lease is not renewed: another server may have taken it
/// since, and its holder must acquire it again (and so learn its new
/// generation). Only the threads named are locked: a store's writers
/// renew their own, never each other's (`lane.rs`).
pub(crate) async fn renew(
    client: &impl GenericClient,
    me: &str,
    threads: &[&str],
    ttl: Duration,
) -> Result<u64, PgError> {
    client
        .execute(
            "UPDATE thread_leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
             WHERE holder = $1 AND thread_id = ANY($3::text[]) AND expires_at > now()",
            &[&me, &millis(ttl), &threads],
        )
        .await
}

/// The first half of an append's fence: shared locks on the fences of
/// `$1` (the commit's threads), held until the transaction ends. Appends
/// share them; a grant ([`acquire`]) takes one exclusively, so it waits for
/// the appends in flight, and they for it. They live in the lock manager's
/// memory: unlike a lock on the lease row, they write nothing to the WAL.
/// Its own statement, so that the second half, [`FENCE_ALL`] or
/// [`FENCE_ALL_OR_ABORT`], reads the leases in a snapshot taken after
/// the locks were granted (a statement sees what committed before it
/// began): a grant that went first is seen.
pub(crate) const FENCE_LOCK: &str = concat!(
    "SELECT count(pg_advisory_xact_lock_shared(",
    fence_class!(),
    ", k)) FROM (SELECT DISTINCT hashtext(t) AS k FROM unnest($1::text[]) AS t ORDER BY 1) AS keys"
);

/// The lease check, as a statement's `WITH`: `held` holds the threads of
/// `$1` that `$3` holds at the generations `$2`, unexpired; those with
/// less than three fifths of `$4` (the ttl, in milliseconds) left, which
/// the heartbeat (every fifth of it) would have renewed had it not been
/// late, are renewed for `$4`: a thread being written never depends on
/// the heartbeat, and yet a commit on time writes nothing to the lease
/// rows.
macro_rules! fence_held {
    () => {
        "WITH held AS ( \
           SELECT l.thread_id, l.expires_at FROM thread_leases l \
           JOIN unnest($1::text[], $2::bigint[]) AS m(thread_id, generation) \
             ON l.thread_id = m.thread_id AND l.generation = m.generation \
           WHERE l.holder = $3 AND l.expires_at > now()), \
         renewed AS ( \
           UPDATE thread_leases SET expires_at = now() + $4::bigint * interval '1 millisecond' \
           FROM held WHERE thread_leases.thread_id = held.thread_id \
             AND held.expires_at < now() + $4::bigint * interval '0.6 millisecond')"
    };
}
/// The fence of an append, after [`FENCE_LOCK`] in the same transaction:
/// of `threads` (`$1`, held by `me`, `$3`, at `generations`, `$2`), those
/// whose lease still holds, unexpired, at its generation.
pub(crate) const FENCE_ALL: &str = concat!(fence_held!(), " SELECT thread_id FROM held");

/// [`FENCE_ALL`] for a pipeline (`pipeline.rs`), whose later statements
/// cannot wait for its answer: unless every thread passes, it fails with
/// `division_by_zero` (SQL has no assertion; see [`fence_failed`]), which
/// aborts the transaction, so nothing after it is stored.
pub(crate) const FENCE_ALL_OR_ABORT: &str = concat!(
    fence_held!(),
    " SELECT 1 / (CASE WHEN (SELECT count(*) FROM held) = cardinality($1::text[]) \
     THEN 1 ELSE 0 END)"
);

/// Whether `error` is [`FENCE_ALL_OR_ABORT`]'s failure.
pub(crate) fn fence_failed(error: &PgError) -> bool {
    error.code() == Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO)
}

/// The ttl as the fence's fourth parameter.
pub(crate) fn ttl_millis(ttl: Duration) -> i64 {
    millis(ttl)
}

/// Gives the thread up (nothing of it is in flight): any server may take
/// it at once. No-op when the lease was lost meanwhile.
pub(crate) async fn release(client: &impl GenericClient, lease: &Lease) -> Result<(), PgError> {
    client
        .execute(
            "UPDATE thread_leases SET expires_at = '-infinity'
             WHERE thread_id = $1 AND holder = $2 AND generation = $3",
            &[&lease.thread_id, &lease.holder, &lease.generation],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::PgDatabase;
    use spool_testkit::postgres::TestDatabase;
    use tokio_postgres::{Client, NoTls};

    const TTL: Duration = Duration::from_secs(30);

    /// [`FENCE_ALL`]: the threads that pass.
    async fn fence_all(
        client: &impl GenericClient,
        me: &str,
        threads: &[String],
        generations: &[i64],
        ttl: Duration,
    ) -> Result<Vec<String>, PgError> {
        client.query(FENCE_LOCK, &[&threads]).await?;
        let rows = client
            .query(FENCE_ALL, &[&threads, &generations, &me, &millis(ttl)])
            .await?;
        rows.iter().map(|row| row.try_get(0)).collect()
    }

    /// Whether `lease` passes the fence.
    async fn fence(client: &impl GenericClient, lease: &Lease) -> Result<bool, PgError> {
        let threads = [lease.thread_id.clone()];
        let held = fence_all(client, &lease.holder, &threads, &[lease.generation], TTL).await?;
        Ok(held == threads)
    }

    /// A migrated database and a connection to it.
    async fn connected() -> (TestDatabase, Client) {
        let db = TestDatabase::create();
        PgDatabase::connect(db.url()).await.unwrap();
        let client = connect(&db).await;
        (db, client)
    }

    async fn connect(db: &TestDatabase) -> Client {
        let (client, connection) = tokio_postgres::connect(db.url(), NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    }

    fn expire(db: &TestDatabase, thread_id: &str) {
        db.query(&format!(
            "UPDATE thread_leases SET expires_at = now() - interval '1 second' \
             WHERE thread_id = '{thread_id}'"
        ))
        .unwrap();
    }

    #[tokio::test]
    async fn one_server_holds_a_thread_until_its_lease_expires() {
        let (db, client) = connected().await;
        let a = acquire(&client, "t1", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((a.generation, a.upto), (1, 0));
        assert_eq!(acquire(&client, "t1", "server-b", TTL).await.unwrap(), None);
        assert!(fence(&client, &a).await.unwrap());

        expire(&db, "t1");
        assert!(
            !fence(&client, &a).await.unwrap(),
            "an expired lease fences"
        );
        let b = acquire(&client, "t1", "server-b", TTL)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(b.generation, 2);
        assert!(fence(&client, &b).await.unwrap());
        assert!(
            !fence(&client, &a).await.unwrap(),
            "the old holder stays fenced"
        );
        assert_eq!(acquire(&client, "t1", "server-a", TTL).await.unwrap(), None);
    }

    #[tokio::test]
    async fn renewal_keeps_a_lease_for_its_holder_only() {
        let (db, client) = connected().await;
        let a = acquire(&client, "t1", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        acquire(&client, "t2", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        let both = ["t1", "t2"];
        assert_eq!(renew(&client, "server-a", &both, TTL).await.unwrap(), 2);
        assert_eq!(renew(&client, "server-a", &["t2"], TTL).await.unwrap(), 1);
        assert_eq!(renew(&client, "server-b", &both, TTL).await.unwrap(), 0);
        // Acquiring what one holds renews it at the same generation.
        let again = acquire(&client, "t1", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again, a);
        // An expired lease is not renewed; acquiring it again is a new
        // generation, even for the same server.
        expire(&db, "t2");
        assert_eq!(renew(&client, "server-a", &both, TTL).await.unwrap(), 1);
        let t2 = acquire(&client, "t2", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t2.generation, 2);
    }

    #[tokio::test]
    async fn a_released_thread_is_free_with_its_generation_and_reservation() {
        let (db, client) = connected().await;
        let a = acquire(&client, "t1", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        db.query("UPDATE thread_leases SET upto = 4096 WHERE thread_id = 't1'")
            .unwrap();
        release(&client, &a).await.unwrap();
        assert!(!fence(&client, &a).await.unwrap());
        let b = acquire(&client, "t1", "server-b", TTL)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((b.generation, b.upto), (2, 4096));
        // A release by a holder that lost the thread changes nothing.
        release(&client, &a).await.unwrap();
        assert!(fence(&client, &b).await.unwrap());
    }

    #[tokio::test]
    async fn a_takeover_waits_for_the_commit_in_flight_then_judges_expiry() {
        let (db, client) = connected().await;
        let mut holder = connect(&db).await;
        let a = acquire(&client, "t1", "server-a", Duration::from_millis(300))
            .await
            .unwrap()
            .unwrap();
        // Server A's append: fenced inside its transaction (the lease has
        // most of its life left, so the fence does not renew it), still
        // running when the lease runs out.
        let append = holder.transaction().await.unwrap();
        let short = Duration::from_millis(300);
        let threads = [a.thread_id.clone()];
        let held = fence_all(&append, &a.holder, &threads, &[a.generation], short)
            .await
            .unwrap();
        assert_eq!(held, threads);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let taker = connect(&db).await;
        let takeover =
            tokio::spawn(async move { acquire(&taker, "t1", "server-b", TTL).await.unwrap() });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !takeover.is_finished(),
            "the takeover went ahead during the old holder's commit"
        );
        append.commit().await.unwrap();
        let b = takeover.await.unwrap().unwrap();
        assert_eq!(b.generation, 2);
        assert!(!fence(&client, &a).await.unwrap());
    }

    #[tokio::test]
    async fn an_append_fenced_while_a_grant_is_in_flight_sees_the_grant() {
        let (db, client) = connected().await;
        let short = Duration::from_millis(300);
        let a = acquire(&client, "t1", "server-a", short)
            .await
            .unwrap()
            .unwrap();
        // Server A's append begins while its lease holds (`now()` is the
        // transaction's start), and is fenced only after the lease ran
        // out and server B's grant took the thread's fence.
        let holder = connect(&db).await;
        holder.batch_execute("BEGIN").await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut taker = connect(&db).await;
        let grant = taker.transaction().await.unwrap();
        let granted = super::grant(&grant, "t1", "server-b", TTL)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(granted.get::<_, i64>(0), 2);
        let fencing = tokio::spawn(async move {
            let threads = [a.thread_id.clone()];
            let held = fence_all(&holder, &a.holder, &threads, &[a.generation], short)
                .await
                .unwrap();
            holder.batch_execute("ROLLBACK").await.unwrap();
            held
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !fencing.is_finished(),
            "an append was fenced while a grant held the thread's fence"
        );
        // The fence judges A's lease by what the grant committed, not by
        // the row as it was when A's fence began to wait.
        grant.commit().await.unwrap();
        assert_eq!(fencing.await.unwrap(), Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_fence_renews_only_a_lease_its_heartbeat_let_run_low() {
        let (db, client) = connected().await;
        let a = acquire(&client, "t1", "server-a", TTL)
            .await
            .unwrap()
            .unwrap();
        let left = "SELECT round(extract(epoch FROM expires_at - now()))::text \
             FROM thread_leases WHERE thread_id = 't1'";
        db.query("UPDATE thread_leases SET expires_at = now() + interval '20 seconds'")
            .unwrap();
        assert!(fence(&client, &a).await.unwrap());
        assert_eq!(
            db.query(left).unwrap(),
            "20",
            "a fence renewed a fresh lease"
        );
        // Under three fifths of its 30 s left: the heartbeat is late.
        db.query("UPDATE thread_leases SET expires_at = now() + interval '17 seconds'")
            .unwrap();
        assert!(fence(&client, &a).await.unwrap());
        assert_eq!(db.query(left).unwrap(), "30");
    }
}
