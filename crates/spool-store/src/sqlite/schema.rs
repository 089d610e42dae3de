//! The SQLite schema, its versioned migrations, and connection setup.
//!
//! `PRAGMA user_version` holds the number of migrations applied. Each
//! migration runs in its own `BEGIN IMMEDIATE` transaction together with
//! the version bump, so a crash mid-migration leaves the previous version.
//! A file whose version is newer than [`SCHEMA_VERSION`] is refused: this
//! build would misread what a newer one wrote.

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::StoreError;
use crate::options::StoreOptions;

/// One step of the schema. Append new ones; never edit a shipped one.
struct Migration {
    version: i64,
    sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: V1_LOG_AND_PROJECTIONS,
    },
    Migration {
        version: 2,
        sql: V2_SESSION_AND_NEWEST_FIRST_READS,
    },
    Migration {
        version: 3,
        sql: V3_PENDING_REQUESTS_AND_RUN_STATES,
    },
    Migration {
        version: 4,
        sql: V4_FEWER_PAGES_PER_COMMIT,
    },
    Migration {
        version: 5,
        sql: V5_DELETED_THREADS,
    },
    Migration {
        version: 6,
        sql: V6_SEQ_RESERVATIONS,
    },
    Migration {
        version: 7,
        sql: V7_HISTORY_CURSORS,
    },
    Migration {
        version: 8,
        sql: V8_ITEMS_BORN_COMPLETE,
    },
    Migration {
        version: 9,
        sql: V9_BODY_ONCE,
    },
    Migration {
        version: 10,
        sql: V10_ITEM_FILED_FROM_ITS_RAW_ITEM,
    },
    Migration {
        version: 11,
        sql: V11_DERIVED_ENVELOPE,
    },
    Migration {
        version: 12,
        sql: super::keys::V12_ROWS_KEYED_BY_THREAD_AND_SEQ,
    },
    Migration {
        version: 13,
        sql: super::keys::V13_IDS_FIRST,
    },
    Migration {
        version: 14,
        sql: super::keys::V14_TURNS_AMONG_ITEMS,
    },
    Migration {
        version: 15,
        sql: V15_TURN_BODY_ONCE,
    },
];

/// Version 15: a turn's start and completion are stored once, in the
/// turn's row.
///
/// A `turn/started` that says only what the turn's row in `items` holds
/// (its id and start time) is written with `method =
/// 'turn/projected-start'` and an empty payload, and the turn's row is the
/// one at the same `pos`; a `turn/completed` that says only what the
/// finished turn's row holds is written with `method =
/// 'turn/projected-end'` and the turn's ordinal as its payload. Readers
/// build both from the row (`born.rs`, `codec/log_row.rs`); a turn's row
/// changes no more once the turn is completed, and goes only with the
/// thread's log. No table changes, and rows written before stay as they
/// are. The version moves so that an older build, which cannot read such
/// a row, refuses the file instead.
const V15_TURN_BODY_ONCE: &str = "SELECT 1;";

/// Version 11: the envelope of an item filed from its raw input item and
/// added whole (every Session API item, as `add_items` stamps it) is
/// stored as its time alone: `items.envelope` holds the decimal time, and
/// readers build the envelope again (`codec/encode.rs`,
/// `derived_envelope`). No table changes, and rows written before stay as
/// they are. The version moves so that an older build, which would take
/// such a row for a corrupt one, refuses the file instead.
const V11_DERIVED_ENVELOPE: &str = "SELECT 1;";

/// Version 10: an item that is its raw input item as the Session API files
/// it is not stored twice in its row: `items.item` is empty and readers
/// file `items.input_item` again (`codec/encode.rs`, `DERIVED_ITEM`). No
/// table changes, and rows written before stay as they are. The version
/// moves so that an older build, which would take such a row for a
/// corrupt one, refuses the file instead.
const V10_ITEM_FILED_FROM_ITS_RAW_ITEM: &str = "SELECT 1;";

/// Version 9: the body of an item born complete is stored once.
///
/// When an `item/recorded` row's completion is exactly what the item's row
/// in `items` holds, the log row is written with `method =
/// 'item/projected'` and an empty payload, and readers complete it from the
/// item row (`sqlite/projected.rs`); before a removal deletes such an item
/// row, the writer gives the log row its payload back, as `item/recorded`.
/// No table changes, and rows written before stay as they are. The version
/// moves so that an older build, which cannot read such a row, refuses the
/// file instead.
const V9_BODY_ONCE: &str = "SELECT 1;";

