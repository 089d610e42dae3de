//! `Store::events_after_each`: what a follower of many threads reads at
//! once is, thread by thread, what `events_after` gives.

mod common;

use common::backend::TestStore;
use common::*;
use spool_store::Store;

on_every_backend!(each_thread_gets_what_events_after_gives_it);

async fn each_thread_gets_what_events_after_gives_it(ts: TestStore) {
    let store = ts.store.clone();
    let mut threads = Vec::new();
    for deltas in [5, 0, 12] {
        let thread = new_thread(&store, false).await;
        start_message(&store, &thread, "u1", "m1").await;
        for i in 0..deltas {
            store
                .append(
                    &thread,
                    vec![agent_delta(&thread, "u1", "m1", &format!("d{i} "))],
                )
                .await
                .unwrap();
        }
        threads.push(thread);
    }
    store.flush().await.unwrap();

    let tails = vec![
        (threads[0].clone(), 0),
        (threads[1].clone(), 2),
        ("no-such-thread".to_owned(), 0),
        (threads[2].clone(), 4),
        (threads[0].clone(), 6),
    ];
    for limit in [1, 3, 500] {
        let each = store.events_after_each(&tails, limit).await.unwrap();
        assert_eq!(each.len(), tails.len(), "{}", ts.backend());
        for ((thread_id, after), got) in tails.iter().zip(&each) {
            // An unknown thread is an error here, and nothing there.
            let expected = store
                .events_after(thread_id, *after, limit)
                .await
                .unwrap_or_default();
            assert_eq!(
                got,
                &expected,
                "{} {thread_id} after {after} limit {limit}",
                ts.backend()
            );
        }
        assert!(each[2].is_empty(), "an unknown thread gives nothing");
        assert!(
            !each[3].is_empty() && each[3].len() <= limit,
            "{}",
            ts.backend()
        );
        assert!(each[4].iter().all(|event| event.seq > 6));
    }
    assert!(store.events_after_each(&[], 10).await.unwrap().is_empty());
}
