//! SQLite keeps a thread's turns as rows of `items`, each under its own
//! ordinal among the thread's items (`src/sqlite/keys.rs`): a turn's row
//! sits just before its first item, readers keep the rows of their kind,
//! and a turn and an item of a thread may still have the same id.

mod common;

use common::*;
use spool_core::View;
use spool_store::Store;

/// `(is_turn, item_id)` of every row of `items` of `thread`, in key order.
fn rows_in_key_order(dir: &std::path::Path, thread: &str) -> Vec<(i64, String)> {
    raw(dir)
        .prepare("SELECT is_turn, item_id FROM items WHERE thread_id = ?1 ORDER BY pos")
        .unwrap()
        .query_map([thread], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A finished turn `turn` of thread `t` with one agent message `item`.
fn turn_with_message(t: &str, turn: &str, item: &str) -> Vec<spool_protocol::ServerNotification> {
    let message = agent_message(item, "hello");
    vec![
        turn_started(t, turn),
        started(t, turn, message.clone()),
        completed(t, turn, message),
        turn_completed(t, turn),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_turn_row_sits_before_its_items() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let session = spool_store::Session::open(store.clone(), "s1")
        .await
        .unwrap();
    let user = |text: &str| serde_json::json!({"role": "user", "content": text});
    session.add_items(vec![user("a"), user("b")]).await.unwrap();
    session.add_items(vec![user("c")]).await.unwrap();
    store.close().await.unwrap();

    let kinds: Vec<i64> = rows_in_key_order(dir.path(), "s1")
        .into_iter()
        .map(|(is_turn, _)| is_turn)
        .collect();
    assert_eq!(kinds, [1, 0, 0, 1, 0]);
    let store = open(dir.path());
    let session = spool_store::Session::open(store.clone(), "s1")
        .await
        .unwrap();
    let texts: Vec<String> = session
        .get_items(None)
        .await
        .unwrap()
        .iter()
        .map(|item| item["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["a", "b", "c"]);
    assert_eq!(store.turns("s1").await.unwrap().len(), 2);
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_and_an_item_of_a_thread_may_have_the_same_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    store
        .append(&t, turn_with_message(&t, "same", "same"))
        .await
        .unwrap();
    let rows = rows_in_key_order(dir.path(), &t);
    assert_eq!(rows, [(1, "same".to_owned()), (0, "same".to_owned())]);

    // Read back, and read again by a writer that loads the thread from its
    // rows (a new store on the file), which takes one more turn.
    for reopen in [false, true] {
        let store = match reopen {
            true => {
                store.close().await.unwrap();
                open(dir.path())
            }
            false => store.clone(),
        };
        let turns = store.turns(&t).await.unwrap();
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].id, "same");
        let items = store.items(&t, View::All).await.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].item.id(), items[0].turn_id.as_str()),
            ("same", "same")
        );
        if reopen {
            store
                .append(&t, turn_with_message(&t, "t2", "other"))
                .await
                .unwrap();
            let turns = store.turns(&t).await.unwrap();
            let ids: Vec<&str> = turns.iter().map(|turn| turn.id.as_str()).collect();
            assert_eq!(ids, ["same", "t2"]);
            assert_eq!(store.items(&t, View::All).await.unwrap().len(), 2);
            store.delete_thread(&t).await.unwrap();
            assert!(rows_in_key_order(dir.path(), &t).is_empty());
            store.close().await.unwrap();
        }
    }
}