/// Version 8: an item born complete is one row of `events`.
///
/// An `item/started` followed at once by its `item/completed`, the start
/// saying nothing the completion does not, is stored as one row under the
/// completion's seq with `method = 'item/recorded'`; readers give it back
/// as both events (`born.rs`). No table changes, and rows written before
/// stay as they are (the log is never rewritten; both layouts are read).
/// The version moves so that an older build, which would read such a row
/// as a lone completion, refuses the file instead.
const V8_ITEMS_BORN_COMPLETE: &str = "SELECT 1;";

/// Version 7: what a provider holds of a server-managed history.
///
/// One row per thread whose history a provider keeps (`previousResponseId`
/// and `conversationId` modes): `cursor` is spool-core's `HistoryCursor`
/// as JSON (the response to continue from, the ordinal through which the
/// provider holds the view, and the exceptions), `conversation_id` the
/// OpenAI conversation once there is one. Written after the records it
/// covers are committed, so a crash can leave it behind them (the next
/// request then carries some items again, chained to an older response)
/// but never ahead.
const V7_HISTORY_CURSORS: &str = "
CREATE TABLE history_cursors (
    thread_id       TEXT PRIMARY KEY,
    cursor          TEXT NOT NULL,
    conversation_id TEXT
) STRICT, WITHOUT ROWID;
";

