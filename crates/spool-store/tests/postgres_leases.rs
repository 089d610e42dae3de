//! Several servers on one PostgreSQL, as stores: one holds a thread at a
//! time, a holder that lost its lease cannot append, and the server that
//! takes a thread over closes what the lost holder left in progress, as
//! crash recovery does, but keeps a turn paused on a person paused.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use spool_protocol::*;
use spool_store::postgres::PgStore;
use spool_store::{ForwardReply, PendingRequest, RemoteCommit, Store, StoreError, StoreOptions};
use spool_testkit::postgres::TestDatabase;

/// A lease long enough that no heartbeat of the test's stores renews,
/// scans or takes anything over while a test runs: what they do is what
/// the test does.
fn quiet() -> StoreOptions {
    StoreOptions {
        lease_ttl: Duration::from_secs(120),
        ..StoreOptions::default()
    }
}

async fn server(db: &TestDatabase, options: StoreOptions) -> PgStore {
    PgStore::open(db.url(), options)
        .await
        .expect("open a store")
}

/// What a holder paused past its lease looks like to the others: its
/// lease on the thread ran out.
fn expire(db: &TestDatabase, thread: &str) {
    db.query(&format!(
        "UPDATE thread_leases SET expires_at = now() - interval '1 second' \
         WHERE thread_id = '{thread}'"
    ))
    .unwrap();
}

fn holder(db: &TestDatabase, thread: &str) -> String {
    db.query(&format!(
        "SELECT holder || ' ' || generation FROM thread_leases WHERE thread_id = '{thread}'"
    ))
    .unwrap()
}

