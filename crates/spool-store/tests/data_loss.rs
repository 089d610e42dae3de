//! A store that lost committed data says so (`src/mark.rs`): one whose
//! write-ahead log is gone, or a file truncated to nothing, is refused on
//! open with an error naming what is missing, unless `accept_data_loss`.

mod common;

use common::*;
use spool_store::{SqliteStore, Store, StoreError, StoreOptions};

fn accepting() -> StoreOptions {
    StoreOptions {
        accept_data_loss: true,
        ..StoreOptions::default()
    }
}

/// Everything committed so far into the main file, then a reader's
/// snapshot that keeps every later commit in spool.db-wal: no checkpoint
/// copies past what a reader may read, and none is left to run on the main
/// file while [`without_wal`] copies it.
fn pin_main_file(dir: &std::path::Path) -> rusqlite::Connection {
    let pin = raw(dir);
    while pin
        .query_row("PRAGMA wal_checkpoint(FULL)", [], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })
        .map_or(true, |(busy, frames, copied)| busy != 0 || frames != copied)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    pin.execute_batch("BEGIN").unwrap();
    let _: i64 = pin
        .query_row("SELECT count(*) FROM threads", [], |row| row.get(0))
        .unwrap();
    pin
}

/// A copy of what a crash followed by `rm spool.db-wal` would leave: the
/// main file (the commits since [`pin_main_file`] not in it) and the mark
/// beside it.
/// Waits until the mark holds a log of at least `length` (it is written on
/// a thread of its own, after the commit).
fn mark_reaches(dir: &std::path::Path, length: u64) {
    let reached = || {
        let text = std::fs::read_to_string(dir.join("spool.db.committed")).ok()?;
        let written: u64 = text.trim_end().rsplit(' ').next()?.parse().ok()?;
        Some(written >= length)
    };
    while reached() != Some(true) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// What a named pipe is given, a read at a time (each read ends when its
/// writer closes the pipe), from a thread that reads it for good.
fn read_pipe(path: std::path::PathBuf) -> std::sync::mpsc::Receiver<String> {
    let (read, reads) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Ok(text) = std::fs::read_to_string(&path) {
            if read.send(text).is_err() {
                return;
            }
        }
    });
    reads
}

fn without_wal(dir: &std::path::Path) -> tempfile::TempDir {
    let lost = tempfile::tempdir().unwrap();
    std::fs::copy(db_path(dir), db_path(lost.path())).unwrap();
    std::fs::copy(
        dir.join("spool.db.committed"),
        lost.path().join("spool.db.committed"),
    )
    .unwrap();
    lost
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_wal_was_lost_is_refused_until_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let pin = pin_main_file(dir.path());
    let t = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    // The first commit's length (the thread's creation) is in the WAL.
    mark_reaches(dir.path(), 1);
    let lost = without_wal(dir.path());
    drop(pin);
    store.close().await.unwrap();

    let error = SqliteStore::open(db_path(lost.path()), StoreOptions::default()).unwrap_err();
    assert!(matches!(error, StoreError::DataLoss { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("lost committed data") && message.contains("--accept-data-loss"),
        "{message}"
    );
    // Accepted: it opens with what is left, and the mark moves there.
    let store = SqliteStore::open(db_path(lost.path()), accepting()).unwrap();
    assert!(
        store.thread(&t).await.unwrap().is_none(),
        "the thread was in the lost WAL"
    );
    store.close().await.unwrap();
    let store = SqliteStore::open(db_path(lost.path()), StoreOptions::default()).unwrap();
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_file_where_a_store_was_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    new_thread(&store, false).await;
    store.close().await.unwrap();
    drop(store);
    std::fs::File::create(db_path(dir.path())).unwrap(); // truncated to 0 bytes
    let _ = std::fs::remove_file(dir.path().join("spool.db-wal"));
    let error = SqliteStore::open(db_path(dir.path()), StoreOptions::default()).unwrap_err();
    assert!(error.to_string().contains("an empty file"), "{error}");
    let store = SqliteStore::open(db_path(dir.path()), accepting()).unwrap();
    assert!(
        store
            .list_threads(Default::default())
            .await
            .unwrap()
            .threads
            .is_empty()
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_closed_and_reopened_is_not_data_loss() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        let store = open(dir.path());
        let t = new_thread(&store, false).await;
        start_message(&store, &t, "turn-1", "a1").await;
        store.close().await.unwrap();
    }
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    store.delete_thread(&t).await.unwrap();
    store.close().await.unwrap();
    open(dir.path()).close().await.unwrap();
}

/// The log's rows are keyed by thread first (`sqlite/keys.rs`), so the
/// newest commit is not the highest key: what is lost from an older
/// thread, with a newer thread's rows still all there, is data loss too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_lost_from_an_older_thread_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let older = new_thread(&store, false).await;
    let newer = new_thread(&store, false).await;
    start_message(&store, &newer, "turn-1", "a1").await;
    // The mark is refreshed at most once a second, or when the store
    // closes: close it so the mark holds both threads.
    store.close().await.unwrap();
    let store = open(dir.path());
    let pin = pin_main_file(dir.path());
    start_message(&store, &older, "turn-1", "b1").await;
    store.close().await.unwrap();
    let lost = without_wal(dir.path());
    drop(pin);

    let error = SqliteStore::open(db_path(lost.path()), StoreOptions::default()).unwrap_err();
    assert!(matches!(error, StoreError::DataLoss { .. }), "{error}");
    let store = SqliteStore::open(db_path(lost.path()), accepting()).unwrap();
    assert_eq!(store.thread(&older).await.unwrap().unwrap().last_seq, 1);
    assert!(store.thread(&newer).await.unwrap().unwrap().last_seq > 1);
    store.close().await.unwrap();
}

/// A mark written by a build that keyed the log by a global rowid holds a
/// number that means nothing now: it is not compared, and the next close
/// writes one of this build's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_of_the_rowid_layout_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    start_message(&store, &t, "turn-1", "a1").await;
    store.close().await.unwrap();
    let mark = dir.path().join("spool.db.committed");
    std::fs::write(&mark, "spool store committed events up to rowid 999999\n").unwrap();
    let store = open(dir.path());
    let other = new_thread(&store, false).await;
    start_message(&store, &other, "turn-1", "b1").await;
    store.close().await.unwrap();
    let text = std::fs::read_to_string(&mark).unwrap();
    assert!(
        text.starts_with("spool store committed a log of length "),
        "{text}"
    );
}

