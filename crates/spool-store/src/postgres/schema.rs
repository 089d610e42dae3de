//! The PostgreSQL schema and its migrations.
//!
//! The log tables mean what they mean in SQLite (`docs/internals/log.md`),
//! with the same keys; JSON is stored as `text`, byte for byte as encoded
//! (`jsonb` would reorder keys and drop duplicates, and the codec is
//! shared with SQLite). What only several servers need — leases, forwarded
//! commands, who is alive — is in `docs/internals/replicas.md`. The seq
//! reservation of a thread lives in its lease row (`upto`), and a running
//! command's process group is recorded with the server that started it.
//!
//! Ids are compared byte by byte (`COLLATE "C"`), as SQLite and Rust
//! compare them: page order, the ordering ties of `thread/list` and the
//! writer's fresh-id bound must not depend on the database's locale.
//!
//! Versions are rows of `schema_version`. Migrations run in one
//! transaction under a transaction-scoped advisory lock, so that servers
//! starting at once migrate once and the others wait, then see the result.

use tokio_postgres::{Client, GenericClient};

use super::PgError;
use crate::error::StoreError;

/// The newest schema this build knows.
pub const PG_SCHEMA_VERSION: i64 = 5;

/// The advisory lock key migrations hold (any constant the database's
/// other users do not use; these are the bytes of "spoolmig").
const MIGRATION_LOCK: i64 = 0x73_70_6f_6f_6c_6d_69_67;

struct Migration {
    version: i64,
    sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: V1,
    },
    Migration {
        version: 2,
        sql: V2,
    },
    Migration {
        version: 3,
        sql: V3,
    },
    Migration {
        version: 4,
        sql: V4,
    },
    Migration {
        version: 5,
        sql: V5,
    },
];

/// Version 1: the log and its projections as in SQLite's latest schema,
/// plus the tables of several servers.
const V1: &str = r#"
CREATE TABLE threads (
    id             text COLLATE "C" PRIMARY KEY,
    name           text,
    preview        text NOT NULL,
    model_provider text NOT NULL,
    model          text,
    cwd            text NOT NULL,
    cli_version    text NOT NULL,
    history_mode   text NOT NULL,
    dev_mode       boolean NOT NULL,
    forked_from_id text COLLATE "C",
    archived       boolean NOT NULL DEFAULT false,
    ephemeral      boolean NOT NULL DEFAULT false,
    created_at_ms  bigint NOT NULL,
    updated_at_ms  bigint NOT NULL
);
CREATE INDEX threads_by_created ON threads (archived, created_at_ms DESC, id DESC);
CREATE INDEX threads_by_updated ON threads (archived, updated_at_ms DESC, id DESC);

CREATE TABLE events (
    thread_id text COLLATE "C" NOT NULL REFERENCES threads (id),
    seq       bigint NOT NULL,
    method    text NOT NULL,
    item_id   text COLLATE "C",
    at_ms     bigint NOT NULL,
    payload   text NOT NULL,
    PRIMARY KEY (thread_id, seq)
);

CREATE TABLE turns (
    thread_id    text COLLATE "C" NOT NULL REFERENCES threads (id),
    turn_id      text COLLATE "C" NOT NULL,
    ordinal      bigint NOT NULL,
    seq          bigint NOT NULL,
    status       text NOT NULL,
    error        text,
    started_at   bigint,
    completed_at bigint,
    duration_ms  bigint,
    token_usage  text,
    view_rank    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, ordinal),
    UNIQUE (thread_id, turn_id)
);
CREATE INDEX turns_open ON turns (thread_id) WHERE status = 'inProgress';

CREATE TABLE items (
    thread_id   text COLLATE "C" NOT NULL,
    item_id     text COLLATE "C" NOT NULL,
    turn_id     text COLLATE "C" NOT NULL,
    ordinal     bigint NOT NULL,
    seq         bigint NOT NULL,
    kind        text NOT NULL,
    status      text NOT NULL,
    item        text NOT NULL,
    envelope    text NOT NULL,
    token_count bigint,
    input_item  text,
    llm         boolean NOT NULL DEFAULT false,
    PRIMARY KEY (thread_id, item_id),
    UNIQUE (thread_id, ordinal),
    FOREIGN KEY (thread_id, turn_id) REFERENCES turns (thread_id, turn_id)
);
CREATE INDEX items_open ON items (thread_id) WHERE status = 'inProgress';
CREATE INDEX items_compactions ON items (thread_id, ordinal) WHERE kind = 'contextCompaction';

