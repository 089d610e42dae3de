//! (d) of `spool bench server`: `thread/resume` (with turns) of a thread
//! of `--items` items, written to the store directly; the median of a few
//! resumes, request sent to reply received.

use std::time::Instant;

use anyhow::ensure;
use serde::Serialize;
use serde_json::json;
use spool_protocol::{
    Audience, ItemCompletedNotification, ItemEnvelope, ItemStartedNotification, ItemStatus,
    ServerNotification, ThreadItem, Turn, TurnCompletedNotification, TurnStartedNotification,
    TurnStatus, UserInput,
};
use spool_store::{NewThread, SqliteStore, Store};

use super::report::{median, round};
use super::server::now_ms;
use super::ws_client::Client;

const TARGET_RESUME_MS: f64 = 50.0;
/// Resumes timed in (d); the median is reported.
const RESUMES: usize = 5;
/// Turns per `append` while filling (d)'s thread.
const SETUP_TURNS_PER_APPEND: usize = 250;

#[derive(Debug, Serialize)]
pub(super) struct Resume {
    pub(super) items: usize,
    turns: usize,
    resumes: usize,
    pub(super) median_ms: f64,
    first_ms: f64,
    max_ms: f64,
    reply_bytes: usize,
    target_ms: f64,
    holds: bool,
}

/// (d): `thread/resume` with turns of a thread of `items` items, written
/// to the store directly (a user message and an answer per turn).
pub(super) async fn resume(
    client: &mut Client,
    store: &SqliteStore,
    cwd: &str,
    items: usize,
) -> anyhow::Result<Resume> {
    let record = store.create_thread(NewThread::new("bench", cwd)).await?;
    let thread = record.thread.id;
    let turns = items / 2;
    for first in (0..turns).step_by(SETUP_TURNS_PER_APPEND) {
        let last = (first + SETUP_TURNS_PER_APPEND).min(turns);
        let events = (first..last)
            .flat_map(|k| turn_events(&thread, k))
            .collect();
        store.append(&thread, events).await?;
    }
    store.flush().await?;
    let mut times = Vec::with_capacity(RESUMES);
    let mut reply_bytes = 0;
    for _ in 0..RESUMES {
        let start = Instant::now();
        let (reply, at) = client
            .call_timed("thread/resume", json!({"threadId": thread}))
            .await?;
        times.push(at.duration_since(start).as_secs_f64() * 1000.0);
        let got = reply["result"]["thread"]["turns"]
            .as_array()
            .map_or(0, Vec::len);
        ensure!(
            got == turns,
            "thread/resume returned {got} turns, not {turns}"
        );
        reply_bytes = reply.to_string().len();
    }
    let median_ms = median(&times);
    Ok(Resume {
        items: turns * 2,
        turns,
        resumes: RESUMES,
        median_ms: round(median_ms, 3),
        first_ms: round(times[0], 3),
        max_ms: round(times.iter().copied().fold(0.0, f64::max), 3),
        reply_bytes,
        target_ms: TARGET_RESUME_MS,
        holds: median_ms <= TARGET_RESUME_MS,
    })
}

/// Turn `k` of (d)'s thread: its user message and the agent's answer.
fn turn_events(thread: &str, k: usize) -> Vec<ServerNotification> {
    let turn = format!("turn_{k}");
    let user = ThreadItem::user_message(
        format!("item_{}", 2 * k),
        vec![UserInput::text(format!("Question {k}: what comes next?"))],
    );
    let agent = ThreadItem::agent_message(
        format!("msg_{}", 2 * k + 1),
        format!("Answer {k}: the next thing, in a sentence or two of plain text."),
    );
    let now = now_ms();
    let started = |item: ThreadItem| {
        ServerNotification::ItemStarted(ItemStartedNotification {
            item,
            thread_id: thread.to_owned(),
            turn_id: turn.clone(),
            started_at_ms: now,
            envelope: Some(ItemEnvelope::started("bench", Audience::BOTH, now)),
        })
    };
    let completed = |item: ThreadItem| {
        let mut envelope = ItemEnvelope::started("bench", Audience::BOTH, now);
        envelope.status = ItemStatus::Completed;
        envelope.completed_at_ms = Some(now);
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item,
            thread_id: thread.to_owned(),
            turn_id: turn.clone(),
            completed_at_ms: now,
            envelope: Some(envelope),
        })
    };
    let mut turn_started = Turn::new(turn.clone(), TurnStatus::InProgress);
    turn_started.started_at = Some(now / 1000);
    let mut turn_completed = Turn::new(turn.clone(), TurnStatus::Completed);
    turn_completed.completed_at = Some(now / 1000);
    vec![
        ServerNotification::TurnStarted(TurnStartedNotification {
            thread_id: thread.to_owned(),
            turn: turn_started,
        }),
        started(user.clone()),
        completed(user),
        started(ThreadItem::agent_message(agent.id(), "")),
        completed(agent),
        ServerNotification::TurnCompleted(TurnCompletedNotification {
            thread_id: thread.to_owned(),
            turn: turn_completed,
        }),
    ]
}
