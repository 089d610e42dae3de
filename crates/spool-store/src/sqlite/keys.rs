//! Where a thread's rows sit: `events` and `items` are keyed by one
//! integer, `pos`, that puts the thread first and the seq (or the item's
//! ordinal) second.
//!
//! `pos = key << SEQ_BITS | seq`, where `key` is the thread's
//! `threads.key`, a small integer given when the thread is created and
//! never given again (`thread_keys` counts them), even once the thread is
//! deleted: a writer that still holds a deleted thread's state (another
//! store on the same file) and appends to it writes rows under a key no
//! live thread has, never into another thread's run. So a thread's log is
//! one run of `pos` in order of seq, and its items one run in order of
//! ordinal, its turns among them (a turn row under its own ordinal, with
//! `is_turn = 1`: see [`V14_TURNS_AMONG_ITEMS`]), both in the table's own
//! b-tree (the rowid): an append writes one b-tree for its log row, and two
//! for its item or turn row (the table and `items_by_id`), where keys of
//! `(thread_id, seq)` and `(thread_id, ordinal)` needed an index each
//! beside the table, every entry of which repeated the thread's id.
//! `thread_id` and `seq` stay columns of their own, so a row still says
//! what it is without its key.
//!
//! Readers name a thread by its id and find its run with [`thread_lo!`]
//! and [`thread_hi!`] (subqueries SQLite runs once per statement, not per
//! row), and keep the rows of one kind with `is_turn`; the writer knows the
//! key (`ThreadState::key`) and binds `pos`.

use crate::error::StoreError;

/// Bits of `pos` below the thread's key: room for 2^36 (68 billion) seqs a
/// thread, and 2^27 (134 million) thread keys.
pub(crate) const SEQ_BITS: u32 = 36;

/// The largest seq (or ordinal) `pos` can hold.
pub(crate) const MAX_SEQ: u64 = (1 << SEQ_BITS) - 1;

/// The largest thread key: `pos` stays a positive `i64`.
pub(crate) const MAX_KEY: i64 = (1 << (63 - SEQ_BITS)) - 1;

/// The first `pos` of the thread whose id is `?1` (`NULL` for an unknown
/// thread, which makes every comparison with it false).
macro_rules! thread_lo {
    () => {
        "(SELECT key << 36 FROM threads WHERE id = ?1)"
    };
}

/// One past the last `pos` of the thread whose id is `?1`.
macro_rules! thread_hi {
    () => {
        "(SELECT (key + 1) << 36 FROM threads WHERE id = ?1)"
    };
}

/// The rows of the thread whose id is `?1`.
macro_rules! of_thread {
    () => {
        concat!(
            "pos >= ",
            crate::sqlite::keys::thread_lo!(),
            " AND pos < ",
            crate::sqlite::keys::thread_hi!()
        )
    };
}

/// `$column` of the newest log row of the thread whose key is `$key` (an
/// expression of the outer query, such as `t.key`), `NULL` when it has
/// none: a seek to the end of the thread's run.
macro_rules! newest_event_of {
    ($column:literal, $key:literal) => {
        concat!(
            "(SELECT ",
            $column,
            " FROM events WHERE pos >= ",
            $key,
            " << 36 AND pos < (",
            $key,
            " + 1) << 36 ORDER BY pos DESC LIMIT 1)"
        )
    };
}

/// 2^36 as SQL text: one past the largest seq (or ordinal) under a key,
/// the cap of a bound a caller adds to a thread's first `pos`.
macro_rules! seq_span {
    () => {
        "68719476736"
    };
}

pub(crate) use {newest_event_of, of_thread, seq_span, thread_hi, thread_lo};

/// The seq of the newest log row of the thread whose id is `?1` (`NULL`:
/// none, an unknown thread). A seek to the end of the thread's run, where
/// `max(pos)` under a range would scan it.
pub(crate) const LAST_SEQ: &str = concat!(
    "SELECT (SELECT seq FROM events WHERE ",
    of_thread!(),
    " ORDER BY pos DESC LIMIT 1)"
);

/// `pos` of the row at `seq` (or ordinal) of the thread keyed `key`.
pub(crate) fn pos(thread_id: &str, key: i64, seq: u64) -> Result<i64, StoreError> {
    if seq > MAX_SEQ || !(1..=MAX_KEY).contains(&key) {
        return Err(StoreError::PastKeySpace {
            thread_id: thread_id.to_owned(),
            key,
            seq,
        });
    }
    Ok(key << SEQ_BITS | seq as i64)
}

