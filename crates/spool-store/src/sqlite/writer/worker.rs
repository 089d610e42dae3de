//! A helper thread of the writer fed through a one-slot channel: the
//! commit thread (`commit.rs`) and the checkpoint thread (`checkpoint.rs`).

use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use crate::error::StoreError;

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
            .spawn(move || run(receiver))
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
