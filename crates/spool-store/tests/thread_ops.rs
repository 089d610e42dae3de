//! Whole-thread operations: archiving (logged) and unarchiving, reverting
//! the latest turns (logged as `item/removed`, never by rewriting the log),
//! and forking a thread into a new one that holds a copy of its finished
//! turns.

mod common;

use common::backend::TestStore;
use common::backend::quote;
use common::*;
use spool_core::View;
use spool_protocol::{ServerNotification, ThreadNameUpdatedNotification, ThreadStatus, TurnStatus};
use spool_store::{NewThread, Store, StoreError, ThreadListQuery};

/// Appends one finished turn: a user message and an agent reply.
async fn exchange(store: &impl Store, thread: &str, turn: &str, text: &str) {
    let user = user_message(&format!("{turn}-u"), text);
    let agent = agent_message(&format!("{turn}-a"), &format!("re: {text}"));
    store
        .append(
            thread,
            vec![
                turn_started(thread, turn),
                started(thread, turn, user.clone()),
                completed(thread, turn, user),
                started(thread, turn, agent.clone()),
                completed(thread, turn, agent),
                turn_completed(thread, turn),
            ],
        )
        .await
        .unwrap();
}

fn item_ids(records: &[spool_core::ItemRecord]) -> Vec<String> {
    records.iter().map(|r| r.item.id().to_owned()).collect()
}

async fn listed(store: &impl Store, archived: bool) -> Vec<String> {
    store
        .list_threads(ThreadListQuery {
            archived,
            ..ThreadListQuery::default()
        })
        .await
        .unwrap()
        .threads
        .into_iter()
        .map(|r| r.thread.id)
        .collect()
}

on_every_backend!(
    archiving_is_logged_and_unarchiving_brings_the_thread_back,
    a_revert_logs_item_removed_for_every_item_of_the_reverted_turns,
    a_revert_is_refused_while_a_turn_is_in_progress,
    a_fork_copies_finished_turns_into_the_new_threads_own_log,
    a_fork_leaves_out_a_turn_in_progress_and_reverted_turns,
    deleting_a_thread_removes_every_row_of_it_and_records_the_deletion,
    a_thread_with_a_turn_in_progress_is_not_deleted,
    a_thread_created_after_the_newest_is_deleted_holds_only_its_own_rows,
);

async fn archiving_is_logged_and_unarchiving_brings_the_thread_back(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    assert_eq!(listed(store, false).await, vec![thread.clone()]);

    let events = store.set_archived(&thread, true).await.unwrap();
    assert!(matches!(
        events[0].payload,
        ServerNotification::ThreadArchived(_)
    ));
    assert!(matches!(
        &events[1].payload,
        ServerNotification::ThreadStatusChanged(n) if n.status == ThreadStatus::NotLoaded
    ));
    assert_eq!(events[0].seq, 2);
    assert!(store.thread(&thread).await.unwrap().unwrap().archived);
    assert!(listed(store, false).await.is_empty());
    assert_eq!(listed(store, true).await, vec![thread.clone()]);
    // Already archived: nothing more is logged.
    assert!(store.set_archived(&thread, true).await.unwrap().is_empty());
    assert_eq!(ts.committed_events(&thread), 3);

    let events = store.set_archived(&thread, false).await.unwrap();
    assert!(matches!(
        events[0].payload,
        ServerNotification::ThreadUnarchived(ref n) if n.thread_id == thread
    ));
    assert_eq!(events[0].seq, 4, "unarchiving is logged too");
    assert!(store.set_archived(&thread, false).await.unwrap().is_empty());
    assert!(!store.thread(&thread).await.unwrap().unwrap().archived);
    assert_eq!(listed(store, false).await, vec![thread.clone()]);
    assert!(listed(store, true).await.is_empty());

    // And again, through the cached state of the writer.
    assert_eq!(store.set_archived(&thread, true).await.unwrap().len(), 2);
    assert!(store.thread(&thread).await.unwrap().unwrap().archived);

    let error = store.set_archived("nope", true).await.unwrap_err();
    assert!(matches!(error, StoreError::UnknownThread(_)), "{error}");
}

on_every_backend!(a_rename_updates_the_thread_row,);

async fn a_rename_updates_the_thread_row(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    let renamed = ServerNotification::ThreadNameUpdated(ThreadNameUpdatedNotification {
        thread_id: thread.clone(),
        thread_name: Some("named".to_owned()),
    });
    store.append(&thread, vec![renamed]).await.unwrap();
    let record = store.thread(&thread).await.unwrap().unwrap();
    assert_eq!(record.thread.name.as_deref(), Some("named"));
}

