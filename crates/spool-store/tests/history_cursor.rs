//! What a provider holds of a server-managed history: the cursor is kept
//! per thread across reopening, and the records after it are read alone.

mod common;

use common::*;
use spool_core::llm::HistoryCursor;
use spool_store::{Store, StoredHistory};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cursor_survives_a_reopen_and_names_the_records_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    assert_eq!(store.history(&thread).await.unwrap(), None);
    let mut events = vec![turn_started(&thread, "t1")];
    for (id, text) in [("u1", "one"), ("u2", "two")] {
        events.push(started(&thread, "t1", user_message(id, text)));
        events.push(completed(&thread, "t1", user_message(id, text)));
    }
    events.push(started(&thread, "t1", agent_message("a3", "three")));
    events.push(completed(&thread, "t1", agent_message("a3", "three")));
    store.append(&thread, events).await.unwrap();
    let all = store.llm_records_after(&thread, 0, &[]).await.unwrap();
    let ids: Vec<&str> = all.iter().map(|r| r.item.id()).collect();
    assert_eq!(ids, ["u1", "u2", "a3"]);

    // The provider holds everything through u2 but u1.
    let history = StoredHistory {
        cursor: HistoryCursor {
            previous_response_id: Some("resp_1".into()),
            through_ordinal: all[1].ordinal,
            unsent: Vec::new(),
            held_calls: vec!["call_1".into()],
        },
        conversation_id: Some("conv_1".into()),
    };
    store.set_history(&thread, &history).await.unwrap();
    let after = store
        .llm_records_after(&thread, all[1].ordinal, &["u1".to_owned()])
        .await
        .unwrap();
    let ids: Vec<&str> = after.iter().map(|r| r.item.id()).collect();
    assert_eq!(ids, ["u1", "a3"]);
    store.close().await.unwrap();
    drop(store);

    let store = open(dir.path());
    assert_eq!(store.history(&thread).await.unwrap(), Some(history));
    store.delete_thread(&thread).await.unwrap();
    let raw = raw(dir.path());
    let left: i64 = raw
        .query_row("SELECT count(*) FROM history_cursors", [], |row| row.get(0))
        .unwrap();
    assert_eq!(left, 0, "a deleted thread leaves no cursor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_cursor_is_an_error_naming_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    store
        .set_history(&thread, &StoredHistory::default())
        .await
        .unwrap();
    raw(dir.path())
        .execute("UPDATE history_cursors SET cursor = '{not json'", [])
        .unwrap();
    let error = store.history(&thread).await.unwrap_err();
    let row = error.corrupt_row().expect("a corrupt row");
    assert_eq!((row.table, row.column), ("history_cursors", "cursor"));
    assert!(error.to_string().contains(&thread), "{error}");
}
