//! The writer's state behind a lock, and who runs it: the writer thread,
//! or a lone caller that finds it idle.
//!
//! A caller that waits for its commit pays two thread hand-offs on top of
//! it: its request wakes the writer thread, and the answer wakes the
//! caller. On a small machine each wake-up of a thread whose CPU has gone
//! idle costs tens of microseconds (`docs/internals/log.md`, "What a commit
//! costs"), as much as writing the rows. So an append whose caller finds
//! the writer idle — its lock free, its connection home, nothing sent to
//! it that it has not taken, nothing of others' waiting to be committed —
//! runs on the caller's thread: the caller
//! takes the lock, runs the request as the thread would and commits if the
//! thread would have, and finds its answer waiting. Order is kept: nothing
//! sent before it is still queued (`queued` counts what was sent and not
//! yet taken), and anything sent meanwhile waits for the lock.
//!
//! Never with others' changes pending: a caller would then write their rows
//! too (a batch of many streams' deltas takes a millisecond of statements),
//! on a thread that may be relaying other streams. And only while callers
//! come one at a time: when the last commit answered
//! more than one caller, they are concurrent, and a commit of one caller's
//! rows on its own thread would take the place of a group commit of
//! several on the writer's. The cost to the caller is the commit itself,
//! on its thread: an `fsync` and ~30 µs of statements, about what the
//! store's inline reads of small model views take.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvError, RecvTimeoutError, TryRecvError};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Instant;

use super::slice::Inbox;
use super::{Flow, Request, Writer};

/// The writer's state and what is queued for it.
pub(crate) struct Shared {
    /// `None` once the writer thread has stopped: it dropped the writer
    /// (its connection last, see [`Writer`]) as it left.
    writer: Mutex<Option<Writer>>,
    /// Requests sent to the writer and not yet taken by it.
    queued: AtomicUsize,
}

impl Shared {
    pub(super) fn new(writer: Writer) -> Shared {
        Shared {
            writer: Mutex::new(Some(writer)),
            queued: AtomicUsize::new(0),
        }
    }

    /// Counts a request about to be sent to the writer thread.
    pub(crate) fn sending(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs `request` (an append) on this thread if the writer is idle,
    /// and commits it if the writer thread would have; `Err` gives it back
    /// to be sent. `Ok(true)`: the request opened a batch that nobody
    /// waits for (deltas, committed by a deadline), which the writer
    /// thread, asleep without one, must learn of.
    // The request comes back as it was given, moved, not boxed: the
    // `Err` is the common path under concurrent callers.
    #[allow(clippy::result_large_err)]
    pub(crate) fn try_run(&self, request: Request) -> Result<bool, Request> {
        let mut guard = match self.writer.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => return Err(request),
        };
        let Some(writer) = guard.as_mut() else {
            return Err(request); // stopped: the send fails, as it should
        };
        // Read under the lock: the thread takes a request, and lowers the
        // count, only while it holds it.
        let idle = self.queued.load(Ordering::SeqCst) == 0
            && writer.conn.is_some()
            && writer.batch.is_empty()
            && writer.lone_caller;
        if !idle {
            return Err(request);
        }
        // With the connection home, what waited for it has run (`lend.rs`).
        debug_assert!(writer.deferred.is_empty());
        let _ = writer.handle(request);
        writer.commit_if_due(None);
        if writer.batch.is_empty() {
            // What the thread does before it sleeps.
            writer.lend_for_catch_up();
        }
        // The batch was empty, so the sleeping thread has no deadline for
        // what this request left open.
        Ok(writer.batch.opened_at.is_some())
    }

    /// The writer, unless a panic left it half-changed: then nobody runs
    /// it again, and the store answers that it is closed.
    fn lock(&self) -> Option<Held<'_>> {
        self.writer
            .lock()
            .ok()
            .filter(|guard| guard.is_some())
            .map(Held)
    }

    /// Has the writer take `request` from its inbox.
    pub(super) fn take(&self, writer: &mut Writer, request: Request) -> Flow {
        // `Committed` comes from the commit thread, which does not count.
        if !matches!(request, Request::Committed { .. } | Request::Stop) {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
        writer.take(request)
    }
}

