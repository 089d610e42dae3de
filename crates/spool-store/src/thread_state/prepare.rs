//! What every backend does before an append or a creation reaches its
//! writer: checks that need no state, and the encoding, done on the
//! caller's task to keep the writer's work to validation and I/O.

use std::time::{SystemTime, UNIX_EPOCH};

use spool_protocol::{ServerNotification, Thread, ThreadStartedNotification, ThreadStatus};

use super::Incoming;
use crate::born::fold_starts;
use crate::codec::encode;
use crate::error::StoreError;
use crate::types::{NewThread, ThreadRecord, ToAppend};

/// Checks an append before it goes to the writer and encodes its
/// notifications here, on the caller's thread, to keep the writer's work
/// to validation and I/O.
pub(crate) fn prepare_append(
    thread_id: &str,
    notifications: Vec<ServerNotification>,
) -> Result<Vec<Incoming>, StoreError> {
    prepare_entries(thread_id, notifications.into_iter().map(ToAppend::from))
}

/// [`prepare_append`] of entries that may give an item born complete as
/// its completion alone; an index counts such an entry as two (its start
/// and its completion).
pub(crate) fn prepare_entries(
    thread_id: &str,
    entries: impl IntoIterator<Item = ToAppend>,
) -> Result<Vec<Incoming>, StoreError> {
    // Checked as they are folded, in one pass: a burst of deltas is
    // thousands of entries.
    let mut index = 0;
    let mut refused = None;
    let checked = entries.into_iter().map_while(|entry| {
        let width = match &entry {
            ToAppend::Notification(notification) => {
                check(thread_id, index, notification).map(|()| 1)
            }
            ToAppend::BornComplete(completed) if completed.thread_id != thread_id => {
                Err(StoreError::ThreadMismatch {
                    expected: thread_id.to_owned(),
                    got: completed.thread_id.clone(),
                    index,
                    method: "item/started",
                })
            }
            ToAppend::BornComplete(_) => Ok(2),
        };
        match width {
            Ok(width) => {
                index += width;
                Some(entry)
            }
            Err(error) => {
                refused = Some(error);
                None
            }
        }
    });
    let folded = fold_starts(checked);
    match refused {
        Some(error) => Err(error),
        None => encode_entries(folded),
    }
}

/// What no thread accepts: a `thread/started` (a thread is created, not
/// appended to), or a notification of another thread.
fn check(
    thread_id: &str,
    index: usize,
    notification: &ServerNotification,
) -> Result<(), StoreError> {
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
    Ok(())
}

/// The folded notifications, encoded for the writer.
fn encode_entries(folded: Vec<(ServerNotification, bool)>) -> Result<Vec<Incoming>, StoreError> {
    let mut incoming = Vec::with_capacity(folded.len());
    for (notification, born) in folded {
        let json = if never_stored(&notification) {
            None
        } else if born {
            // The row of an item born complete usually leaves the body to
            // the item's row (`born.rs`): JSON made here would mostly be
            // thrown away. The writer encodes it if the row needs it.
            Some(String::new())
        } else {
            Some(encode("notification", &notification)?)
        };
        incoming.push(Incoming {
            notification,
            json,
            born,
        });
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