CREATE TABLE pending_requests (
    request_id     text COLLATE "C" PRIMARY KEY,
    thread_id      text COLLATE "C" NOT NULL REFERENCES threads (id),
    turn_id        text COLLATE "C" NOT NULL,
    item_id        text COLLATE "C" NOT NULL,
    method         text NOT NULL,
    request        text NOT NULL,
    created_at_ms  bigint NOT NULL,
    answer         text,
    resolved_at_ms bigint
);
CREATE INDEX pending_requests_open ON pending_requests (thread_id, created_at_ms)
    WHERE resolved_at_ms IS NULL;

CREATE TABLE run_states (
    thread_id     text COLLATE "C" NOT NULL REFERENCES threads (id),
    turn_id       text COLLATE "C" NOT NULL,
    state         text NOT NULL,
    updated_at_ms bigint NOT NULL,
    PRIMARY KEY (thread_id, turn_id)
);

CREATE TABLE history_cursors (
    thread_id       text COLLATE "C" PRIMARY KEY,
    cursor          text NOT NULL,
    conversation_id text
);

CREATE TABLE deleted_threads (
    id            text COLLATE "C" PRIMARY KEY,
    deleted_at_ms bigint NOT NULL
);

CREATE TABLE servers (
    id           text COLLATE "C" PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE thread_leases (
    thread_id  text COLLATE "C" PRIMARY KEY,
    holder     text NOT NULL,
    generation bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    upto       bigint NOT NULL DEFAULT 0
);
CREATE INDEX thread_leases_by_holder ON thread_leases (holder);

CREATE TABLE commands (
    id          text COLLATE "C" PRIMARY KEY,
    thread_id   text COLLATE "C" NOT NULL,
    method      text NOT NULL,
    params      text NOT NULL,
    from_server text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    claimed_by  text,
    done_at     timestamptz,
    reply       text,
    error       text
);
CREATE INDEX commands_waiting ON commands (thread_id, created_at) WHERE done_at IS NULL;

CREATE TABLE running_processes (
    server_id   text NOT NULL,
    thread_id   text COLLATE "C" NOT NULL,
    item_id     text COLLATE "C" NOT NULL,
    pgid        bigint NOT NULL,
    start_ticks bigint NOT NULL,
    PRIMARY KEY (thread_id, item_id)
);
"#;

/// Version 2: when a forwarded command took effect (`commands.rs`): set in
/// the transaction of the first events it wrote, so a holder that dies
/// after it is never run again by the next.
const V2: &str = "ALTER TABLE commands ADD COLUMN applied_at timestamptz;";

/// Version 3: the log's tables lose their foreign keys (`events` and
/// `turns` to `threads`, `items` to `turns`). Every row of them is written
/// by the thread's one fenced writer, which checks each event against the
/// thread's state before it writes it, and a thread is deleted child
/// tables first; the keys only repeated that check, at a row lookup and a
/// trigger per row: a quarter of what an append of a session item cost
/// PostgreSQL (`replicas.md`, "What a commit costs"). And the fence moves
/// from lease row locks to advisory locks (`lease.rs`): from here on every
/// server of a database must fence the same way: an older build refuses
/// the database at start, and servers of an older build that are running
/// must be stopped before the first server of this one starts.
const V3: &str = r#"
DO $$
DECLARE fk record;
BEGIN
    FOR fk IN SELECT conrelid::regclass AS tab, conname FROM pg_constraint
              WHERE contype = 'f'
                AND conrelid IN ('events'::regclass, 'turns'::regclass, 'items'::regclass)
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.tab, fk.conname);
    END LOOP;
END $$;
"#;

/// Version 4: an item that is its raw input item as the Session API files
/// it has an empty `items.item`, and readers file `items.input_item` again
/// (`codec/encode.rs`, `DERIVED_ITEM`). No table changes; rows written
/// before stay as they are. The version moves so that an older build,
/// which would take such a row for a corrupt one, refuses the database.
const V4: &str = "SELECT 1;";

/// Version 5: the envelope of an item filed from its raw input item and
/// added whole may be stored as its time alone (`codec/encode.rs`,
/// `derived_envelope`). No table changes; rows written before stay as
/// they are. The version moves so that an older build, which would take
/// such a row for a corrupt one, refuses the database.
const V5: &str = "SELECT 1;";

