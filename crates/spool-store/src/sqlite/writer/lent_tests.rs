//! What a thread that streams waits for while another thread's commit is
//! held: a real store on a real file, its next `COMMIT` held at a door
//! (`door.rs`) the way a disk busy with other writes holds its sync.

use std::future::Future;
use std::task::Poll;

use super::door;
use super::test_events::{
    PATIENCE, append, check_logs, complete, delta, end_turn, start, store_with_threads,
};
use crate::{Appended, SqliteStore};

/// A delta of `thread`, answered within [`PATIENCE`]: it waited for
/// nothing of another thread's.
async fn stream_on(store: &SqliteStore, thread: &str, word: &str, why: &str) -> Vec<Appended> {
    tokio::time::timeout(PATIENCE, append(store, thread, delta(thread, word)))
        .await
        .unwrap_or_else(|_| panic!("a delta of `{thread}` waited {why}"))
        .unwrap()
}

/// Thread `a` streams while thread `b` completes its message: `b`'s
/// commit is held, and `b`'s next event, which needs the connection, waits
/// for it; `a`'s deltas are answered all the while, before and after that
/// event. Once the commit goes on, both threads' logs hold what they were
/// answered, in order, seqs gap-free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_commit_holds_up_no_other_threads_deltas() {
    let dir = tempfile::tempdir().unwrap();
    // `a`'s deltas stay in the batch until `b`'s completion commits it.
    let (store, threads) = store_with_threads(dir.path(), 2).await;
    let (a, b) = (threads[0].clone(), threads[1].clone());
    let mut answered_a = append(&store, &a, start(&a)).await.unwrap();
    let mut answered_b = append(&store, &b, start(&b)).await.unwrap();
    answered_a.extend(append(&store, &a, delta(&a, "one ")).await.unwrap());

    let door = door::hold(dir.path(), door::Place::Commit);
    let completion = tokio::spawn({
        let (store, b) = (store.clone(), b.clone());
        async move { append(&store, &b, complete(&b, "")).await }
    });
    let open = door::entered(door, PATIENCE, "`b`'s completion never reached its commit").await;

    let mut text = "one ".to_owned();
    for word in ["two ", "three "] {
        answered_a.extend(stream_on(&store, &a, word, "for `b`'s commit").await);
        text.push_str(word);
    }
    // `b`'s next event waits for the connection; `a` goes on beside it.
    // Polled once, it is in the writer's inbox before `a`'s next delta.
    let mut turn_end = Box::pin(append(&store, &b, end_turn(&b)));
    let first = std::future::poll_fn(|cx| Poll::Ready(turn_end.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "answered before its thread's commit");
    for word in ["four ", "five "] {
        answered_a.extend(stream_on(&store, &a, word, "behind `b`'s next event").await);
        text.push_str(word);
    }
    assert!(!completion.is_finished(), "answered before its commit");

    drop(open);
    answered_b.extend(completion.await.unwrap().unwrap());
    answered_b.extend(turn_end.await.unwrap());
    answered_a.extend(append(&store, &a, complete(&a, &text)).await.unwrap());
    answered_a.extend(append(&store, &a, end_turn(&a)).await.unwrap());
    assert_eq!(answered_a.len(), 2 + 5 + 2);
    check_logs(store, dir.path(), &[(&a, &answered_a), (&b, &answered_b)]).await;
}
