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
//! open; `Writer::takes_while_lent`) and keeps everything else, in order,
//! for when the connection is back. One commit is in flight at a time.

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

    /// Hands over `conn`, whose transaction is open, to be committed; the
    /// connection comes back in a [`Request::Committed`]. `Err` gives it
    /// back at once: the thread is gone.
    pub(super) fn lend(&self, conn: Connection) -> Result<(), Connection> {
        self.0.send(conn)
    }
}

fn run(queue: &Receiver<Connection>, inbox: &Sender<Request>) {
    while let Ok(conn) = queue.recv() {
        let result = finish(&conn);
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
    let result = conn
        .prepare_cached("COMMIT")
        .and_then(|mut commit| commit.execute([]).map(drop));
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}