impl Writer {
    /// The end of a round of requests: commits if a waiter, a deadline or
    /// token counts ask for it (`group_commit`).
    fn commit_if_due(&mut self, inbox: Option<&Inbox<'_>>) {
        let overdue = self.deadline().is_some_and(|d| Instant::now() >= d);
        // Token counts are committed at once too: nobody waits for them,
        // but a model view read before they land counts again.
        let counts = !self.batch.token_counts.is_empty();
        if !self.batch.waiters.is_empty() || overdue || counts {
            self.group_commit(inbox);
        }
    }

    /// The next request if one is queued; with none, a writer about to
    /// sleep that holds its connection first lends it for the checkpoint
    /// thread's catch-up, if one is owed (`checkpoint.rs`); it comes back
    /// as a `Request::Committed`.
    fn idle_try(&mut self, inbox: &Receiver<Request>) -> Result<Option<Request>, RecvError> {
        if self.conn.is_some() {
            match inbox.try_recv() {
                Ok(request) => return Ok(Some(request)),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            self.lend_for_catch_up();
        }
        Ok(None)
    }

    fn lend_for_catch_up(&mut self) {
        if self.conn.is_some()
            && self.checkpointer.owes_catch_up()
            && let Some(conn) = self.conn.take()
            && let Err(conn) = self.committer.lend(conn)
        {
            // The commit thread is gone: the connection stays here.
            self.conn = Some(conn);
        }
    }
}

/// The writer thread: takes a request, drains whatever else queued up
/// meanwhile into the same batch, and commits when it must. It holds the
/// lock while it works and lets it go while it waits.
pub(super) fn run(shared: &Shared, inbox: Receiver<Request>) {
    tracing::debug!("store writer started");
    serve(shared, inbox);
    // Dropped here, as the thread leaves, however it leaves.
    let writer = match shared.writer.lock() {
        Ok(mut guard) => guard.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    drop(writer);
}

fn serve(shared: &Shared, requests: Receiver<Request>) {
    let inbox = &requests;
    let slices = Inbox {
        shared,
        requests: inbox,
    };
    // A commit, and what a batch written in slices kept back meanwhile.
    let commit = |writer: &mut Writer, due_only: bool| {
        match due_only {
            true => writer.commit_if_due(Some(&slices)),
            false => writer.group_commit(Some(&slices)),
        }
        writer.run_kept()
    };
    'requests: loop {
        let Some(mut writer) = shared.lock() else {
            return;
        };
        // No deadline while a commit is in flight: its end wakes the
        // loop, and the next commit can only follow it.
        let deadline = writer.conn.as_ref().and(writer.deadline());
        let request = match deadline {
            None => match writer.idle_try(inbox) {
                Ok(Some(request)) => request,
                Ok(None) => {
                    drop(writer);
                    let Ok(request) = inbox.recv() else {
                        break;
                    };
                    let Some(again) = shared.lock() else {
                        return;
                    };
                    writer = again;
                    request
                }
                Err(RecvError) => break,
            },
            Some(deadline) => {
                let now = Instant::now();
                if now < deadline {
                    drop(writer);
                    let received = inbox.recv_timeout(deadline - now);
                    let Some(again) = shared.lock() else {
                        return;
                    };
                    writer = again;
                    match received {
                        Ok(request) => request,
                        Err(RecvTimeoutError::Timeout) => {
                            // A caller may have committed meanwhile.
                            if let Flow::Stop = commit(&mut writer, true) {
                                return;
                            }
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                } else {
                    if let Flow::Stop = commit(&mut writer, false) {
                        return;
                    }
                    continue;
                }
            }
        };
        if let Flow::Stop = shared.take(&mut writer, request) {
            return;
        }
        loop {
            if writer.batch.events >= writer.max_batch_events
                && let Flow::Stop = commit(&mut writer, false)
            {
                return;
            }
            match inbox.try_recv() {
                Ok(request) => {
                    if let Flow::Stop = shared.take(&mut writer, request) {
                        return;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => break 'requests,
            }
        }
        if let Flow::Stop = commit(&mut writer, true) {
            return;
        }
    }
    // The channel ended without `Stop` (the commit thread is gone too).
    if let Some(mut writer) = shared.lock()
        && writer.conn.is_some()
    {
        let _ = writer.shut_down();
    }
}

/// The writer under its lock, while the thread has it.
struct Held<'a>(MutexGuard<'a, Option<Writer>>);

impl Deref for Held<'_> {
    type Target = Writer;

    #[allow(clippy::expect_used)]
    fn deref(&self) -> &Writer {
        self.0.as_ref().expect("checked by `Shared::lock`")
    }
}

impl DerefMut for Held<'_> {
    #[allow(clippy::expect_used)]
    fn deref_mut(&mut self) -> &mut Writer {
        self.0.as_mut().expect("checked by `Shared::lock`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::StoreOptions;
    use crate::sqlite::schema;

    /// A writer on a fresh file, with its thread running.
    fn writer() -> (
        tempfile::TempDir,
        std::sync::mpsc::Sender<Request>,
        std::thread::JoinHandle<()>,
        std::sync::Arc<Shared>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spool.db");
        let options = StoreOptions::default();
        let conn = schema::open_writer(&path, &options).unwrap();
        let spawned = super::super::spawn(conn, &path, &options).unwrap();
        (dir, spawned.requests, spawned.thread, spawned.shared)
    }

    fn flush() -> (
        Request,
        tokio::sync::oneshot::Receiver<Result<(), crate::StoreError>>,
    ) {
        let (reply, answer) = tokio::sync::oneshot::channel();
        (Request::Flush { reply }, answer)
    }

    /// Runs a flush on this thread once the writer thread has gone to
    /// sleep (it holds the lock for a moment as it starts).
    fn run_when_idle(shared: &Shared) {
        let started = std::time::Instant::now();
        let (mut request, mut answer) = flush();
        loop {
            match shared.try_run(request) {
                Ok(wake) => {
                    assert!(!wake, "a flush opens no batch");
                    break;
                }
                Err(back) => request = back,
            }
            assert!(
                started.elapsed().as_secs() < 10,
                "the writer never went idle"
            );
            std::thread::yield_now();
        }
        // Answered before `try_run` returned: nothing else ran it.
        assert!(matches!(answer.try_recv(), Ok(Ok(()))));
    }

    #[test]
    fn an_idle_writer_runs_a_request_on_the_callers_thread() {
        let (_dir, requests, handle, shared) = writer();
        run_when_idle(&shared);
        run_when_idle(&shared);
        requests.send(Request::Stop).unwrap();
        handle.join().unwrap();
    }

    /// Has `setup` change an idle writer, then checks that a request is
    /// left to its thread.
    fn kept_off_the_callers_thread(setup: impl FnOnce(&Shared)) {
        let (_dir, requests, handle, shared) = writer();
        run_when_idle(&shared);
        setup(&shared);
        let (request, _answer) = flush();
        assert!(shared.try_run(request).is_err());
        requests.send(Request::Stop).unwrap();
        handle.join().unwrap();
    }

    #[test]
    fn a_request_sent_and_not_yet_taken_keeps_the_next_one_off_the_callers_thread() {
        // Counted as sent, never sent: the thread cannot have taken it.
        kept_off_the_callers_thread(Shared::sending);
    }

    #[test]
    fn concurrent_callers_leave_their_requests_to_the_group_commit() {
        kept_off_the_callers_thread(|shared| {
            if let Some(writer) = shared.writer.lock().unwrap().as_mut() {
                writer.lone_caller = false;
            }
        });
    }

    #[test]
    fn a_writer_with_changes_to_commit_leaves_the_request_to_its_thread() {
        kept_off_the_callers_thread(|shared| {
            if let Some(writer) = shared.writer.lock().unwrap().as_mut() {
                writer.batch.token_counts.push(("t".to_owned(), Vec::new()));
            }
        });
    }

    #[test]
    fn a_stopped_writer_runs_nothing() {
        let (_dir, requests, handle, shared) = writer();
        run_when_idle(&shared);
        requests.send(Request::Stop).unwrap();
        handle.join().unwrap();
        let (request, _answer) = flush();
        assert!(shared.try_run(request).is_err());
        assert!(
            shared.writer.lock().unwrap().is_none(),
            "dropped as the thread left"
        );
    }
}
