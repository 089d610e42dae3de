//! What every backend does before an append or a creation reaches its
//! writer: checks that need no state, and the encoding, done on the
//! caller's task to keep the writer's work to validation and I/O.

use std::time::{SystemTime, UNIX_EPOCH};

use spool_protocol::{ServerNotification, Thread, ThreadStartedNotification, ThreadStatus};

use super::Incoming;
use crate::born::{folds_into, may_leave_body};
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
///
/// One pass that checks, folds (`born::folds_into`) and
/// encodes, so each notification is moved once on its way to the writer:
/// a notification is ~440 bytes, and a 100-item `add_items` moved each
/// through three vectors before (~2k instructions an item, callgrind). A
/// notification waits unencoded in `held` until the next entry shows
/// whether it is a start that folds into it.
pub(crate) fn prepare_entries(
    thread_id: &str,
    entries: impl IntoIterator<Item = ToAppend>,
) -> Result<Vec<Incoming>, StoreError> {
    let entries = entries.into_iter();
    let (at_least, at_most) = entries.size_hint();
    let mut incoming = Vec::with_capacity(at_most.unwrap_or(at_least));
    let mut held: Option<ServerNotification> = None;
    let mut index = 0;
    for entry in entries {
        match entry {
            ToAppend::BornComplete(completed) => {
                if completed.thread_id != thread_id {
                    return Err(StoreError::ThreadMismatch {
                        expected: thread_id.to_owned(),
                        got: completed.thread_id,
                        index,
                        method: "item/started",
                    });
                }
                index += 2;
                if let Some(last) = held.take() {
                    incoming.push(prepared(last, false)?);
                }
                incoming.push(prepared(
                    ServerNotification::ItemCompleted(completed),
                    true,
                )?);
            }
            ToAppend::Notification(notification) => {
                check(thread_id, index, &notification)?;
                index += 1;
                match held.take() {
                    // The start the completion stands for is left out.
                    Some(last) if folds_into(&last, &notification) => {
                        incoming.push(prepared(notification, true)?);
                    }
                    Some(last) => {
                        incoming.push(prepared(last, false)?);
                        held = Some(notification);
                    }
                    None => held = Some(notification),
                }
            }
        }
    }
    if let Some(last) = held {
        incoming.push(prepared(last, false)?);
    }
    Ok(incoming)
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

/// A checked notification, encoded for the writer; `born`: the completion
/// of an item born complete, standing for its start too.
fn prepared(notification: ServerNotification, born: bool) -> Result<Incoming, StoreError> {
    let json = if never_stored(&notification) {
        None
    } else if born || may_leave_body(&notification) {
        // The row of an item born complete, or of a turn's start or
        // completion, usually leaves the body to the item's or the turn's
        // row (`born.rs`): JSON made here would mostly be thrown away. The
        // writer encodes it if the row needs it.
        Some(String::new())
    } else {
        Some(encode("notification", &notification)?)
    };
    Ok(Incoming {
        notification,
        json,
        born,
    })
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