/// Version 6: seqs handed out before their commit, and running commands.
///
/// A delta is sent to clients as soon as it has a seq, before the commit
/// that stores it. A row here says "seqs up to `upto` may have been sent":
/// the writer never gives a delta a seq above the `upto` it has committed,
/// so after a crash every seq a client could have seen is at most `upto`,
/// and the log continues after it (with `thread/eventsLost` naming what
/// was voided). A row exists only while the thread can stream deltas.
///
/// `running_processes`: the process group of each command running for an
/// item, with its leader's start time, so that recovery kills what a crash
/// left running (`processes.rs`).
const V6_SEQ_RESERVATIONS: &str = "
CREATE TABLE seq_reservations (
    thread_id TEXT PRIMARY KEY,
    upto      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE running_processes (
    thread_id   TEXT NOT NULL,
    item_id     TEXT NOT NULL,
    pgid        INTEGER NOT NULL,
    start_ticks INTEGER NOT NULL,
    PRIMARY KEY (thread_id, item_id)
) STRICT, WITHOUT ROWID;
";

/// Version 5: threads that go away.
///
/// - `deleted_threads`: what is left of a deleted thread (its id and when),
///   so a read of it says it was deleted rather than unknown. Everything
///   else of the thread is removed with it.
/// - `threads.ephemeral`: a thread a client asked not to keep (Codex's
///   `ephemeral`): never listed, and deleted once it is unloaded.
const V5_DELETED_THREADS: &str = "
CREATE TABLE deleted_threads (
    id            TEXT PRIMARY KEY,
    deleted_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE threads ADD COLUMN ephemeral INTEGER NOT NULL DEFAULT 0;
";

/// The schema version this build writes (the number of migrations).
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Version 1: the log (`events`) and its projections (`threads`, `turns`,
/// `items`). Times are unix milliseconds unless a column says otherwise;
/// JSON columns hold the protocol types as serde writes them.
const V1_LOG_AND_PROJECTIONS: &str = "
CREATE TABLE threads (
    id             TEXT PRIMARY KEY NOT NULL,
    name           TEXT,
    preview        TEXT NOT NULL,
    model_provider TEXT NOT NULL,
    model          TEXT,
    cwd            TEXT NOT NULL,
    cli_version    TEXT NOT NULL,
    history_mode   TEXT NOT NULL,
    dev_mode       INTEGER NOT NULL,
    forked_from_id TEXT,
    archived       INTEGER NOT NULL DEFAULT 0,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    last_seq       INTEGER NOT NULL
) STRICT;
CREATE INDEX threads_by_created ON threads (archived, created_at_ms DESC, id DESC);
CREATE INDEX threads_by_updated ON threads (archived, updated_at_ms DESC, id DESC);

-- The log: every stored notification of a thread, gap-free per thread.
-- `payload` is the whole notification ({\"method\", \"params\"});
-- `item_id` names the item a start, delta or completion is about.
CREATE TABLE events (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq       INTEGER NOT NULL,
    method    TEXT NOT NULL,
    item_id   TEXT,
    at_ms     INTEGER NOT NULL,
    payload   TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
) STRICT;

-- Projection: one row per turn, updated in place.
CREATE TABLE turns (
    thread_id    TEXT NOT NULL REFERENCES threads (id),
    turn_id      TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    started_at   INTEGER,
    completed_at INTEGER,
    duration_ms  INTEGER,
    token_usage  TEXT,
    PRIMARY KEY (thread_id, turn_id)
) STRICT;
CREATE UNIQUE INDEX turns_by_ordinal ON turns (thread_id, ordinal);
CREATE INDEX turns_open ON turns (thread_id) WHERE status = 'inProgress';

-- Projection: one row per item, updated in place. `ordinal` is the seq of
-- the item's start, `seq` of its last change; `status` mirrors the
-- envelope's so open items are found without decoding JSON.
CREATE TABLE items (
    thread_id   TEXT NOT NULL,
    item_id     TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    ordinal     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    status      TEXT NOT NULL,
    item        TEXT NOT NULL,
    envelope    TEXT NOT NULL,
    token_count INTEGER,
    PRIMARY KEY (thread_id, item_id),
    FOREIGN KEY (thread_id, turn_id) REFERENCES turns (thread_id, turn_id)
) STRICT;
CREATE UNIQUE INDEX items_by_ordinal ON items (thread_id, ordinal);
CREATE INDEX items_open ON items (thread_id) WHERE status = 'inProgress';
";

/// Version 3: what a run paused on a person needs to survive a restart.
///
/// - `pending_requests`: every server → client request (an approval, a
///   client-run tool call) a run is waiting on, durable from the moment it
///   is asked until answered; `answer` and `resolved_at_ms` stay `NULL`
///   until then. `request` is the `ServerRequest` JSON as sent.
/// - `run_states`: the RunState JSON of a turn that can be resumed (paused
///   on a request, or resumed and running). Crash recovery leaves these
///   turns open; the runtime deletes the row when the turn ends.
const V3_PENDING_REQUESTS_AND_RUN_STATES: &str = "
CREATE TABLE pending_requests (
    request_id     TEXT PRIMARY KEY NOT NULL,
    thread_id      TEXT NOT NULL REFERENCES threads (id),
    turn_id        TEXT NOT NULL,
    item_id        TEXT NOT NULL,
    method         TEXT NOT NULL,
    request        TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    answer         TEXT,
    resolved_at_ms INTEGER
) STRICT;
CREATE INDEX pending_requests_open ON pending_requests (thread_id, created_at_ms)
    WHERE resolved_at_ms IS NULL;

CREATE TABLE run_states (
    thread_id     TEXT NOT NULL REFERENCES threads (id),
    turn_id       TEXT NOT NULL,
    state         TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (thread_id, turn_id)
) STRICT;
";

/// Version 2: what the Session API and newest-first reads of the model
/// view need.
///
/// - `items.input_item`: the raw Responses input item of an item added
///   through the Session API (its `envelope.providerData.inputItem`, moved
///   out of the envelope JSON so a session read decodes only that).
/// - `items.llm`: 1 if the item is in the model's view
///   (`spool_core::llm::in_view`), so model and session reads skip the
///   rest without decoding it. Filled here with the rule as of this
///   version (model audience and a kind that becomes model input).
/// - `turns.view_rank`: how many turns up to and including this one have
///   an item in the model's view, so a view that stops reading at its
///   budget counts the turns it left out with two lookups instead of a
///   scan of the whole thread.
/// - `items_compactions`: finds the latest compaction (where the model's
///   view starts) without scanning.
const V2_SESSION_AND_NEWEST_FIRST_READS: &str = "
ALTER TABLE items ADD COLUMN input_item TEXT;
ALTER TABLE items ADD COLUMN llm INTEGER NOT NULL DEFAULT 0;
UPDATE items SET llm = (json_extract(envelope, '$.audience.llm') IS 1 AND kind IN (
    'userMessage', 'agentMessage', 'reasoning', 'plan', 'commandExecution', 'fileChange',
    'mcpToolCall', 'dynamicToolCall', 'webSearch', 'contextCompaction', 'functionCall',
    'handoff', 'context'));
CREATE INDEX items_compactions ON items (thread_id, ordinal) WHERE kind = 'contextCompaction';

ALTER TABLE turns ADD COLUMN view_rank INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET view_rank = ranked.view_rank FROM (
    SELECT t.thread_id, t.turn_id,
           sum(coalesce(h.has_llm, 0)) OVER (PARTITION BY t.thread_id ORDER BY t.ordinal)
               AS view_rank
    FROM turns t LEFT JOIN (
        SELECT thread_id, turn_id, max(llm) AS has_llm FROM items GROUP BY thread_id, turn_id
    ) h ON h.thread_id = t.thread_id AND h.turn_id = t.turn_id
) AS ranked
WHERE turns.thread_id = ranked.thread_id AND turns.turn_id = ranked.turn_id;
";

/// Version 4: fewer b-trees written per commit (every b-tree an insert
/// touches is at least one more page in the WAL and one more write).
///
/// - `threads.last_seq` is gone: it is `max(seq)` of the thread's events
///   (one probe of their primary key), so a commit no longer rewrites the
///   thread row for it. `updated_at_ms` is written lazily (see
///   `writer/batch.rs`), and name, preview and archived only when they
///   change, so most commits leave the thread row and its two indexes
///   alone.
/// - `turns` is `WITHOUT ROWID`, keyed `(thread_id, ordinal)` (how turns
///   are read), with a unique index on `(thread_id, turn_id)`: two b-trees
///   instead of three. Turn rows are small.
/// - `items` keeps its shape (rows of a kilobyte and more are stored best
///   in a rowid table); it is copied only because its foreign key names
///   `turns`.
/// - `events` keeps its shape: as `WITHOUT ROWID` it dirtied more pages,
///   not fewer (appending to an index b-tree splits pages in half and
///   rebalances neighbours, where a rowid table starts a fresh page).
///
/// Tables are copied, not altered: `turns` is renamed first, which points
/// the foreign key of `items` at the old copy, so both are rebuilt and the
/// old ones dropped child first.
const V4_FEWER_PAGES_PER_COMMIT: &str = "
ALTER TABLE items RENAME TO items_v2;
ALTER TABLE turns RENAME TO turns_v2;
DROP INDEX items_by_ordinal;
DROP INDEX items_open;
DROP INDEX items_compactions;
DROP INDEX turns_by_ordinal;
DROP INDEX turns_open;

CREATE TABLE turns (
    thread_id    TEXT NOT NULL REFERENCES threads (id),
    turn_id      TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    started_at   INTEGER,
    completed_at INTEGER,
    duration_ms  INTEGER,
    token_usage  TEXT,
    view_rank    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, ordinal)
) STRICT, WITHOUT ROWID;
INSERT INTO turns (thread_id, turn_id, ordinal, seq, status, error, started_at, completed_at,
                   duration_ms, token_usage, view_rank)
    SELECT thread_id, turn_id, ordinal, seq, status, error, started_at, completed_at,
           duration_ms, token_usage, view_rank FROM turns_v2 ORDER BY thread_id, ordinal;
CREATE UNIQUE INDEX turns_by_id ON turns (thread_id, turn_id);
CREATE INDEX turns_open ON turns (thread_id) WHERE status = 'inProgress';

CREATE TABLE items (
    thread_id   TEXT NOT NULL,
    item_id     TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    ordinal     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    status      TEXT NOT NULL,
    item        TEXT NOT NULL,
    envelope    TEXT NOT NULL,
    token_count INTEGER,
    input_item  TEXT,
    llm         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, item_id),
    FOREIGN KEY (thread_id, turn_id) REFERENCES turns (thread_id, turn_id)
) STRICT;
INSERT INTO items (thread_id, item_id, turn_id, ordinal, seq, kind, status, item, envelope,
                   token_count, input_item, llm)
    SELECT thread_id, item_id, turn_id, ordinal, seq, kind, status, item, envelope,
           token_count, input_item, llm FROM items_v2 ORDER BY thread_id, ordinal;
CREATE UNIQUE INDEX items_by_ordinal ON items (thread_id, ordinal);
CREATE INDEX items_open ON items (thread_id) WHERE status = 'inProgress';
CREATE INDEX items_compactions ON items (thread_id, ordinal) WHERE kind = 'contextCompaction';

DROP TABLE items_v2;
DROP TABLE turns_v2;

ALTER TABLE threads DROP COLUMN last_seq;
";

/// Whether the writer's connection has SQLite check the declared foreign
/// keys, row by row: in debug builds (every test), not in release builds.
///
/// Like a `debug_assert!`: the writer never depends on the check. It writes
/// a thread's row before its events, a turn's row before its items (the
/// reducer refuses an item of a turn it does not hold), and deletes a
/// thread child tables first (`writer/thread_ops.rs`). The check is a seek
/// into the parent's key per row written: in a release build, 6.4k
/// instructions an item of 100-item `add_items` calls, a tenth of what the
/// item costs the writer and its caller (callgrind over `spool bench store
/// --workloads b --runs 1`: 971M before, 907M after). PostgreSQL's
/// log tables declare no foreign keys at all, for the same reason
/// (`docs/internals/replicas.md`).
pub const CHECKS_FOREIGN_KEYS: bool = cfg!(debug_assertions);

/// Opens the writer's connection, sets it up and brings the schema up to
/// date.
pub(crate) fn open_writer(path: &Path, options: &StoreOptions) -> Result<Connection, StoreError> {
    let open_error = |source| StoreError::Open {
        path: path.to_owned(),
        source,
    };
    // Through the VFS that writes a commit's WAL frames in one system call
    // (`vfs/mod.rs`); the flags are `Connection::open`'s.
    let flags = OpenFlags::default();
    let mut conn = match super::vfs::name() {
        Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs),
        None => Connection::open_with_flags(path, flags),
    }
    .map_err(open_error)?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(open_error)?;
    // WAL lets readers run beside the writer; it is a property of the file,
    // so it needs setting once, but asking again is cheap and idempotent.
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(open_error)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(%mode, path = %path.display(), "SQLite refused WAL mode");
    }
    conn.pragma_update(None, "synchronous", options.durability.pragma_value())
        .map_err(open_error)?;
    conn.pragma_update(None, "foreign_keys", CHECKS_FOREIGN_KEYS)
        .map_err(open_error)?;
    // The writer's statements are few and hot; keep them all prepared.
    conn.set_prepared_statement_cache_capacity(64);
    keep_plans(&conn).map_err(open_error)?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// How much of the file a reader maps into memory (see `open_reader`).
pub const READER_MMAP_BYTES: i64 = 1 << 30;

/// Opens a reader connection on an existing, migrated store.
pub(crate) fn open_reader(path: &Path, options: &StoreOptions) -> Result<Connection, StoreError> {
    let open_error = |source| StoreError::Open {
        path: path.to_owned(),
        source,
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(open_error)?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(open_error)?;
    // Read-write flags (a WAL reader may need to create the shared-memory
    // file), but nothing but the writer may write.
    conn.pragma_update(None, "query_only", true)
        .map_err(open_error)?;
    // Reads of a whole session or of a long thread's newest pages touch
    // megabytes of item rows: through a memory map they are plain memory
    // reads of the OS page cache instead of one `pread` per page, which
    // halves the cost of reading 10,000 items. Address space, not memory;
    // SQLite falls back to reads where mapping is unavailable.
    conn.pragma_update(None, "mmap_size", READER_MMAP_BYTES)
        .map_err(open_error)?;
    conn.set_prepared_statement_cache_capacity(32);
    keep_plans(&conn).map_err(open_error)?;
    Ok(conn)
}

/// Makes prepared statements keep their plans whatever values are bound.
///
/// This SQLite is built with STAT4, under which a statement whose plan
/// might depend on a bound value (here: every statement binding a thread
/// id, because the `items` table has partial indexes) is marked expired at
/// each new binding and re-prepared, parsing its SQL again, at its next
/// step: a third of the cost of reading a session's newest 50 items. Plans
/// here never depend on values (nothing runs ANALYZE), so the query
/// planner stability guarantee costs nothing.
fn keep_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// The `user_version` of an open connection.
pub(crate) fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let too_new = |found| StoreError::SchemaTooNew {
        path: path.to_owned(),
        found,
        supported: SCHEMA_VERSION,
    };
    let found = schema_version(conn)?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > found) {
        let failed = |source| StoreError::Migration {
            path: path.to_owned(),
            version: migration.version,
            source,
        };
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed)?;
        // Read again under the write lock: another process may have
        // migrated the file since we looked.
        let current = schema_version(&tx).map_err(failed)?;
        if current > SCHEMA_VERSION {
            return Err(too_new(current));
        }
        if current >= migration.version {
            continue;
        }
        tx.execute_batch(migration.sql).map_err(failed)?;
        tx.pragma_update(None, "user_version", migration.version)
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
        tracing::debug!(version = migration.version, path = %path.display(), "migrated store");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_from_one() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1);
        }
    }
}