async fn a_revert_logs_item_removed_for_every_item_of_the_reverted_turns(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    exchange(store, &thread, "t1", "one").await;
    exchange(store, &thread, "t2", "two").await;
    exchange(store, &thread, "t3", "three").await;
    let before = ts.committed_events(&thread);

    let mut removed = store.revert_turns(&thread, "t2").await.unwrap();
    let reverted = removed.pop().expect("events");
    assert!(
        matches!(reverted.payload, ServerNotification::ThreadReverted(_)),
        "thread/reverted ends the removals: {reverted:?}"
    );
    let removed_ids: Vec<&str> = removed
        .iter()
        .map(|event| match &event.payload {
            ServerNotification::ItemRemoved(n) => n.item_id.as_str(),
            other => panic!("logged {}", other.method()),
        })
        .collect();
    assert_eq!(removed_ids, ["t2-u", "t2-a", "t3-u", "t3-a"]);
    assert_eq!(removed[0].seq, before + 1, "appended after the log");

    // The projections drop them; the log keeps everything.
    let items = store.items(&thread, View::All).await.unwrap();
    assert_eq!(item_ids(&items), ["t1-u", "t1-a"]);
    let llm = store.items(&thread, View::Llm).await.unwrap();
    assert_eq!(item_ids(&llm), ["t1-u", "t1-a"]);
    assert_eq!(ts.committed_events(&thread), before + 5);
    let log = store.events_after(&thread, 0, 1000).await.unwrap();
    assert!(log.iter().any(|e| e.payload.item_id() == Some("t3-a")
        && matches!(e.payload, ServerNotification::ItemCompleted(_))));

    // The turns are still there (the log has them), each now empty.
    let turns = store.turns(&thread).await.unwrap();
    assert_eq!(turns.len(), 3);

    // The next turn goes on after the kept history.
    exchange(store, &thread, "t4", "four").await;
    let items = store.items(&thread, View::All).await.unwrap();
    assert_eq!(item_ids(&items), ["t1-u", "t1-a", "t4-u", "t4-a"]);

    // Reverting from an emptied turn removes what came after it.
    assert_eq!(store.revert_turns(&thread, "t3").await.unwrap().len(), 3);
    let items = store.items(&thread, View::All).await.unwrap();
    assert_eq!(item_ids(&items), ["t1-u", "t1-a"]);
    // Nothing left to remove: nothing is logged. An unknown turn is refused.
    assert!(store.revert_turns(&thread, "t2").await.unwrap().is_empty());
    let error = store.revert_turns(&thread, "t9").await.unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
}

async fn a_revert_is_refused_while_a_turn_is_in_progress(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    exchange(store, &thread, "t1", "one").await;
    store
        .append(&thread, vec![turn_started(&thread, "t2")])
        .await
        .unwrap();
    let before = ts.committed_events(&thread);
    let error = store.revert_turns(&thread, "t1").await.unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
    assert_eq!(ts.committed_events(&thread), before);
    assert_eq!(store.items(&thread, View::All).await.unwrap().len(), 2);
}

async fn a_fork_copies_finished_turns_into_the_new_threads_own_log(ts: TestStore) {
    let store = &ts.store;
    let source = new_thread(store, false).await;
    exchange(store, &source, "t1", "one").await;
    exchange(store, &source, "t2", "two").await;
    exchange(store, &source, "t3", "three").await;
    let source_events = ts.committed_events(&source);

    let new = NewThread {
        forked_from_id: Some(source.clone()),
        ..NewThread::new("openai", "/work")
    };
    let fork = store.fork_thread(new, &source, Some("t3")).await.unwrap();
    let fork_id = fork.thread.id.clone();
    assert_ne!(fork_id, source);
    assert_eq!(fork.thread.forked_from_id.as_deref(), Some(source.as_str()));
    assert_eq!(
        fork.thread.preview, "one",
        "the copied history gives the preview"
    );
    // thread/started + 2 turns × (turn/started, 2 × 2 item events, turn/completed).
    assert_eq!(fork.last_seq, 1 + 2 * 6);

    let items = store.items(&fork_id, View::All).await.unwrap();
    assert_eq!(item_ids(&items), ["t1-u", "t1-a", "t2-u", "t2-a"]);
    let source_items = store.items(&source, View::All).await.unwrap();
    for (copy, original) in items.iter().zip(&source_items) {
        assert_eq!(copy.item, original.item);
        assert_eq!(copy.envelope.status, original.envelope.status);
    }
    let turns = store.turns(&fork_id).await.unwrap();
    assert_eq!(turns.len(), 2);
    assert!(turns.iter().all(|t| t.status == TurnStatus::Completed));
    let log = store.events_after(&fork_id, 0, 100).await.unwrap();
    assert_eq!(log.len() as u64, fork.last_seq);
    // The source is untouched.
    assert_eq!(ts.committed_events(&source), source_events);

    // Without a turn: every finished turn; the fork goes on by itself.
    let all = store
        .fork_thread(NewThread::new("openai", "/work"), &source, None)
        .await
        .unwrap();
    let items = store.items(&all.thread.id, View::All).await.unwrap();
    assert_eq!(items.len(), 6);
    exchange(store, &all.thread.id, "t4", "four").await;
    assert_eq!(store.items(&source, View::All).await.unwrap().len(), 6);
}

