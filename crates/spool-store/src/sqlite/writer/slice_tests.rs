//! What a stream waits for while a large batch of many threads' deltas is
//! written: a real store on a real file, the writing held at a door between
//! two of the batch's slices (`door.rs`, `Place::Slice`).

use std::future::Future;
use std::task::Poll;

use spool_protocol::ServerNotification;

use super::door::{self, Place};
use super::slice::SLICE_EVENTS;
use super::test_events::{
    PATIENCE, append, check_logs, complete, delta, end_turn, start, store_with_threads,
};
use crate::options::StoreOptions;
use crate::{Appended, SqliteStore, Store, StoreError};

/// Many deltas of `thread` in one append: more than a slice.
fn burst(thread: &str, word: &str) -> Vec<ServerNotification> {
    (0..SLICE_EVENTS + 44)
        .flat_map(|_| delta(thread, word))
        .collect()
}

/// Threads `a`, `x` and `y` have a slice's worth of deltas each in the
/// batch that `b`'s completion commits. While it is written, held after
/// `a`'s slice, a delta of `a` (written) and one of `y` (still to be
/// written) are sent; both are answered while the writing is held again
/// after `x`'s slice, before `b`'s completion is. The logs then hold
/// exactly what was answered, in order, seqs gap-free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_lets_streams_through_between_its_slices() {
    let dir = tempfile::tempdir().unwrap();
    // The deltas stay in the batch until `b`'s completion commits it.
    let (store, threads) = store_with_threads(dir.path(), 4).await;
    let mut answered: Vec<Vec<Appended>> = Vec::new();
    for thread in &threads {
        answered.push(append(&store, thread, start(thread)).await.unwrap());
    }
    let [a, x, y, b] = [0, 1, 2, 3].map(|at| threads[at].clone());
    let mut texts = vec![String::new(); 4];
    for (at, thread) in [&a, &x, &y].into_iter().enumerate() {
        answered[at].extend(append(&store, thread, burst(thread, "w ")).await.unwrap());
        texts[at] = "w ".repeat(SLICE_EVENTS + 44);
    }

    let first = door::hold(dir.path(), Place::Slice);
    let completion = tokio::spawn({
        let (store, b) = (store.clone(), b.clone());
        async move { append(&store, &b, complete(&b, "")).await }
    });
    let open_first = door::entered(first, PATIENCE, "the batch was not written in slices").await;
    // In the writer's inbox while it is held after `a`'s slice: polled
    // once, an append has been sent.
    let mut late = Vec::new();
    for (at, thread) in [(0, &a), (2, &y)] {
        let mut reply = Box::pin(append(&store, thread, delta(thread, "late ")));
        let first = std::future::poll_fn(|cx| Poll::Ready(reply.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "answered while the writer was held");
        late.push((at, reply));
    }
    let second = door::hold(dir.path(), Place::Slice);
    drop(open_first);
    let open_second = door::entered(second, PATIENCE, "the batch's third slice never came").await;
    for (at, reply) in late {
        let appended = tokio::time::timeout(PATIENCE, reply)
            .await
            .unwrap_or_else(|_| panic!("a delta waited for the whole batch to be written"))
            .unwrap();
        answered[at].extend(appended);
        texts[at].push_str("late ");
    }
    assert!(!completion.is_finished(), "answered before its commit");

    drop(open_second);
    answered[3].extend(completion.await.unwrap().unwrap());
    for (at, thread) in [&a, &x, &y].into_iter().enumerate() {
        answered[at].extend(
            append(&store, thread, complete(thread, &texts[at]))
                .await
                .unwrap(),
        );
    }
    for (at, thread) in threads.iter().enumerate() {
        answered[at].extend(append(&store, thread, end_turn(thread)).await.unwrap());
    }
    let deltas = |at: usize| answered[at].len() - 4;
    assert_eq!(
        [deltas(0), deltas(1), deltas(2), deltas(3)],
        [SLICE_EVENTS + 45, SLICE_EVENTS + 44, SLICE_EVENTS + 45, 0]
    );
    let logs: Vec<_> = threads.iter().zip(&answered).collect();
    check_logs(store, dir.path(), &logs).await;
}

/// A slice that cannot be written (here: its table renamed away at the
/// door, inside the batch's transaction) rolls the whole batch back and
/// fails the next one too: `b`'s completion is refused, and the delta of
/// `a` answered between the slices is lost with the rest. The store goes
/// on from what was committed, and every seq a client was given is named
/// lost, never given to another event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_that_fails_fails_its_batch_and_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (store, threads) = store_with_threads(dir.path(), 4).await;
    for thread in &threads {
        append(&store, thread, start(thread)).await.unwrap();
    }
    let [a, x, y, b] = [0, 1, 2, 3].map(|at| threads[at].clone());
    let mut given = Vec::new();
    for thread in [&a, &x, &y] {
        let burst = append(&store, thread, burst(thread, "w ")).await.unwrap();
        given.push((
            thread.clone(),
            burst.last().and_then(Appended::event).unwrap().seq,
        ));
    }

    let sabotage = |conn: &rusqlite::Connection| {
        conn.execute_batch("ALTER TABLE events RENAME TO events_gone")
            .unwrap();
    };
    let first = door::hold_and(dir.path(), Place::Slice, sabotage);
    let completion = tokio::spawn({
        let (store, b) = (store.clone(), b.clone());
        async move { append(&store, &b, complete(&b, "")).await }
    });
    let open_first = door::entered(first, PATIENCE, "the batch was not written in slices").await;
    let mut late = Box::pin(append(&store, &a, delta(&a, "late ")));
    let polled = std::future::poll_fn(|cx| Poll::Ready(late.as_mut().poll(cx))).await;
    assert!(polled.is_pending(), "answered while the writer was held");
    drop(open_first);
    let late = late.await.unwrap();
    given.push((a.clone(), late[0].event().unwrap().seq));
    let refused = completion.await.unwrap();
    assert!(matches!(refused, Err(StoreError::Commit(_))), "{refused:?}");

    for thread in &threads {
        append(&store, thread, complete(thread, "")).await.unwrap();
        append(&store, thread, end_turn(thread)).await.unwrap();
    }
    store.close().await.unwrap();
    drop(store);
    let store = SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
    for thread in &threads {
        let events = store.events_after(thread, 1, usize::MAX).await.unwrap();
        let methods: Vec<&str> = events.iter().map(|event| event.payload.method()).collect();
        assert_eq!(
            methods,
            [
                "turn/started",
                "item/started",
                "thread/eventsLost",
                "item/completed",
                "turn/completed"
            ],
            "thread {thread}"
        );
        let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
        let Some(ServerNotification::ThreadEventsLost(lost)) = events.get(2).map(|e| &e.payload)
        else {
            panic!("thread {thread}: {methods:?}");
        };
        assert_eq!(lost.from_seq, seqs[1] + 1, "thread {thread}");
        assert_eq!(seqs[2], lost.to_seq + 1, "thread {thread}");
        for (of, seq) in &given {
            if of == thread {
                assert!(
                    lost.from_seq <= *seq && *seq <= lost.to_seq,
                    "seq {seq} of {thread}"
                );
            }
        }
    }
    store.close().await.unwrap();
}
