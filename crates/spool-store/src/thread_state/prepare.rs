//! What every backend does before an append or a creation reaches its
//! writer: checks that need no state, and the encoding, done on the
//! caller's task to keep the writer's work to validation and I/O.

use std::time::{SystemTime, UNIX_EPOCH};

use spool_protocol::{ServerNotification, Thread, ThreadStartedNotification, ThreadStatus};

use super::Incoming;
use crate::born::folds_into;
use crate::codec::encode;
use crate::error::StoreError;
use crate::types::{NewThread, ThreadRecord};

/// Checks an append before it goes to the writer and encodes its
/// notifications here, on the caller's thread, to keep the writer's work
/// to validation and I/O.
pub(crate) fn prepare_append(
    thread_id: &str,
    notifications: Vec<ServerNotification>,
) -> Result<Vec<Incoming>, StoreError> {
    for (index, notification) in notifications.iter().enumerate() {
        if let ServerNotification::ThreadStarted(_) = notification {
            return Err(StoreError::ThreadStartedAppended { index });
        }
        if notification.thread_id() != thread_id {
            return Err(StoreError::ThreadMismatch {
                expected: thread_id.to_owned(),
                got: notification.thread_id().to_owned(),
                index,
                method: notification.method(),
            });
        }
    }
    // Sized up front: collecting into a `Result` cannot know the length,
    // and a burst of deltas is thousands of entries.
    let mut incoming = Vec::with_capacity(notifications.len());
    // Which notifications fold into the next, decided in place: a
    // notification is a few hundred bytes, and peeking through an iterator
    // moves each one twice more.
    let mut folds_next: Vec<bool> = notifications
        .windows(2)
        .map(|pair| folds_into(&pair[0], &pair[1]))
        .collect();
    folds_next.push(false);
    let mut completes_fold = false;
    for (notification, folds) in notifications.into_iter().zip(folds_next) {
        let json = if never_stored(&notification) {
            None
        } else if folds || completes_fold {
            // A start stored inside its completion's row, or that
            // completion, whose row usually leaves the body to the item's
            // row (`born.rs`): JSON made here would mostly be thrown away.
            // An empty one tells the writer to encode it if it needs it
            // (see `Incoming`).
            Some(String::new())
        } else {
            Some(encode("notification", &notification)?)
        };
        completes_fold = folds;
        incoming.push(Incoming { notification, json });
    }
    Ok(incoming)
}

/// Events about items that no thread stores (`status`); whether the others
/// are stored depends on the thread and is decided by the writer.
fn never_stored(notification: &ServerNotification) -> bool {
    notification
        .carried_item_kind()
        .is_some_and(|kind| !kind.is_persisted(true))
}

/// The record of a thread to create, its `thread/started` encoded, and
/// its creation time.
pub(crate) fn new_thread_record(new: NewThread) -> Result<(ThreadRecord, String, i64), StoreError> {
    let created_at_ms = now_ms();
    let id = new.id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let mut thread = Thread::new(
        id,
        new.model_provider,
        new.cwd,
        created_at_ms.div_euclid(1000),
    );
    thread.cli_version = new.cli_version;
    thread.name = new.name;
    thread.forked_from_id = new.forked_from_id;
    thread.history_owner = Some(new.history_mode);
    thread.model = new.model;
    thread.ephemeral = new.ephemeral;
    // The logged event shows the thread as its creator sees it: loaded
    // and idle. Stored records say `notLoaded` (see `ThreadRecord`).
    let started = ServerNotification::ThreadStarted(ThreadStartedNotification {
        thread: Box::new(Thread {
            status: ThreadStatus::Idle,
            ..thread.clone()
        }),
    });
    let started_json = encode("thread/started", &started)?;
    let record = ThreadRecord {
        thread,
        dev_mode: new.dev_mode,
        archived: false,
        last_seq: 1,
    };
    Ok((record, started_json, created_at_ms))
}

/// Now, in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}