fn statuses(events: &[ThreadEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            ServerNotification::TurnCompleted(n) => {
                Some(format!("turn {} {}", n.turn.id, n.turn.status.as_str()))
            }
            ServerNotification::ItemCompleted(n) => {
                let status = n.envelope.as_ref().map_or("?", |e| e.status.as_str());
                Some(format!("item {} {status}", n.item.id()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_writes_a_thread_and_a_takeover_fences_the_old_holder() {
    let db = TestDatabase::create();
    let a = server(&db, quiet()).await;
    let b = server(&db, quiet()).await;
    let t = new_thread(&a, false).await;
    let u = new_thread(&a, false).await;
    start_message(&a, &t, "turn-1", "m1").await;
    a.append(&t, vec![agent_delta(&t, "turn-1", "m1", "Hel")])
        .await
        .unwrap();
    let held_by_a = holder(&db, &t);
    assert!(held_by_a.ends_with(" 1"), "{held_by_a}");

    // While A holds the thread, B cannot write it.
    let refused = b.append(&t, vec![turn_completed(&t, "turn-1")]).await;
    let Err(StoreError::HeldElsewhere { holder: named, .. }) = &refused else {
        panic!("B appended to a thread A holds: {refused:?}");
    };
    assert!(
        held_by_a.starts_with(named.as_str()),
        "{named} vs {held_by_a}"
    );

    // A is paused past its lease: B takes the thread over. What A left in
    // progress is closed first, then B's own append goes in.
    expire(&db, &t);
    let last_before = a.thread(&t).await.unwrap().unwrap().last_seq;
    b.append(&t, vec![turn_started(&t, "turn-2")])
        .await
        .unwrap();
    assert!(
        holder(&db, &t).ends_with(" 2"),
        "a takeover is a new generation"
    );
    let events = b.events_after(&t, last_before, 100).await.unwrap();
    assert_eq!(
        statuses(&events),
        vec!["item m1 incomplete", "turn turn-1 interrupted"]
    );
    assert!(matches!(
        events.last().map(|e| &e.payload),
        Some(ServerNotification::TurnStarted(n)) if n.turn.id == "turn-2"
    ));
    let items = b.items(&t, spool_core::View::All).await.unwrap();
    assert_eq!(
        items[0].item,
        agent_message("m1", "Hel"),
        "what A committed stays"
    );

    // A resumes: its append is fenced, and nothing of it is stored. An
    // append to a thread A still holds, sent at the same time (so most
    // often in the same group commit), is stored all the same.
    let last = b.thread(&t).await.unwrap().unwrap().last_seq;
    let (fenced, kept) = tokio::join!(
        a.append(&t, vec![agent_delta(&t, "turn-1", "m1", "lo")]),
        a.append(&u, vec![turn_started(&u, "turn-u")]),
    );
    assert!(
        matches!(&fenced, Err(StoreError::LeaseLost { thread_id }) if thread_id == &t),
        "{fenced:?}"
    );
    assert_eq!(b.thread(&t).await.unwrap().unwrap().last_seq, last);
    let kept = kept.unwrap();
    let stored = b.events_after(&u, 0, 100).await.unwrap();
    let kept_seq = kept.last().and_then(|a| a.event()).map(|e| e.seq);
    assert_eq!(stored.last().map(|e| e.seq), kept_seq);
    assert!(kept_seq.is_some());
    // Having lost it, A is refused like any other server.
    let again = a.append(&t, vec![turn_completed(&t, "turn-2")]).await;
    assert!(
        matches!(&again, Err(StoreError::HeldElsewhere { .. })),
        "{again:?}"
    );
    b.append(&t, vec![turn_completed(&t, "turn-2")])
        .await
        .unwrap();

    // A store that closes lets its threads go at once.
    b.close().await.unwrap();
    a.append(&t, vec![turn_started(&t, "turn-3")])
        .await
        .unwrap();
    assert!(holder(&db, &t).ends_with(" 3"), "{}", holder(&db, &t));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_server_takes_over_an_abandoned_turn_by_itself() {
    let db = TestDatabase::create();
    let a = server(&db, quiet()).await;
    let t = new_thread(&a, false).await;
    start_message(&a, &t, "turn-1", "m1").await;
    // B beats every 100 ms: within a beat of A's lease running out, B
    // closes what A left, with no request for the thread.
    let b = server(
        &db,
        StoreOptions {
            lease_ttl: Duration::from_millis(500),
            ..StoreOptions::default()
        },
    )
    .await;
    expire(&db, &t);
    let deadline = Instant::now() + Duration::from_secs(10);
    let events = loop {
        let events = b.events_after(&t, 0, 100).await.unwrap();
        if events
            .iter()
            .any(|e| matches!(e.payload, ServerNotification::TurnCompleted(_)))
        {
            break events;
        }
        assert!(Instant::now() < deadline, "no takeover within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        statuses(&events),
        vec!["item m1 incomplete", "turn turn-1 interrupted"]
    );
    assert!(holder(&db, &t).ends_with(" 2"));
    // B's own commits are not heard as other servers' are, but a takeover
    // is: no run of B wrote it, so B's watchers learn of it this way.
    let mut heard = b.remote_commits().expect("PostgreSQL tells of commits");
    let last_seq = events.last().map(|e| e.seq).unwrap();
    let commit = async {
        loop {
            match heard.recv().await {
                // The listener's first word, whenever it connects.
                Ok(RemoteCommit::Resync) => continue,
                other => return other,
            }
        }
    };
    let notice = within(commit).await.unwrap();
    assert_eq!(
        notice,
        RemoteCommit::Commit {
            thread_id: t.clone(),
            last_seq
        }
    );
    drop(a);
}

/// A server's threads are split among its writer lanes: each lane's
/// heartbeat renews its own threads' leases, so no thread of a live server
/// runs out whichever lane it is in, and each lane takes over the
/// abandoned threads of its own, so every one of them is taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lane_renews_its_threads_and_takes_over_its_share() {
    let db = TestDatabase::create();
    let beating = || StoreOptions {
        // A second: a heartbeat (a fifth of it) may come late on a busy
        // machine; with 500 ms, a run of the whole suite failed here once.
        lease_ttl: Duration::from_secs(1),
        writer_lanes: 3,
        ..StoreOptions::default()
    };
    let a = server(&db, beating()).await;
    let mut threads = Vec::new();
    for _ in 0..12 {
        threads.push(new_thread(&a, false).await);
    }
    // Three lease lives with no write: only the heartbeats keep them.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let b = server(&db, quiet()).await;
    for t in &threads {
        let refused = b.append(t, vec![turn_started(t, "turn-b")]).await;
        assert!(
            matches!(refused, Err(StoreError::HeldElsewhere { .. })),
            "a lease of a live server ran out: {refused:?}"
        );
    }
    drop(b);

    // The threads are left mid-turn; a server of three lanes takes every
    // one of them over, each lane its own.
    for t in &threads {
        start_message(&a, t, "turn-1", "m1").await;
    }
    let a_id = holder(&db, &threads[0]);
    let a_id = a_id.split(' ').next().unwrap_or_default().to_owned();
    // A closes: its lanes let their threads go, turns left in progress.
    a.close().await.unwrap();
    drop(a);
    let c = server(&db, beating()).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    for t in &threads {
        loop {
            let events = c.events_after(t, 0, 100).await.unwrap();
            if statuses(&events) == vec!["item m1 incomplete", "turn turn-1 interrupted"] {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{t} was not taken over within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!holder(&db, t).starts_with(&a_id), "{t} is still A's");
    }
}

fn approval(thread: &str) -> PendingRequest {
    PendingRequest {
        request_id: "req-1".to_owned(),
        thread_id: thread.to_owned(),
        turn_id: "turn-1".to_owned(),
        item_id: "cmd-1".to_owned(),
        request: ServerRequest::CommandExecutionRequestApproval(
            CommandExecutionRequestApprovalParams {
                thread_id: thread.to_owned(),
                turn_id: "turn-1".to_owned(),
                item_id: "cmd-1".to_owned(),
                started_at_ms: 1_000,
                approval_id: None,
                reason: None,
                network_approval_context: None,
                command: Some("true".to_owned()),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_paused_on_a_person_stays_paused_and_is_answered_on_another_server() {
    let db = TestDatabase::create();
    let a = server(&db, quiet()).await;
    let t = new_thread(&a, false).await;
    a.append(&t, vec![turn_started(&t, "turn-1")])
        .await
        .unwrap();
    a.open_request(approval(&t), Some("{\"paused\":true}".to_owned()))
        .await
        .unwrap();
    let b = server(&db, quiet()).await;
    expire(&db, &t);
    let resolved = b
        .resolve_request(&t, "req-1", json!({"decision": "accept"}))
        .await
        .unwrap();
    assert_eq!(resolved.request.answer, Some(json!({"decision": "accept"})));
    assert!(holder(&db, &t).ends_with(" 2"), "B took the thread");
    let events = b.events_after(&t, 0, 100).await.unwrap();
    assert!(statuses(&events).is_empty(), "the paused turn stays open");
    assert_eq!(b.run_states(&t).await.unwrap().len(), 1);
    let turns = b.turns(&t).await.unwrap();
    assert_eq!(turns[0].status, TurnStatus::InProgress);
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_servers_commits_are_heard_as_they_happen_and_ones_own_are_not() {
    let db = TestDatabase::create();
    let a = server(&db, quiet()).await;
    let b = server(&db, quiet()).await;
    let mut heard_by_b = b.remote_commits().expect("PostgreSQL tells commits");
    let mut heard_by_a = a.remote_commits().expect("PostgreSQL tells commits");
    // Listening has begun once each says so (nothing before it is heard).
    let next = async |rx: &mut tokio::sync::broadcast::Receiver<RemoteCommit>| {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a notice within 10 s")
            .unwrap()
    };
    assert_eq!(next(&mut heard_by_b).await, RemoteCommit::Resync);
    assert_eq!(next(&mut heard_by_a).await, RemoteCommit::Resync);

    let t = new_thread(&a, false).await;
    start_message(&a, &t, "turn-1", "m1").await;
    let mut last = 0;
    while last < 3 {
        match next(&mut heard_by_b).await {
            RemoteCommit::Commit {
                thread_id,
                last_seq,
            } if thread_id == t => {
                assert!(last_seq > last, "{last_seq} after {last}");
                last = last_seq;
            }
            other => panic!("B heard {other:?}"),
        }
    }
    assert_eq!(last, a.thread(&t).await.unwrap().unwrap().last_seq);
    // A hears nothing of its own commits.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), heard_by_a.recv())
            .await
            .is_err(),
        "a server heard its own commit"
    );
}

/// A forwarded request runs at most once. Its holder stops (paused past
/// its lease) after one request took effect, its first events committed,
/// and before it began another: the server taking the thread over ends
/// the first with an error that says so, instead of running it again,
/// and runs the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_request_that_took_effect_is_never_run_again() {
    let db = TestDatabase::create();
    let a = server(&db, quiet()).await;
    let b = server(&db, quiet()).await;
    let t = new_thread(&a, false).await;
    let a_id = b
        .held_elsewhere(&t)
        .await
        .unwrap()
        .expect("A holds the thread");
    let mut on_a = a.forwarded().expect("PostgreSQL forwards");

    let forward = |method: &'static str| {
        let (b, a_id, t) = (b.clone(), a_id.clone(), t.clone());
        tokio::spawn(async move { b.forward(&a_id, &t, method, &json!({"threadId": t})).await })
    };
    let started = forward("turn/start");
    let first = within(on_a.recv()).await.unwrap();
    a.forward_applying(&first.id, &t).await.unwrap();
    a.append(&t, vec![turn_started(&t, "turn-1")])
        .await
        .unwrap();
    let steered = forward("turn/steer");
    let second = within(on_a.recv()).await.unwrap();
    assert_ne!(first.id, second.id);

    // A stops answering; B takes the thread over with an append of its own.
    drop(on_a);
    expire(&db, &t);
    let mut on_b = b.forwarded().expect("PostgreSQL forwards");
    b.append(&t, vec![turn_started(&t, "turn-2")])
        .await
        .unwrap();

    let reply = within(started).await.unwrap().unwrap();
    assert!(
        matches!(&reply, ForwardReply::Error { message, .. } if message.contains("took effect")),
        "{reply:?}"
    );
    let rerun = within(on_b.recv()).await.unwrap();
    assert_eq!(
        rerun.id, second.id,
        "only the request that had not begun runs again"
    );
    b.forward_done(&rerun.id, &ForwardReply::Result(json!({"ran": "on B"})))
        .await
        .unwrap();
    let reply = within(steered).await.unwrap().unwrap();
    assert_eq!(reply, ForwardReply::Result(json!({"ran": "on B"})));
    assert_eq!(
        db.query(&format!(
            "SELECT claimed_by = '{a_id}' AND applied_at IS NOT NULL AND done_at IS NOT NULL \
             FROM commands WHERE id = '{}'",
            first.id
        ))
        .unwrap(),
        "t",
        "the request that took effect stays A's, ended"
    );
}

/// `future`'s output, which must come within 10 s.
async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("in time")
}

#[tokio::test]
async fn a_running_process_names_the_server_that_started_it_until_it_ends() {
    let db = TestDatabase::create();
    let (a, b) = (server(&db, quiet()).await, server(&db, quiet()).await);
    let t = new_thread(&a, false).await;
    a.process_started(&t, "item-1", 4242, 7).await.unwrap();
    b.process_started(&t, "item-2", 5151, 8).await.unwrap();
    let rows = |db: &TestDatabase| {
        db.query(
            "SELECT item_id || ' ' || pgid || ' ' || start_ticks || ' ' || \
             (server_id = (SELECT holder FROM thread_leases)) FROM running_processes \
             ORDER BY item_id",
        )
        .unwrap()
    };
    // The thread's holder is `a`, which made it.
    assert_eq!(rows(&db), "item-1 4242 7 true\nitem-2 5151 8 false");
    let servers = db
        .query("SELECT count(DISTINCT server_id) FROM running_processes")
        .unwrap();
    assert_eq!(servers, "2", "each row names its own server");
    // The same item started again (a restarted command) replaces its row.
    a.process_started(&t, "item-1", 6060, 9).await.unwrap();
    a.process_ended(&t, "item-2").await.unwrap();
    assert_eq!(rows(&db), "item-1 6060 9 true");
    a.close().await.unwrap();
    b.close().await.unwrap();
}