/// Version 12 of the schema: `events` and `items` keyed by `pos` (see the
/// module docs), and `threads.key`.
///
/// Existing threads take their rowid as their key; later ones the next
/// count of `thread_keys`, a one-row table that only grows. The two tables are copied under their new keys, in key
/// order; `items` keeps a unique index on `(thread_id, item_id)` (how the
/// writer updates an item), and loses `items_by_ordinal`, which `pos` is
/// now. The copy runs once, in the migration's transaction, and needs free
/// disk for about the two tables again until it commits (the old pages then
/// become free pages of the file).
pub(crate) const V12_ROWS_KEYED_BY_THREAD_AND_SEQ: &str = "
ALTER TABLE threads ADD COLUMN key INTEGER;
UPDATE threads SET key = rowid;
CREATE UNIQUE INDEX threads_by_key ON threads (key);
CREATE TABLE thread_keys (last INTEGER NOT NULL) STRICT;
INSERT INTO thread_keys (last) SELECT coalesce(max(key), 0) FROM threads;

ALTER TABLE events RENAME TO events_v11;
ALTER TABLE items RENAME TO items_v11;
DROP INDEX items_by_ordinal;
DROP INDEX items_open;
DROP INDEX items_compactions;

CREATE TABLE events (
    pos       INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq       INTEGER NOT NULL,
    method    TEXT NOT NULL,
    item_id   TEXT,
    at_ms     INTEGER NOT NULL,
    payload   TEXT NOT NULL
) STRICT;
INSERT INTO events (pos, thread_id, seq, method, item_id, at_ms, payload)
    SELECT (t.key << 36) + e.seq, e.thread_id, e.seq, e.method, e.item_id, e.at_ms, e.payload
    FROM events_v11 e JOIN threads t ON t.id = e.thread_id ORDER BY 1;

CREATE TABLE items (
    pos         INTEGER PRIMARY KEY,
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
    FOREIGN KEY (thread_id, turn_id) REFERENCES turns (thread_id, turn_id)
) STRICT;
INSERT INTO items (pos, thread_id, item_id, turn_id, ordinal, seq, kind, status, item, envelope,
                   token_count, input_item, llm)
    SELECT (t.key << 36) + i.ordinal, i.thread_id, i.item_id, i.turn_id, i.ordinal, i.seq, i.kind,
           i.status, i.item, i.envelope, i.token_count, i.input_item, i.llm
    FROM items_v11 i JOIN threads t ON t.id = i.thread_id ORDER BY 1;
CREATE UNIQUE INDEX items_by_id ON items (thread_id, item_id);
CREATE INDEX items_open ON items (thread_id) WHERE status = 'inProgress';
CREATE INDEX items_compactions ON items (thread_id, ordinal) WHERE kind = 'contextCompaction';

DROP TABLE items_v11;
DROP TABLE events_v11;
";

/// Version 13 of the schema: the id indexes of `items` and `turns` lead
/// with the id, `(item_id, thread_id)` and `(turn_id, thread_id)`, where
/// they led with the thread.
///
/// spool's ids are UUIDv7, which grow with time, so what threads start at
/// about the same time sits together at the end of an index that leads
/// with the id: a commit of 16 sessions' `add_items` calls writes one or
/// two leaf pages of each index, where an index that led with the thread
/// had a leaf per session to write (`docs/internals/log.md`, "What a
/// commit costs"). Lookups name both columns, so they find a row either
/// way; the uniqueness is the same. What the old order gave besides, a
/// thread's greatest id in one seek, the writer now reads as a bound from
/// the index's end (`thread_state/fresh_ids.rs`).
///
/// Both indexes are built again, once, in the migration's transaction.
pub(crate) const V13_IDS_FIRST: &str = "
DROP INDEX items_by_id;
CREATE UNIQUE INDEX items_by_id ON items (item_id, thread_id);
DROP INDEX turns_by_id;
CREATE UNIQUE INDEX turns_by_id ON turns (turn_id, thread_id);
";

