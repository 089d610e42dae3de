//! The recovery rule: only an open that finds no other handle on the store
//! recovers (see `spool_store`'s `recovery` module). A turn some live
//! handle may be running is never closed behind its back.

use spool_core::View;
use spool_protocol::{ItemStatus, ServerNotification, TurnStatus};
use spool_store::{AnyStore, Store};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::child::{Config, HELD_THREAD, Mode, Target};
use crate::common::{agent_delta, agent_message, new_thread, started, turn_started};
use crate::parent::{Acks, close, open, spawn_child};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_handle_in_the_same_process_recovers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Target::File(dir.path().join("spool.db"));
    let first = open(&db).await;
    let t = new_thread(&first, false).await;
    first
        .append(
            &t,
            vec![
                turn_started(&t, "turn-1"),
                started(&t, "turn-1", agent_message("a1", "")),
                agent_delta(&t, "turn-1", "a1", "kept"),
            ],
        )
        .await
        .unwrap();

    let second = open(&db).await;
    assert_in_progress(&second, &t, 4).await;
    close(second).await;
    // The first handle's turn goes on: nothing was appended behind it.
    let appended = first
        .append(&t, vec![agent_delta(&t, "turn-1", "a1", " going")])
        .await
        .unwrap();
    assert_eq!(appended[0].seq(), Some(5));
    close(first).await;

    // No handle left: nobody can be running the turn, so it is recovered.
    let third = open(&db).await;
    assert_recovered(&third, &t, 5, "kept going", Closed::Cleanly).await;
    close(third).await;
}

/// The same across processes: a child holds a turn open; a handle opened
/// while it lives recovers nothing, and neither does one opened after it
/// died while that first handle is still open; once every handle is gone,
/// the next open recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_process_keeps_its_turn_and_a_dead_one_loses_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        db: Target::File(dir.path().join("spool.db")),
        mode: Mode::Hold,
        seed: 0,
        threads: 1,
        durability: spool_store::Durability::Full,
        delta_commit_delay: std::time::Duration::from_millis(5),
    };
    let mut child = spawn_child(&config);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acks = Acks::default();
    while !acks.ready {
        assert!(acks.read_line(&mut lines).await, "the child ended early");
    }
    assert_eq!(acks.durable.get(HELD_THREAD), Some(&4));

    let observer = open(&config.db).await;
    assert_in_progress(&observer, HELD_THREAD, 4).await;

    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let late = open(&config.db).await;
    assert_in_progress(&late, HELD_THREAD, 4).await;
    close(late).await;
    close(observer).await;

    let store = open(&config.db).await;
    assert_recovered(&store, HELD_THREAD, 4, "kept", Closed::Killed).await;
    close(store).await;
}

async fn assert_in_progress(store: &AnyStore, thread: &str, last_seq: u64) {
    let record = store.thread(thread).await.unwrap().unwrap();
    assert_eq!(record.last_seq, last_seq, "nothing was appended");
    let turns = store.turns(thread).await.unwrap();
    assert_eq!(turns[0].status, TurnStatus::InProgress);
    let items = store.items(thread, View::All).await.unwrap();
    assert_eq!(items[0].envelope.status, ItemStatus::InProgress);
}

/// How the last process holding the turn went away.
#[derive(PartialEq)]
enum Closed {
    /// Its store was closed: every seq it handed out is committed.
    Cleanly,
    /// Killed while its turn could stream: the seqs it had reserved are
    /// voided by a `thread/eventsLost` right after them.
    Killed,
}

/// The open item and turn were closed by two events after `last_seq`, the
/// item keeping its committed text.
async fn assert_recovered(
    store: &AnyStore,
    thread: &str,
    last_seq: u64,
    text: &str,
    closed: Closed,
) {
    let mut events = store.events_after(thread, last_seq, 100).await.unwrap();
    if closed == Closed::Killed {
        let lost = events.remove(0);
        let ServerNotification::ThreadEventsLost(range) = &lost.payload else {
            panic!("expected thread/eventsLost first, got {lost:?}");
        };
        assert_eq!(range.from_seq, last_seq + 1);
        assert_eq!(lost.seq, range.to_seq + 1, "logged right after the range");
    }
    let methods: Vec<_> = events.iter().map(|e| e.payload.method()).collect();
    assert_eq!(methods, ["item/completed", "turn/completed"]);
    let ServerNotification::TurnCompleted(completed) = &events[1].payload else {
        unreachable!("checked above");
    };
    assert_eq!(completed.turn.status, TurnStatus::Interrupted);
    let items = store.items(thread, View::All).await.unwrap();
    assert_eq!(items[0].item, agent_message("a1", text));
    assert_eq!(items[0].envelope.status, ItemStatus::Incomplete);
    let turns = store.turns(thread).await.unwrap();
    assert_eq!(turns[0].status, TurnStatus::Interrupted);
}
