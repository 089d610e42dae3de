//! Pending requests and run states: durable from the moment they are
//! written, answered once, and a paused turn survives crash recovery.

mod common;

use common::backend::TestStore;
use common::*;
use serde_json::json;
use spool_protocol::*;
use spool_store::{PendingRequest, Store, StoreError};
use tempfile::tempdir;

fn approval_request(thread: &str, turn: &str, item: &str, request_id: &str) -> PendingRequest {
    PendingRequest {
        request_id: request_id.to_owned(),
        thread_id: thread.to_owned(),
        turn_id: turn.to_owned(),
        item_id: item.to_owned(),
        request: ServerRequest::CommandExecutionRequestApproval(
            CommandExecutionRequestApprovalParams {
                thread_id: thread.to_owned(),
                turn_id: turn.to_owned(),
                item_id: item.to_owned(),
                started_at_ms: 1_000,
                approval_id: None,
                reason: Some("writes outside the workspace".to_owned()),
                network_approval_context: None,
                command: Some("touch /tmp/x".to_owned()),
                cwd: Some("/work".to_owned()),
                command_actions: None,
                proposed_execpolicy_amendment: None,
                proposed_network_policy_amendments: None,
                available_decisions: None,
            },
        ),
        created_at_ms: 1_000,
        answer: None,
        resolved_at_ms: None,
    }
}

on_every_backend!(a_request_is_answered_once_and_its_resolution_is_logged,);

async fn a_request_is_answered_once_and_its_resolution_is_logged(ts: TestStore) {
    let store = &ts.store;
    let thread = new_thread(store, false).await;
    store
        .append(&thread, vec![turn_started(&thread, "turn-1")])
        .await
        .unwrap();
    let request = approval_request(&thread, "turn-1", "item-1", "req-1");
    store
        .open_request(request.clone(), Some("{\"state\":1}".to_owned()))
        .await
        .unwrap();

    assert_eq!(
        store.open_requests(&thread).await.unwrap(),
        vec![request.clone()]
    );
    let states = store.run_states(&thread).await.unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].turn_id, "turn-1");
    assert_eq!(states[0].state, "{\"state\":1}");

    let resolved = store
        .resolve_request(&thread, "req-1", json!({"decision": "accept"}))
        .await
        .unwrap();
    assert_eq!(resolved.request.answer, Some(json!({"decision": "accept"})));
    assert!(resolved.request.resolved_at_ms.is_some());
    assert!(matches!(
        &resolved.event.payload,
        ServerNotification::ServerRequestResolved(n) if n.request_id.to_string() == "req-1"
    ));
    assert!(store.open_requests(&thread).await.unwrap().is_empty());

    let again = store
        .resolve_request(&thread, "req-1", json!({"decision": "decline"}))
        .await;
    assert!(
        matches!(&again, Err(StoreError::RequestAlreadyResolved { request_id }) if request_id == "req-1"),
        "{again:?}"
    );
    let unknown = store
        .resolve_request(&thread, "req-404", json!({"decision": "accept"}))
        .await;
    assert!(
        matches!(&unknown, Err(StoreError::UnknownRequest { request_id, .. }) if request_id == "req-404"),
        "{unknown:?}"
    );
    // The first answer stands.
    let stored = store.request(&thread, "req-1").await.unwrap().unwrap();
    assert_eq!(stored.answer, Some(json!({"decision": "accept"})));

    let events = store.events_after(&thread, 0, 100).await.unwrap();
    let resolutions: Vec<_> = events
        .iter()
        .filter_map(|event| match &event.payload {
            ServerNotification::ServerRequestResolved(n) => Some(n),
            _ => None,
        })
        .collect();
    assert_eq!(resolutions.len(), 1, "exactly one serverRequest/resolved");
    assert_eq!(resolutions[0].request_id.to_string(), "req-1");
}

#[tokio::test]
async fn a_paused_turn_survives_reopen_and_crash_recovery_while_others_are_closed() {
    let dir = tempdir().unwrap();
    let thread = {
        let store = open(dir.path());
        let thread = new_thread(&store, false).await;
        store
            .append(&thread, vec![turn_started(&thread, "paused")])
            .await
            .unwrap();
        store
            .open_request(
                approval_request(&thread, "paused", "item-1", "req-1"),
                Some("{}".to_owned()),
            )
            .await
            .unwrap();
        let other = new_thread(&store, false).await;
        store
            .append(&other, vec![turn_started(&other, "abandoned")])
            .await
            .unwrap();
        store.close().await.unwrap();
        thread
    };
    // Reopening alone runs crash recovery.
    let store = open(dir.path());
    let turns = store.turns(&thread).await.unwrap();
    assert_eq!(
        turns[0].status,
        TurnStatus::InProgress,
        "paused turn left open"
    );
    assert_eq!(store.open_requests(&thread).await.unwrap().len(), 1);

    let threads = store
        .list_threads(spool_store::ThreadListQuery::default())
        .await
        .unwrap();
    let other = threads
        .threads
        .iter()
        .find(|t| t.thread.id != thread)
        .unwrap();
    let other_turns = store.turns(&other.thread.id).await.unwrap();
    assert_eq!(other_turns[0].status, TurnStatus::Interrupted);

    // Once the run state is cleared the turn is an ordinary open turn.
    store.clear_run_state(&thread, "paused").await.unwrap();
    assert!(store.run_states(&thread).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_corrupt_request_row_is_a_clear_error() {
    let dir = tempdir().unwrap();
    let store = keep_open(dir.path());
    let thread = new_thread(&store, false).await;
    store
        .append(&thread, vec![turn_started(&thread, "t")])
        .await
        .unwrap();
    store
        .open_request(approval_request(&thread, "t", "i", "req-1"), None)
        .await
        .unwrap();
    raw(dir.path())
        .execute("UPDATE pending_requests SET request = '{not json'", [])
        .unwrap();
    let error = store.open_requests(&thread).await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("pending_requests") && text.contains("req-1"),
        "{text}"
    );
}

#[tokio::test]
async fn an_approval_stored_without_its_start_time_reads_with_its_rows_creation_time() {
    let dir = tempdir().unwrap();
    let store = open(dir.path());
    let thread = new_thread(&store, false).await;
    store
        .append(&thread, vec![turn_started(&thread, "turn-1")])
        .await
        .unwrap();
    let mut request = approval_request(&thread, "turn-1", "item-1", "req-1");
    // As rows written before the field existed read.
    if let ServerRequest::CommandExecutionRequestApproval(params) = &mut request.request {
        params.started_at_ms = 0;
    }
    store.open_request(request, None).await.unwrap();
    let read = store.open_requests(&thread).await.unwrap();
    let ServerRequest::CommandExecutionRequestApproval(params) = &read[0].request else {
        panic!("{read:?}");
    };
    assert_eq!(params.started_at_ms, 1_000);
}
