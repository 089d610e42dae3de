//! Removing items: `pop_item` (atomic, also across handles and stores on
//! one file) and `clear`, as `item/removed` / `thread/cleared` in the log
//! with the projection rows deleted and every view following.

mod common;
mod session_support;

use std::collections::HashSet;

use common::backend::TestStore;
use common::*;
use serde_json::Value;
use session_support::*;
use spool_core::View;
use spool_core::llm::LlmViewOptions;
use spool_protocol::{ItemRemovedNotification, ServerNotification};
use spool_store::{AnyStore, Session, Store, StoreError};

async fn session(store: &AnyStore, id: &str) -> Session<AnyStore> {
    Session::open(store.clone(), id)
        .await
        .expect("open session")
}

fn count(dir: &std::path::Path, sql: &str, thread_id: &str) -> i64 {
    raw(dir)
        .query_row(sql, [thread_id], |row| row.get(0))
        .expect("count")
}

fn item_rows(dir: &std::path::Path, thread_id: &str) -> i64 {
    count(
        dir,
        "SELECT count(*) FROM items WHERE thread_id = ?1 AND NOT is_turn",
        thread_id,
    )
}

fn events_named(dir: &std::path::Path, thread_id: &str, method: &str) -> i64 {
    raw(dir)
        .query_row(
            "SELECT count(*) FROM events WHERE thread_id = ?1 AND method = ?2",
            [thread_id, method],
            |row| row.get(0),
        )
        .expect("count events")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_returns_the_newest_and_removes_it_also_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Value> = (0..6).map(sdk_item).collect();
    {
        let store = AnyStore::from(open(dir.path()));
        let s = session(&store, "conv-pop").await;
        assert_eq!(s.pop_item().await.unwrap(), None);
        s.add_items(items[..3].to_vec()).await.unwrap();
        s.add_items(items[3..].to_vec()).await.unwrap();
        assert_eq!(s.pop_item().await.unwrap(), Some(items[5].clone()));
        assert_eq!(s.get_items(None).await.unwrap(), items[..5]);
        assert_eq!(s.pop_item().await.unwrap(), Some(items[4].clone()));
    }
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-pop").await;
    assert_eq!(s.get_items(None).await.unwrap(), items[..4]);
    assert_eq!(s.pop_item().await.unwrap(), Some(items[3].clone()));
    assert_eq!(s.pop_item().await.unwrap(), Some(items[2].clone()));
    // Adding after popping continues from what is left.
    s.add_items(vec![user("again")]).await.unwrap();
    assert_eq!(
        s.get_items(None).await.unwrap(),
        [items[0].clone(), items[1].clone(), user("again")]
    );
    assert_eq!(s.pop_item().await.unwrap(), Some(user("again")));
    assert_eq!(s.pop_item().await.unwrap(), Some(items[1].clone()));
    assert_eq!(s.pop_item().await.unwrap(), Some(items[0].clone()));
    assert_eq!(s.pop_item().await.unwrap(), None);
    assert_eq!(s.get_items(None).await.unwrap(), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_rows_go_while_the_log_keeps_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-rows").await;
    s.add_items((0..4).map(sdk_item).collect()).await.unwrap();
    assert_eq!(item_rows(dir.path(), "conv-rows"), 4);
    s.pop_item().await.unwrap();
    assert_eq!(item_rows(dir.path(), "conv-rows"), 3);
    assert_eq!(events_named(dir.path(), "conv-rows", "item/removed"), 1);
    s.clear().await.unwrap();
    assert_eq!(item_rows(dir.path(), "conv-rows"), 0);
    assert_eq!(events_named(dir.path(), "conv-rows", "thread/cleared"), 1);
    // Each item was born complete: one row of the log holds its start and
    // completion.
    assert_eq!(events_named(dir.path(), "conv-rows", "item/recorded"), 4);
    assert_eq!(events_named(dir.path(), "conv-rows", "item/completed"), 0);
    // The log replays to the projection: nothing is left.
    let reducer = store.reducer("conv-rows").await.unwrap();
    assert!(reducer.items().is_empty());
    let mut replayed = spool_core::ThreadReducer::new("conv-rows");
    let events = store.events_after("conv-rows", 0, 1_000).await.unwrap();
    replayed.apply_all(&events).unwrap();
    assert!(replayed.items().is_empty());
    assert_eq!(replayed.turns().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_then_add_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-clear").await;
    s.clear().await.unwrap(); // clearing an empty session is fine
    s.add_items((0..10).map(sdk_item).collect()).await.unwrap();
    s.clear().await.unwrap();
    assert_eq!(s.get_items(None).await.unwrap(), Vec::<Value>::new());
    assert_eq!(s.pop_item().await.unwrap(), None);
    s.add_items(vec![user("fresh"), assistant("msg_9", "start")])
        .await
        .unwrap();
    assert_eq!(
        s.get_items(None).await.unwrap(),
        [user("fresh"), assistant("msg_9", "start")]
    );
    assert_eq!(
        s.get_items(Some(1)).await.unwrap(),
        [assistant("msg_9", "start")]
    );
    drop((s, store));
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-clear").await;
    assert_eq!(
        s.get_items(None).await.unwrap(),
        [user("fresh"), assistant("msg_9", "start")]
    );
}

on_every_backend!(
    views_follow_removals,
    an_item_in_progress_is_not_popped_and_a_turn_in_progress_is_not_cleared,
);

async fn views_follow_removals(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-views").await;
    s.add_items(vec![user("q1"), assistant("msg_1", "a1")])
        .await
        .unwrap();
    s.add_items(vec![user("q2"), call("c"), output("c")])
        .await
        .unwrap();
    let all = store.items("conv-views", View::All).await.unwrap();
    assert_eq!(all.len(), 5);

    // Popping the output leaves its call unanswered: the model view drops
    // the call (pairing), the item views still list it.
    assert_eq!(s.pop_item().await.unwrap(), Some(output("c")));
    let llm = store
        .llm_view("conv-views", LlmViewOptions::default())
        .await
        .unwrap();
    let sent: Vec<Value> = llm
        .input
        .iter()
        .map(|item| serde_json::to_value(item).unwrap())
        .collect();
    assert_eq!(sent, [user("q1"), assistant("msg_1", "a1"), user("q2")]);
    assert_eq!(store.items("conv-views", View::All).await.unwrap().len(), 4);
    assert_eq!(
        store.items("conv-views", View::Client).await.unwrap().len(),
        4
    );
    assert_eq!(store.items("conv-views", View::Llm).await.unwrap().len(), 4);
    let turns = store.turns("conv-views").await.unwrap();
    assert_eq!(turns.len(), 2);

    s.clear().await.unwrap();
    for view in [View::All, View::Client, View::Llm] {
        assert!(store.items("conv-views", view).await.unwrap().is_empty());
    }
    let llm = store
        .llm_view("conv-views", LlmViewOptions::default())
        .await
        .unwrap();
    assert!(llm.input.is_empty());
    assert_eq!((llm.turns_included, llm.turns_omitted), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pops_never_return_the_same_item() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::from(open(dir.path()));
    let items: Vec<Value> = (0..60).map(sdk_item).collect();
    let writer = session(&store, "conv-race").await;
    writer.add_items(items.clone()).await.unwrap();

    // Two handles (sessions on clones of the store), many pops each, and
    // adds racing them.
    let handles = [
        session(&store, "conv-race").await,
        session(&store.clone(), "conv-race").await,
    ];
    let mut tasks = Vec::new();
    for (n, handle) in handles.iter().cycle().take(8).enumerate() {
        let handle = handle.clone();
        tasks.push(tokio::spawn(async move {
            let mut popped = Vec::new();
            for round in 0..10 {
                if round % 5 == 4 {
                    handle
                        .add_items(vec![user(&format!("extra {n} {round}"))])
                        .await
                        .unwrap();
                }
                if let Some(item) = handle.pop_item().await.unwrap() {
                    popped.push(item);
                }
            }
            popped
        }));
    }
    let mut popped = Vec::new();
    for task in tasks {
        popped.extend(task.await.unwrap());
    }
    let left = writer.get_items(None).await.unwrap();
    let seen: HashSet<String> = popped.iter().map(Value::to_string).collect();
    assert_eq!(seen.len(), popped.len(), "an item was popped twice");
    // Every item is either popped or left, never both.
    for item in &left {
        assert!(!seen.contains(&item.to_string()));
    }
    assert_eq!(popped.len() + left.len(), items.len() + 16);
    assert_eq!(item_rows(dir.path(), "conv-race") as usize, left.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pops_through_two_stores_on_one_file_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let first = AnyStore::from(open(dir.path()));
    let second = AnyStore::from(open(dir.path()));
    let items: Vec<Value> = (0..40).map(sdk_item).collect();
    session(&first, "conv-two")
        .await
        .add_items(items.clone())
        .await
        .unwrap();

    let mut tasks = Vec::new();
    for store in [first.clone(), second.clone(), first.clone(), second.clone()] {
        let s = session(&store, "conv-two").await;
        tasks.push(tokio::spawn(async move {
            let mut popped = Vec::new();
            for _ in 0..10 {
                match s.pop_item().await {
                    Ok(Some(item)) => popped.push(item),
                    Ok(None) => {}
                    // The other store's writer holding the file's write
                    // lock past the busy timeout is the only acceptable
                    // failure; it must not hand out an item.
                    Err(StoreError::Sqlite(_) | StoreError::Commit(_)) => {}
                    Err(other) => panic!("{other}"),
                }
            }
            popped
        }));
    }
    let mut popped = Vec::new();
    for task in tasks {
        popped.extend(task.await.unwrap());
    }
    let seen: HashSet<String> = popped.iter().map(Value::to_string).collect();
    assert_eq!(seen.len(), popped.len(), "an item was popped twice");
    let left = session(&second, "conv-two")
        .await
        .get_items(None)
        .await
        .unwrap();
    assert_eq!(popped.len() + left.len(), items.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_item_compacted_out_of_the_writer_is_read_back() {
    // 100 one-item turns: the writer's reducer long dropped the early,
    // closed items; removing one by id goes through the table.
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-old").await;
    for n in 0..100 {
        s.add_items(vec![sdk_item(n)]).await.unwrap();
    }
    let records = store.items("conv-old", View::All).await.unwrap();
    let old = &records[3];
    let remove = |record: &spool_core::ItemRecord| {
        ServerNotification::ItemRemoved(ItemRemovedNotification {
            thread_id: "conv-old".into(),
            turn_id: record.turn_id.clone(),
            item_id: record.item.id().into(),
        })
    };
    store.append("conv-old", vec![remove(old)]).await.unwrap();
    let expected: Vec<Value> = (0..100).filter(|&n| n != 3).map(sdk_item).collect();
    assert_eq!(s.get_items(None).await.unwrap(), expected);
    // Removing it again is refused, as an unknown item, in the same batch
    // and after it.
    let error = store
        .append("conv-old", vec![remove(&records[5]), remove(&records[5])])
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::Refused { index: 1, .. }),
        "{error}"
    );
    let error = store
        .append("conv-old", vec![remove(old)])
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::Refused { index: 0, .. }),
        "{error}"
    );
    // The refused append stored nothing; the store goes on.
    assert_eq!(s.get_items(None).await.unwrap(), expected);
    assert_eq!(item_rows(dir.path(), "conv-old"), 99);
    s.add_items(vec![user("after")]).await.unwrap();
    assert_eq!(s.pop_item().await.unwrap(), Some(user("after")));
}

async fn an_item_in_progress_is_not_popped_and_a_turn_in_progress_is_not_cleared(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-open").await;
    s.add_items(vec![user("before")]).await.unwrap();
    // The runtime is streaming an answer into the same thread.
    let t = "conv-open";
    store
        .append(
            t,
            vec![
                turn_started(t, "turn-live"),
                started(t, "turn-live", agent_message("a-live", "")),
                agent_delta(t, "turn-live", "a-live", "partial"),
            ],
        )
        .await
        .unwrap();
    let error = s.pop_item().await.unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
    let error = s.clear().await.unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
    // Nothing changed, and the thread goes on once the turn is done.
    store
        .append(
            t,
            vec![
                completed(t, "turn-live", agent_message("a-live", "partial answer")),
                turn_completed(t, "turn-live"),
            ],
        )
        .await
        .unwrap();
    let popped = s.pop_item().await.unwrap().unwrap();
    assert_eq!(popped["role"], "assistant");
    assert_eq!(popped["content"][0]["text"], "partial answer");
    assert_eq!(s.pop_item().await.unwrap(), Some(user("before")));
    s.clear().await.unwrap();
    assert_eq!(s.get_items(None).await.unwrap(), Vec::<Value>::new());
}