async fn a_fork_leaves_out_a_turn_in_progress_and_reverted_turns(ts: TestStore) {
    let store = &ts.store;
    let source = new_thread(store, false).await;
    exchange(store, &source, "t1", "one").await;
    exchange(store, &source, "t2", "two").await;
    exchange(store, &source, "t3", "three").await;
    store.revert_turns(&source, "t2").await.unwrap();
    exchange(store, &source, "t4", "four").await;
    store
        .append(&source, vec![turn_started(&source, "t5")])
        .await
        .unwrap();
    let fork = store
        .fork_thread(NewThread::new("openai", "/work"), &source, None)
        .await
        .unwrap();
    let items = store.items(&fork.thread.id, View::All).await.unwrap();
    assert_eq!(item_ids(&items), ["t1-u", "t1-a", "t4-u", "t4-a"]);
    let turns: Vec<String> = store
        .turns(&fork.thread.id)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(turns, ["t1", "t4"]);

    let error = store
        .fork_thread(NewThread::new("openai", "/work"), "nope", None)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::UnknownThread(_)), "{error}");
    let error = store
        .fork_thread(NewThread::new("openai", "/work"), &source, Some("t9"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
}

async fn deleting_a_thread_removes_every_row_of_it_and_records_the_deletion(ts: TestStore) {
    let store = &ts.store;
    let doomed = new_thread(store, false).await;
    let kept = new_thread(store, false).await;
    exchange(store, &doomed, "t1", "one").await;
    exchange(store, &kept, "k1", "kept").await;
    let kept_events = ts.committed_events(&kept);

    store.delete_thread(&doomed).await.unwrap();
    assert!(store.thread(&doomed).await.unwrap().is_none());
    assert!(store.deleted_at(&doomed).await.unwrap().is_some());
    assert_eq!(listed(store, false).await, vec![kept.clone()]);
    for table in ["events", "items", "pending_requests", "run_states"] {
        let left = ts.count(&format!(
            "SELECT count(*) FROM {table} WHERE thread_id = {}",
            quote(&doomed)
        ));
        assert_eq!(left, 0, "{table} keeps nothing of the deleted thread");
    }
    let threads = ts.count(&format!(
        "SELECT count(*) FROM threads WHERE id = {}",
        quote(&doomed)
    ));
    assert_eq!(threads, 0);
    // The other thread is untouched.
    assert_eq!(ts.committed_events(&kept), kept_events);
    assert!(store.deleted_at(&kept).await.unwrap().is_none());

    let again = store.delete_thread(&doomed).await.unwrap_err();
    assert!(matches!(again, StoreError::UnknownThread(_)), "{again}");
}

async fn a_thread_with_a_turn_in_progress_is_not_deleted(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    store
        .append(&thread, vec![turn_started(&thread, "t1")])
        .await
        .unwrap();
    let refused = store.delete_thread(&thread).await.unwrap_err();
    assert!(matches!(refused, StoreError::Refused { .. }), "{refused}");
    assert!(store.thread(&thread).await.unwrap().is_some());
}

/// A thread created after the newest one was deleted starts empty, and the
/// older thread keeps its rows (on SQLite, the new thread's rows are keyed
/// after the deleted one's: `sqlite/keys.rs`, and `thread_keys.rs`).
async fn a_thread_created_after_the_newest_is_deleted_holds_only_its_own_rows(ts: TestStore) {
    let store = &ts.store;
    let kept = new_thread(store, false).await;
    let doomed = new_thread(store, false).await;
    exchange(store, &kept, "k1", "kept").await;
    exchange(store, &doomed, "t1", "one").await;
    exchange(store, &doomed, "t2", "two").await;
    let kept_events = ts.committed_events(&kept);
    store.delete_thread(&doomed).await.unwrap();

    let fresh = new_thread(store, false).await;
    assert_eq!(store.thread(&fresh).await.unwrap().unwrap().last_seq, 1);
    assert!(store.items(&fresh, View::All).await.unwrap().is_empty());
    assert_eq!(store.events_after(&fresh, 0, 100).await.unwrap().len(), 1);
    exchange(store, &fresh, "f1", "fresh").await;
    assert_eq!(
        item_ids(&store.items(&fresh, View::All).await.unwrap()),
        ["f1-u", "f1-a"]
    );
    assert_eq!(store.thread(&fresh).await.unwrap().unwrap().last_seq, 7);
    assert_eq!(ts.committed_events(&kept), kept_events);
    assert_eq!(
        item_ids(&store.items(&kept, View::All).await.unwrap()),
        ["k1-u", "k1-a"]
    );
}
