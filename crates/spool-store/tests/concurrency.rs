//! Many appenders at once, on several threads: every thread's seqs stay
//! gap-free and every append gets the seqs it was given.

mod common;

use std::collections::BTreeSet;

use common::backend::TestStore;
use common::*;
use spool_core::{ThreadReducer, View};
use spool_store::{Durability, Store, StoreOptions};

const THREADS: usize = 4;
const TASKS_PER_THREAD: usize = 6;
const ITEMS_PER_TASK: usize = 15;

on_every_backend!(concurrent_appenders_get_gap_free_seqs_per_thread with fast_commits);

fn fast_commits() -> StoreOptions {
    StoreOptions {
        // fsyncs would only slow the test; ordering is what is checked.
        durability: Durability::Normal,
        ..StoreOptions::default()
    }
}

async fn concurrent_appenders_get_gap_free_seqs_per_thread(ts: TestStore) {
    let store = ts.store.clone();
    let mut threads = Vec::new();
    for _ in 0..THREADS {
        let t = new_thread(&store, false).await;
        store
            .append(&t, vec![turn_started(&t, "turn-1")])
            .await
            .unwrap();
        threads.push(t);
    }

    let mut tasks = Vec::new();
    for t in &threads {
        for task in 0..TASKS_PER_THREAD {
            let store = store.clone();
            let t = t.clone();
            tasks.push(tokio::spawn(async move {
                let mut seqs_seen = Vec::new();
                for n in 0..ITEMS_PER_TASK {
                    let item = format!("task{task}-item{n}");
                    // Deltas and lifecycle events in separate appends, so
                    // appends of different tasks interleave.
                    let mut events = streamed_message(&t, "turn-1", &item, "a b c");
                    let completion = events.pop().unwrap();
                    let deltas = events.split_off(1);
                    for batch in [events, deltas, vec![completion]] {
                        let appended = store.append(&t, batch).await.unwrap();
                        let got = seqs(&appended);
                        assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "{got:?}");
                        seqs_seen.extend(got);
                    }
                }
                (t, seqs_seen)
            }));
        }
    }
    let mut per_thread: std::collections::HashMap<String, BTreeSet<u64>> = Default::default();
    for task in tasks {
        let (t, seqs_seen) = task.await.unwrap();
        let set = per_thread.entry(t).or_default();
        for seq in seqs_seen {
            assert!(set.insert(seq), "seq {seq} given twice");
        }
    }
    store.flush().await.unwrap();

    // Per item: started, three deltas, completed.
    let per_task_events = (ITEMS_PER_TASK * 5) as u64;
    let expected_last = 2 + per_task_events * TASKS_PER_THREAD as u64;
    for t in &threads {
        // Everyone's seqs together are exactly 3..=last (1 and 2 are the
        // thread's start and its turn).
        let given: Vec<u64> = per_thread[t].iter().copied().collect();
        assert_eq!(given, (3..=expected_last).collect::<Vec<_>>());

        let events = store.events_after(t, 0, usize::MAX).await.unwrap();
        assert_eq!(events.len() as u64, expected_last);
        let mut replayed = ThreadReducer::new(t);
        replayed.apply_all(&events).unwrap();
        let items = store.items(t, View::All).await.unwrap();
        assert_eq!(items.len(), TASKS_PER_THREAD * ITEMS_PER_TASK);
        assert_eq!(replayed.items(), items.as_slice());
        assert!(
            items
                .iter()
                .all(|r| r.item == agent_message(r.item.id(), "a b c"))
        );
    }
}