/// Version 14 of the schema: a thread's turns are rows of `items`, in the
/// thread's run among its items, and `turns` is gone.
///
/// A turn's row is keyed as an item's is, `pos` = the thread's key and the
/// turn's ordinal (the seq of its `turn/started`, which no item's start
/// has), so it sits just before the turn's first item. A commit that writes
/// a turn and its items (every `add_items` call of the Session API) writes
/// them into one leaf of the b-tree, where a table of turns of its own had
/// a leaf of its own to write for each thread in the commit. A turn row has
/// `is_turn = 1`, its id in `item_id` (and `turn_id`), `kind = 'turn'`,
/// `llm = 0`, its fields in columns of its own (`error` through
/// `view_rank`, empty on item rows) and empty `item` and `envelope`.
/// Readers of a thread's items or turns pass over the other kind's rows,
/// which `is_turn`, stored before the large columns, tells them without
/// reading further into the row. The id index adds `is_turn`, so that a
/// turn and an item of a thread may still have the same id; `items_open`
/// adds it too, so that open turns are found on the index alone.
///
/// `items` is copied once, in the migration's transaction (its foreign key
/// named `turns`, and its columns change order), with the turn rows added;
/// it needs free disk for about the table again until it commits.
pub(crate) const V14_TURNS_AMONG_ITEMS: &str = "
ALTER TABLE items RENAME TO items_v13;
DROP INDEX items_by_id;
DROP INDEX items_open;
DROP INDEX items_compactions;

CREATE TABLE items (
    pos          INTEGER PRIMARY KEY,
    thread_id    TEXT NOT NULL REFERENCES threads (id),
    is_turn      INTEGER NOT NULL DEFAULT 0,
    llm          INTEGER NOT NULL DEFAULT 0,
    item_id      TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    status       TEXT NOT NULL,
    token_count  INTEGER,
    view_rank    INTEGER NOT NULL DEFAULT 0,
    started_at   INTEGER,
    completed_at INTEGER,
    duration_ms  INTEGER,
    error        TEXT,
    token_usage  TEXT,
    item         TEXT NOT NULL,
    envelope     TEXT NOT NULL,
    input_item   TEXT
) STRICT;
INSERT INTO items (pos, thread_id, item_id, turn_id, ordinal, seq, kind, status, item, envelope,
                   token_count, input_item, llm)
    SELECT pos, thread_id, item_id, turn_id, ordinal, seq, kind, status, item, envelope,
           token_count, input_item, llm
    FROM items_v13;
INSERT INTO items (pos, thread_id, is_turn, item_id, turn_id, ordinal, seq, kind, status,
                   view_rank, started_at, completed_at, duration_ms, error, token_usage, item,
                   envelope)
    SELECT (t.key << 36) + u.ordinal, u.thread_id, 1, u.turn_id, u.turn_id, u.ordinal, u.seq,
           'turn', u.status, u.view_rank, u.started_at, u.completed_at, u.duration_ms, u.error,
           u.token_usage, '', ''
    FROM turns u JOIN threads t ON t.id = u.thread_id;
CREATE UNIQUE INDEX items_by_id ON items (item_id, thread_id, is_turn);
CREATE INDEX items_open ON items (thread_id, is_turn) WHERE status = 'inProgress';
CREATE INDEX items_compactions ON items (thread_id, ordinal) WHERE kind = 'contextCompaction';

DROP TABLE items_v13;
DROP TABLE turns;
";

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQL spells the shift, and 2^36, as literals.
    #[test]
    fn the_sql_shifts_by_the_bits_the_code_does() {
        assert_eq!(SEQ_BITS, 36);
        assert_eq!(seq_span!().parse::<u64>().unwrap(), MAX_SEQ + 1);
        assert!(newest_event_of!("seq", "t.key").contains(&format!("<< {SEQ_BITS} ")));
        let shift = format!("<< {SEQ_BITS}");
        assert!(thread_lo!().contains(&shift));
        assert!(thread_hi!().contains(&shift));
        assert_eq!(V12_ROWS_KEYED_BY_THREAD_AND_SEQ.matches(&shift).count(), 2);
        assert_eq!(V14_TURNS_AMONG_ITEMS.matches(&shift).count(), 1);
    }

    #[test]
    fn pos_refuses_what_it_cannot_hold() {
        assert_eq!(pos("t", 1, 5).unwrap(), (1 << 36) + 5);
        assert_eq!(pos("t", MAX_KEY, MAX_SEQ).unwrap(), i64::MAX);
        assert!(pos("t", 1, MAX_SEQ + 1).is_err());
        assert!(pos("t", MAX_KEY + 1, 1).is_err());
        assert!(pos("t", 0, 1).is_err());
    }
}