/// The mark is written on a thread of its own: a write of it that cannot
/// go on (here its file is a named pipe nobody reads yet) holds up no
/// append and no commit, and closing waits for the last one to land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_mark_write_holds_up_no_append() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let mark = dir.path().join("spool.db.committed");
    nix::unistd::mkfifo(&mark, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let limit = std::time::Duration::from_secs(20);
    let appends = async {
        let session = spool_store::Session::open(store.clone(), "s")
            .await
            .unwrap();
        for n in 0..20 {
            let item = serde_json::json!({"role": "user", "content": format!("item {n}")});
            session.add_items(vec![item]).await.unwrap();
        }
    };
    // Opening the pipe to write waits for a reader: the mark thread is
    // stuck there from the first commit on.
    let appended = tokio::time::timeout(limit, appends).await;
    // A reader for the pipe, from now on (which also lets a writer that
    // waited on it go, should this fail).
    let reads = read_pipe(mark);
    appended.expect("appends and commits go on while the mark cannot be written");
    let last_seq = store.thread("s").await.unwrap().unwrap().last_seq;
    tokio::time::timeout(limit, store.close())
        .await
        .expect("closing ends once the mark is written")
        .unwrap();
    // The reader sends what it read once the writer closed the pipe (two
    // writes that follow one another may reach one read).
    let expected = format!("spool store committed a log of length {last_seq}");
    while !reads
        .recv_timeout(limit)
        .expect("the mark was written")
        .lines()
        .any(|line| line == expected)
    {}
}

/// A deletion lowers the mark; a higher length still waiting to be written
/// when it does must not land after it (a store would then claim to have
/// lost what it deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_lowers_the_mark_after_a_higher_one_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let kept = new_thread(&store, false).await;
    let kept_seq = store.thread(&kept).await.unwrap().unwrap().last_seq;
    let line = |length: u64| format!("spool store committed a log of length {length}");
    // The mark thread writes the first length on its own time: wait for it.
    let mark = dir.path().join("spool.db.committed");
    while std::fs::read_to_string(&mark).map_or(true, |text| text.trim_end() != line(kept_seq)) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The mark becomes a pipe: the next write waits for a reader.
    let pipe = dir.path().join("pipe");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::rename(&pipe, &mark).unwrap();
    // Past the refresh interval, a new thread's commit asks for a higher
    // length, which waits on the pipe.
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let gone = new_thread(&store, false).await;
    let higher = store.thread(&gone).await.unwrap().unwrap().last_seq + kept_seq;
    let reads = read_pipe(mark.clone());
    store.delete_thread(&gone).await.unwrap();
    store.close().await.unwrap();
    // Nothing writes the mark any more: an end marker, then every line the
    // pipe was given, in order (writes that follow one another may reach
    // one read).
    std::fs::write(&mark, "end\n").unwrap();
    let mut lines = Vec::new();
    while lines.last().is_none_or(|last| last != "end") {
        let text = reads
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap();
        lines.extend(text.lines().map(str::to_owned));
    }
    lines.pop();
    assert!(
        lines.contains(&line(higher)),
        "the higher length waited: {lines:?}"
    );
    assert_eq!(lines.last(), Some(&line(kept_seq)), "{lines:?}");
}
