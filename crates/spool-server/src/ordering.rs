//! Per-watcher ordering: every logged event of a thread reaches a watcher
//! once and in seq order, whatever path it travelled (see
//! [`forward_in_order`]).

use spool_protocol::{ServerNotification, ThreadClosedNotification};
use spool_store::{Appended, Store};
use tokio::sync::mpsc;

use crate::hub::Delivery;
use crate::outbox::{Room, max_live_backlog};

/// Delivers a watcher's live events in seq order, each once: what the
/// replay already sent (at or below `last`) is skipped, and when an event
/// arrives ahead of one not delivered yet (events logged outside a run —
/// a steer, a rename, a resolution — travel by another path than the run's
/// own), the missing ones are read from the log first. With no replay the
/// first live event sets where delivery starts.
///
/// When the log cannot be read to fill a gap, delivery stops there rather
/// than skip an event: the watcher is sent `thread/closed` (it resumes by
/// cursor, from the last seq it got) and nothing more of the thread.
pub(crate) async fn forward_in_order(
    store: &impl Store,
    thread_id: &str,
    mut last: Option<u64>,
    live: &mut mpsc::UnboundedReceiver<Delivery>,
    out: &mpsc::UnboundedSender<Delivery>,
    room: &Room,
) {
    let max_backlog = max_live_backlog();
    while let Some(delivery) = live.recv().await {
        // Paced by the client; a client that makes no room while events
        // pile up is closed (it resumes by cursor, see `outbox.rs`).
        if !wait_for_room(room, live, max_backlog).await {
            return;
        }
        let seq = match &delivery {
            Delivery::Event(event) => event.seq(),
            Delivery::Request(_) => None,
        };
        if let (Some(seq), Some(delivered)) = (seq, last) {
            if seq <= delivered {
                continue;
            }
            if seq > delivered + 1 {
                // Everything before `seq` was appended before it: once
                // flushed it is all readable.
                let read = async {
                    store.flush().await?;
                    store
                        .events_after(thread_id, delivered, (seq - delivered - 1) as usize)
                        .await
                };
                let missing = match read.await {
                    Ok(missing) => missing,
                    Err(error) => {
                        tracing::warn!(%thread_id, %error, after = delivered,
                            "cannot read the log to fill a gap: closing this watcher");
                        let _ = out.send(closed_notice(thread_id));
                        return;
                    }
                };
                for event in missing.into_iter().filter(|e| e.seq < seq) {
                    if out.send(Delivery::Event(Appended::Logged(event))).is_err() {
                        return;
                    }
                    room.sent();
                }
            }
        }
        if let Some(seq) = seq {
            last = Some(seq);
        }
        if out.send(delivery).is_err() {
            return;
        }
        room.sent();
    }
}

/// `thread/closed`, to a watcher whose events cannot go on without a gap:
/// it resumes by cursor.
pub(crate) fn closed_notice(thread_id: &str) -> Delivery {
    let closed = ServerNotification::ThreadClosed(ThreadClosedNotification {
        thread_id: thread_id.to_owned(),
    });
    Delivery::Event(Appended::Transient(closed))
}

/// Waits until the client has room; false (and the client is closed) if
/// meanwhile more than `max_backlog` live events pile up behind it.
async fn wait_for_room(
    room: &Room,
    live: &mpsc::UnboundedReceiver<Delivery>,
    max_backlog: usize,
) -> bool {
    if room.has_room() {
        return true;
    }
    loop {
        if live.len() > max_backlog {
            room.overflow();
            return false;
        }
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), room.wait());
        if waited.await.is_ok() {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_protocol::*;
    use spool_store::{NewThread, SqliteStore, StoreOptions};

    /// A store in a temporary folder holding one thread.
    async fn store_with_thread() -> (tempfile::TempDir, SqliteStore, String) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
        let thread = store
            .create_thread(NewThread::new("test", "/tmp"))
            .await
            .unwrap()
            .thread
            .id;
        (dir, store, thread)
    }

    fn turn_event(thread: &str, turn: &str, started: bool) -> ServerNotification {
        let status = match started {
            true => TurnStatus::InProgress,
            false => TurnStatus::Completed,
        };
        let turn = Turn::new(turn.to_owned(), status);
        match started {
            true => ServerNotification::TurnStarted(TurnStartedNotification {
                thread_id: thread.to_owned(),
                turn,
            }),
            false => ServerNotification::TurnCompleted(TurnCompletedNotification {
                thread_id: thread.to_owned(),
                turn,
            }),
        }
    }

    #[tokio::test]
    async fn events_arriving_out_of_order_are_delivered_in_seq_order_once() {
        let (_dir, store, thread) = store_with_thread().await;
        let mut logged = Vec::new();
        for n in 0..3 {
            let turn = format!("turn-{n}");
            logged.extend(
                store
                    .append(
                        &thread,
                        vec![
                            turn_event(&thread, &turn, true),
                            turn_event(&thread, &turn, false),
                        ],
                    )
                    .await
                    .unwrap(),
            );
        }
        // seqs 2..=7 logged; they arrive as 2, 5, 3, 7, 2 (again), 6.
        let by_seq = |seq: u64| {
            let event = logged
                .iter()
                .find(|a| a.seq() == Some(seq))
                .unwrap()
                .clone();
            Delivery::Event(event)
        };
        let (live_tx, mut live_rx) = mpsc::unbounded_channel();
        for seq in [2, 5, 3, 7, 2, 6] {
            live_tx.send(by_seq(seq)).unwrap();
        }
        drop(live_tx);
        let (out_tx, mut out_rx) = mpsc::unbounded_channel();
        forward_in_order(
            &store,
            &thread,
            Some(1),
            &mut live_rx,
            &out_tx,
            &Room::unbounded(),
        )
        .await;
        drop(out_tx);
        let mut delivered = Vec::new();
        while let Some(Delivery::Event(event)) = out_rx.recv().await {
            delivered.push(event.seq().unwrap());
        }
        assert_eq!(delivered, [2, 3, 4, 5, 6, 7]);
    }

    #[tokio::test]
    async fn a_gap_the_log_cannot_fill_closes_the_watcher_instead_of_skipping() {
        let (_dir, store, thread) = store_with_thread().await;
        let logged = store
            .append(
                &thread,
                vec![
                    turn_event(&thread, "t", true),
                    turn_event(&thread, "t", false),
                ],
            )
            .await
            .unwrap();
        // The store is gone: seq 2 can no longer be read to fill the gap.
        store.close().await.unwrap();
        let (live_tx, mut live_rx) = mpsc::unbounded_channel();
        live_tx.send(Delivery::Event(logged[1].clone())).unwrap();
        drop(live_tx);
        let (out_tx, mut out_rx) = mpsc::unbounded_channel();
        forward_in_order(
            &store,
            &thread,
            Some(1),
            &mut live_rx,
            &out_tx,
            &Room::unbounded(),
        )
        .await;
        drop(out_tx);
        let mut methods = Vec::new();
        while let Some(Delivery::Event(event)) = out_rx.recv().await {
            methods.push(event.notification().method());
        }
        assert_eq!(methods, ["thread/closed"], "seq 3 is not sent past the gap");
    }
}
