//! The group commit's `COMMIT`, on a thread of its own.
//!
//! A group commit has two halves: the statements that write the batch's
//! rows (the writer's own work, from its in-memory states) and the
//! `COMMIT` that puts their pages in the WAL and syncs it. The second half
//! needs no state but the connection, and under many streaming threads it
//! is most of a commit (one WAL page per thread touched, ~1 ms for 60
//! threads here). While it ran on the writer, every delta that arrived
//! waited for its seq.
//!
//! So the writer lends the connection, with the transaction open, to this
//! thread, which runs `COMMIT` and gives the connection back as a
//! [`Request::Committed`] in the writer's own inbox, in line with the
//! requests that came meanwhile. Until then the writer takes only the
//! appends it can check without the connection (deltas of items it holds
//! open; `Writer::takes_while_lent`) and keeps everything else, each
//! thread's requests in order, for when the connection is back
//! (`lend.rs`). One commit is in flight at a time.
//!
//! The idle writer also lends it, with no transaction open, for the
//! checkpoint thread's catch-up (`checkpoint.rs`).

use std::sync::mpsc::{Receiver, Sender};

use rusqlite::Connection;

use super::Request;
use super::worker::Worker;
use crate::error::StoreError;

/// The writer's handle on the commit thread; dropping it stops the thread
/// and waits for it.
pub(super) struct Committer(Worker<Connection>);

impl Committer {
    /// Starts the thread; it answers into `inbox`, the writer's requests.
    pub(super) fn start(inbox: Sender<Request>) -> Result<Committer, StoreError> {
        Worker::start("spool-store-commit", move |queue| run(&queue, &inbox)).map(Committer)
    }

    /// Hands over `conn`, whose transaction is open, to be committed (or
    /// with none open, to catch up a checkpoint); the connection comes back
    /// in a [`Request::Committed`]. `Err` gives it back at once: the thread
    /// is gone.
    pub(super) fn lend(&self, conn: Connection) -> Result<(), Connection> {
        self.0.send(conn)
    }
}

fn run(queue: &Receiver<Connection>, inbox: &Sender<Request>) {
    while let Ok(conn) = queue.recv() {
        // Lent without a transaction: for a checkpoint's catch-up, whose
        // failure is no commit's.
        let result = if conn.is_autocommit() {
            super::checkpoint::catch_up(&conn);
            Ok(())
        } else {
            finish(&conn)
        };
        // The writer waits for its connection: it is there to take it
        // unless it is gone, and then so is everything else.
        if inbox
            .send(Request::Committed {
                conn: Box::new(conn),
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

/// `COMMIT`; a transaction a failed `COMMIT` left open is rolled back, so
/// the connection goes back clean either way.
pub(super) fn finish(conn: &Connection) -> Result<(), rusqlite::Error> {
    #[cfg(test)]
    super::door::pass(conn, super::door::Place::Commit);
    let result = conn
        .prepare_cached("COMMIT")
        .and_then(|mut commit| commit.execute([]).map(drop));
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_lent_without_a_transaction_is_checkpointed_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("lent.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);",
        )
        .unwrap();
        let file_len = || std::fs::metadata(dir.path().join("lent.db")).unwrap().len();
        // The table and its row are in the WAL only.
        let before = file_len();
        let (inbox, answers) = std::sync::mpsc::channel();
        let committer = Committer::start(inbox).unwrap();
        assert!(committer.lend(conn).is_ok());
        let Ok(Request::Committed { conn, result }) = answers.recv() else {
            panic!("the connection comes back");
        };
        assert!(result.is_ok(), "{result:?}");
        assert!(conn.is_autocommit());
        assert!(
            file_len() > before,
            "the WAL was copied into the database file: {before} bytes before, {} after",
            file_len()
        );
    }
}
