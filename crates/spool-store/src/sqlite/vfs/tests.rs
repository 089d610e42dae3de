//! The VFS under SQLite itself: transactions that spill pages to the WAL
//! before their commit and overwrite them after (the path where SQLite
//! rewrites frame headers in place), read back from a copy of the files
//! taken while the writer is still open, as a crash would leave them.

use rusqlite::{Connection, OpenFlags};

use super::name;

const ROUNDS: i64 = 4;
const ROWS: i64 = 300;

fn writer(path: &std::path::Path) -> Connection {
    let vfs = name().expect("the platform has a default VFS");
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // NORMAL: nothing syncs the WAL at a commit, so only the rule that
    // sends a complete commit frame at once puts the commit in the file.
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    // A cache of a few pages makes SQLite spill dirty pages to the WAL in
    // the middle of each transaction, and overwrite them before it ends.
    conn.pragma_update(None, "cache_size", 2).unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        .unwrap();
    conn
}

/// Writes `ROUNDS` transactions of `ROWS` rows, each of which then updates
/// rows it wrote first (pages it has already spilled), then one of a
/// single row, whose few frames are written once each, at its commit.
fn fill(conn: &mut Connection) {
    for round in 0..ROUNDS {
        let tx = conn.transaction().unwrap();
        for i in 0..ROWS {
            let k = round * ROWS + i;
            tx.execute("INSERT INTO t VALUES (?1, zeroblob(900))", [k])
                .unwrap();
        }
        tx.execute(
            "UPDATE t SET v = randomblob(900) WHERE k BETWEEN ?1 AND ?1 + 20",
            [round * ROWS],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    conn.execute("INSERT INTO t VALUES (?1, zeroblob(10))", [ROUNDS * ROWS])
        .unwrap();
}

/// The rows `fill` writes.
const ALL: i64 = ROUNDS * ROWS + 1;

/// Opens a copy of the database and its WAL (no shared memory: SQLite
/// rebuilds the WAL index from the frames, checking their checksums) and
/// returns its row count and what `integrity_check` says.
fn read_copy(dir: &std::path::Path, path: &std::path::Path) -> (i64, String) {
    let copy = dir.join("copy.db");
    std::fs::copy(path, &copy).unwrap();
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let mut copy_wal = copy.as_os_str().to_owned();
    copy_wal.push("-wal");
    std::fs::copy(&wal, &copy_wal).unwrap();
    let conn = Connection::open(&copy).unwrap();
    let rows = conn
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    let check = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    (rows, check)
}

#[test]
fn every_commit_is_in_the_files_when_it_returns_even_one_that_rewrote_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spill.db");
    let mut conn = writer(&path);
    fill(&mut conn);
    // Another connection, through the default VFS and its own handle on
    // the WAL, sees every commit.
    let reader = Connection::open(&path).unwrap();
    let seen: i64 = reader
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(seen, ALL);
    // And so does the WAL as a crash would leave it, the writer still open.
    let (rows, check) = read_copy(dir.path(), &path);
    assert_eq!(rows, ALL, "a commit was still in the buffer");
    assert_eq!(check, "ok");
    drop(conn);
}
