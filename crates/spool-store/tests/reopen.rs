//! What is written survives closing and reopening the file, identically,
//! and the projection equals a replay of the log.

mod common;

use common::*;
use spool_core::{ThreadReducer, View};
use spool_protocol::{
    CommandExecutionStatus, ReasoningSummaryTextDeltaNotification, ServerNotification,
    TextDeltaNotification, ThreadItem, ThreadNameUpdatedNotification,
};
use spool_store::Store;

fn command(id: &str, status: CommandExecutionStatus, output: Option<&str>) -> ThreadItem {
    ThreadItem::CommandExecution {
        plugin_id: Default::default(),
        script_path: Default::default(),
        source: Default::default(),
        id: id.to_owned(),
        command: "ls".to_owned(),
        cwd: "/work".to_owned(),
        process_id: None,
        status,
        command_actions: Vec::new(),
        aggregated_output: output.map(str::to_owned),
        exit_code: output.map(|_| 0),
        duration_ms: None,
    }
}

fn reasoning(id: &str, summary: &[&str]) -> ThreadItem {
    ThreadItem::Reasoning {
        id: id.to_owned(),
        summary: summary.iter().map(|s| (*s).to_owned()).collect(),
        content: Vec::new(),
    }
}

/// Two turns of varied items; the second left in progress with an open
/// item, so the reopened writer must resume it.
async fn write_history(store: &spool_store::SqliteStore, t: &str) {
    store
        .append(
            t,
            vec![
                turn_started(t, "turn-1"),
                started(t, "turn-1", user_message("u1", "list the files")),
                completed(t, "turn-1", user_message("u1", "list the files")),
                started(t, "turn-1", reasoning("r1", &[])),
                ServerNotification::ReasoningSummaryTextDelta(
                    ReasoningSummaryTextDeltaNotification {
                        thread_id: t.to_owned(),
                        turn_id: "turn-1".to_owned(),
                        item_id: "r1".to_owned(),
                        delta: "I should run ls".to_owned(),
                        summary_index: 0,
                    },
                ),
                completed(t, "turn-1", reasoning("r1", &["I should run ls"])),
                started(
                    t,
                    "turn-1",
                    command("c1", CommandExecutionStatus::InProgress, None),
                ),
                ServerNotification::CommandExecutionOutputDelta(TextDeltaNotification {
                    thread_id: t.to_owned(),
                    turn_id: "turn-1".to_owned(),
                    item_id: "c1".to_owned(),
                    delta: "a.txt\n".to_owned(),
                }),
                completed(
                    t,
                    "turn-1",
                    command("c1", CommandExecutionStatus::Completed, Some("a.txt\n")),
                ),
            ],
        )
        .await
        .unwrap();
    store
        .append(t, streamed_message(t, "turn-1", "a1", "There is one file."))
        .await
        .unwrap();
    store
        .append(
            t,
            vec![
                turn_completed(t, "turn-1"),
                ServerNotification::ThreadNameUpdated(ThreadNameUpdatedNotification {
                    thread_id: t.to_owned(),
                    thread_name: Some("files".to_owned()),
                }),
                turn_started(t, "turn-2"),
                started(t, "turn-2", agent_message("a2", "")),
            ],
        )
        .await
        .unwrap();
    store
        .append(t, vec![agent_delta(t, "turn-2", "a2", "Still ")])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_returns_identical_items_turns_and_events() {
    let dir = tempfile::tempdir().unwrap();
    // Another handle stays open: the reopen below must not recover turns.
    let _keeper = keep_open(dir.path());
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    write_history(&store, &t).await;
    store.flush().await.unwrap();

    let items = store.items(&t, View::All).await.unwrap();
    let turns = store.turns(&t).await.unwrap();
    let events = store.events_after(&t, 0, 1000).await.unwrap();
    let thread = store.thread(&t).await.unwrap().unwrap();
    store.close().await.unwrap();
    drop(store);

    let store = open(dir.path());
    assert_eq!(store.items(&t, View::All).await.unwrap(), items);
    assert_eq!(store.turns(&t).await.unwrap(), turns);
    assert_eq!(store.events_after(&t, 0, 1000).await.unwrap(), events);
    assert_eq!(store.thread(&t).await.unwrap().unwrap(), thread);

    // The projection is what replaying the log gives.
    let mut replayed = ThreadReducer::new(&t);
    replayed.apply_all(&events).unwrap();
    assert_eq!(replayed.items(), items.as_slice());
    assert_eq!(replayed.turns(), turns.as_slice());
    let from_store = store.reducer(&t).await.unwrap();
    assert_eq!(from_store.items(), replayed.items());
    assert_eq!(from_store.last_seq(), events.len() as u64);

    assert_eq!(thread.thread.preview, "list the files");
    assert_eq!(thread.thread.name.as_deref(), Some("files"));
    assert_eq!(thread.last_seq, events.len() as u64);
    assert_eq!(events.first().unwrap().payload.method(), "thread/started");
    assert_eq!(items.len(), 5);
    assert_eq!(turns.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_store_resumes_open_items_and_gapless_seqs() {
    let dir = tempfile::tempdir().unwrap();
    // Another handle stays open: the reopen below must not recover turns.
    let _keeper = keep_open(dir.path());
    let t = {
        let store = open(dir.path());
        let t = new_thread(&store, false).await;
        write_history(&store, &t).await;
        t
        // dropped: the pending delta is committed on drop
    };
    let store = open(dir.path());
    let before = store.thread(&t).await.unwrap().unwrap().last_seq;
    let appended = store
        .append(
            &t,
            vec![
                agent_delta(&t, "turn-2", "a2", "working"),
                completed(&t, "turn-2", agent_message("a2", "Still working")),
                turn_completed(&t, "turn-2"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(seqs(&appended), vec![before + 1, before + 2, before + 3]);

    let a2 = store
        .items(&t, View::All)
        .await
        .unwrap()
        .into_iter()
        .find(|record| record.item.id() == "a2")
        .unwrap();
    assert_eq!(a2.item, agent_message("a2", "Still working"));
    assert!(a2.envelope.status.is_terminal());

    // An item completed before the reopen stays closed to later events.
    let refused = store
        .append(
            &t,
            vec![completed(&t, "turn-1", agent_message("a1", "again"))],
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("terminal"), "{refused}");
}