/// The database's schema version; 0 when it has none.
pub(super) async fn schema_version(client: &impl GenericClient) -> Result<i64, PgError> {
    let table = client
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .await?;
    if !table.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM schema_version", &[])
        .await?;
    Ok(row.get(0))
}

/// Brings the schema up to [`PG_SCHEMA_VERSION`]; refuses a database
/// migrated by a newer build.
pub(super) async fn migrate(client: &mut Client, database: &str) -> Result<(), StoreError> {
    let failed = |version| {
        move |source: PgError| StoreError::PgMigration {
            database: database.to_owned(),
            version,
            source,
        }
    };
    let tx = client.transaction().await.map_err(failed(0))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(failed(0))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version (
             version    bigint PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(failed(0))?;
    // Read under the lock: another server may have migrated meanwhile.
    let found = schema_version(&tx).await.map_err(failed(0))?;
    if found > PG_SCHEMA_VERSION {
        return Err(StoreError::PgSchemaTooNew {
            database: database.to_owned(),
            found,
            supported: PG_SCHEMA_VERSION,
        });
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > found) {
        tx.batch_execute(migration.sql)
            .await
            .map_err(failed(migration.version))?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&migration.version],
        )
        .await
        .map_err(failed(migration.version))?;
        tracing::debug!(version = migration.version, database, "migrated store");
    }
    tx.commit().await.map_err(failed(PG_SCHEMA_VERSION))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::PgDatabase;
    use spool_testkit::postgres::TestDatabase;

    #[tokio::test]
    async fn a_migration_waits_for_the_one_in_progress() {
        let db = TestDatabase::create();
        let (mut client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        // Another server's migration, in progress: it holds the lock.
        let other = client.transaction().await.unwrap();
        other
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .unwrap();
        let url = db.url().to_owned();
        let connecting = tokio::spawn(async move { PgDatabase::connect(&url).await });
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert!(
            !connecting.is_finished(),
            "a migration went ahead while another held the lock"
        );
        assert_eq!(
            db.query("SELECT to_regclass('threads') IS NULL").unwrap(),
            "t"
        );
        other.commit().await.unwrap();
        connecting.await.unwrap().unwrap();
        assert_eq!(
            db.query("SELECT to_regclass('threads') IS NULL").unwrap(),
            "f"
        );
    }

    #[tokio::test]
    async fn a_version_2_database_keeps_its_rows_and_loses_the_log_foreign_keys() {
        let db = TestDatabase::create();
        db.query(&format!(
            "BEGIN; {V1} {V2} CREATE TABLE schema_version (version bigint PRIMARY KEY, \
             applied_at timestamptz NOT NULL DEFAULT now()); \
             INSERT INTO schema_version (version) VALUES (1), (2); COMMIT;"
        ))
        .unwrap();
        let foreign_keys = "SELECT count(*) FROM pg_constraint WHERE contype = 'f' \
             AND conrelid IN ('events'::regclass, 'turns'::regclass, 'items'::regclass)";
        assert_eq!(db.query(foreign_keys).unwrap(), "3");
        db.query(
            "INSERT INTO threads VALUES ('t1', NULL, '', 'p', NULL, '/', '0', 'spool', false, \
             NULL, false, false, 1, 1); \
             INSERT INTO events VALUES ('t1', 1, 'thread/started', NULL, 1, '{}');",
        )
        .unwrap();
        PgDatabase::connect(db.url()).await.unwrap();
        assert_eq!(db.query(foreign_keys).unwrap(), "0");
        assert_eq!(
            db.query(
                "SELECT max(version) || ' ' || (SELECT count(*) FROM events) FROM schema_version"
            )
            .unwrap(),
            format!("{PG_SCHEMA_VERSION} 1")
        );
        // Other tables keep theirs.
        assert_eq!(
            db.query(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f' \
                 AND conrelid = 'run_states'::regclass"
            )
            .unwrap(),
            "1"
        );
    }

    #[test]
    fn migrations_are_numbered_in_order_up_to_the_current_version() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1);
        }
        assert_eq!(
            MIGRATIONS.last().map(|m| m.version),
            Some(PG_SCHEMA_VERSION)
        );
    }
}
