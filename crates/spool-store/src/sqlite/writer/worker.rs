//! A helper thread of the writer fed through a one-slot channel: the
//! commit thread (`commit.rs`) and the checkpoint thread (`checkpoint.rs`).
//!
//! Both run at a lower scheduling priority than the thread that starts
//! them ([`HELPER_NICE`]): nobody waits on what they do. The commit thread
//! commits batches of deltas alone, which were answered when they got their
//! seqs (a batch with waiters commits on the writer), and the checkpoint
//! thread copies the WAL back into the database. On a machine with few
//! cores they share the CPU with the path that streams those deltas to
//! clients, and the scheduler should let that path go first.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use crate::error::StoreError;

/// The nice increment of a helper thread over the thread that starts it.
/// Measured with `spool bench live --deltas 2000 --timed-deltas 0
/// --paced-deltas 500` (100 streams paced at a delta every 10 ms, six
/// alternating rounds, 2-core VM): the p99 from the model server's write to
/// the client's read went from a median of 2.28 ms (1.97–4.13) to 1.79 ms
/// (1.58–2.73) over stdio, and from 2.19 ms (1.86–5.66) to 1.77 ms
/// (1.61–2.25) over WebSocket. An increment of 19 did no better than 10.
const HELPER_NICE: i32 = 10;

/// Lowers the calling thread's priority by [`HELPER_NICE`] (Linux gives
/// each thread its own nice value). A refusal leaves it where it was.
fn lower_priority(name: &str) {
    use rustix::process::{getpriority_process, setpriority_process};
    let me = Some(rustix::thread::gettid());
    let lowered = getpriority_process(me)
        .and_then(|now| setpriority_process(me, (now + HELPER_NICE).min(19)));
    if let Err(error) = lowered {
        tracing::debug!(thread = name, %error, "cannot lower the thread's priority");
    }
}

/// The writer's handle on a helper thread; dropping it ends the thread's
/// channel and waits for the thread.
pub(super) struct Worker<T> {
    sender: Option<SyncSender<T>>,
    thread: Option<JoinHandle<()>>,
    name: &'static str,
}

impl<T: Send + 'static> Worker<T> {
    /// Starts `run` on a thread named `name`, with the receiving end of a
    /// channel that holds one message.
    pub(super) fn start(
        name: &'static str,
        run: impl FnOnce(Receiver<T>) + Send + 'static,
    ) -> Result<Worker<T>, StoreError> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                lower_priority(name);
                run(receiver)
            })
            .map_err(StoreError::WriterThread)?;
        Ok(Worker {
            sender: Some(sender),
            thread: Some(thread),
            name,
        })
    }

    /// Sends `message`, waiting for the slot; `Err` gives it back when the
    /// thread is gone.
    pub(super) fn send(&self, message: T) -> Result<(), T> {
        match &self.sender {
            Some(sender) => sender.send(message).map_err(|returned| returned.0),
            None => Err(message),
        }
    }

    /// Sends `message` unless the slot is taken (or the thread gone).
    pub(super) fn offer(&self, message: T) -> Result<(), TrySendError<T>> {
        match &self.sender {
            Some(sender) => sender.try_send(message),
            None => Err(TrySendError::Disconnected(message)),
        }
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!(thread = self.name, "a store writer helper thread panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::process::getpriority_process;

    #[test]
    fn a_helper_runs_below_the_thread_that_starts_it() {
        let (tell, told) = std::sync::mpsc::channel();
        let worker = Worker::start("spool-test-helper", move |_: Receiver<()>| {
            let me = Some(rustix::thread::gettid());
            tell.send(getpriority_process(me).unwrap()).unwrap();
        })
        .unwrap();
        let helper = told.recv().unwrap();
        drop(worker);
        let starter = getpriority_process(Some(rustix::thread::gettid())).unwrap();
        assert_eq!(helper, (starter + HELPER_NICE).min(19));
        assert!(helper > starter || starter == 19);
    }
}
