//! Methods that change a thread without running a turn: `thread/archive`,
//! `thread/unarchive`, `thread/name/set`, `thread/revert`,
//! `thread/rollback`, and `turn/steer` (input for the running turn).
//!
//! Each records what it does in the thread's log (never by rewriting it)
//! and streams the logged events to the thread's watchers:
//! `thread/archived`, `thread/unarchived`, `thread/name/updated`,
//! `item/removed` for every item of reverted turns then `thread/reverted`,
//! a `userMessage` item for steering (and for `turn/start` while a turn
//! runs).

use std::sync::Arc;

use spool_core::View;
use spool_protocol::*;
use spool_runtime::output_mapper::new_item_id;
use spool_store::{Appended, Store, StoreError};

use super::history::{Place, cursor};
use super::{MethodError, Reply, history_turns, reply, thread_record, turns_with_items};
use crate::hub::Hub;

pub(super) async fn archive(
    hub: &Arc<Hub>,
    params: ThreadArchiveParams,
) -> Result<Reply, MethodError> {
    thread_record(hub, &params.thread_id).await?;
    let events = hub.store().set_archived(&params.thread_id, true).await?;
    hub.publish(&params.thread_id, events);
    reply(ThreadArchiveResponse {})
}

pub(super) async fn unarchive(
    hub: &Arc<Hub>,
    params: ThreadUnarchiveParams,
) -> Result<Reply, MethodError> {
    thread_record(hub, &params.thread_id).await?;
    let events = hub.store().set_archived(&params.thread_id, false).await?;
    hub.publish(&params.thread_id, events);
    let record = thread_record(hub, &params.thread_id).await?;
    reply(ThreadUnarchiveResponse {
        thread: record.thread,
    })
}

pub(super) async fn set_name(
    hub: &Arc<Hub>,
    params: ThreadSetNameParams,
) -> Result<Reply, MethodError> {
    let name = params.name.trim();
    if name.is_empty() {
        return Err(MethodError::invalid_params("a thread name cannot be empty"));
    }
    thread_record(hub, &params.thread_id).await?;
    let renamed = ServerNotification::ThreadNameUpdated(ThreadNameUpdatedNotification {
        thread_id: params.thread_id.clone(),
        thread_name: Some(name.to_owned()),
    });
    let appended = hub.store().append(&params.thread_id, vec![renamed]).await?;
    hub.publish(&params.thread_id, logged(appended));
    reply(ThreadSetNameResponse {})
}

fn logged(appended: Vec<Appended>) -> Vec<ThreadEvent> {
    appended
        .into_iter()
        .filter_map(|a| match a {
            Appended::Logged(event) => Some(event),
            Appended::Transient(_) => None,
        })
        .collect()
}

/// Refuses while the thread runs a turn in this process (the store
/// refuses a turn left in progress by a paused run).
fn ensure_idle(hub: &Hub, thread_id: &str) -> Result<(), MethodError> {
    match hub.running_turn(thread_id) {
        Some(turn) => Err(MethodError::invalid_params(format!(
            "thread {thread_id} has a turn in progress ({turn}); interrupt it first"
        ))),
        None => Ok(()),
    }
}

/// Logs the removal of `first_turn_id` and every later turn and streams
/// it; a refusal (a turn in progress) is the caller's error.
async fn revert_from(
    hub: &Arc<Hub>,
    thread_id: &str,
    first_turn_id: &str,
) -> Result<(), MethodError> {
    let removed = hub
        .store()
        .revert_turns(thread_id, first_turn_id)
        .await
        .map_err(|error| match error {
            StoreError::Refused { source, .. } => {
                MethodError::invalid_params(format!("cannot revert thread {thread_id}: {source}"))
            }
            other => other.into(),
        })?;
    hub.publish(thread_id, removed);
    Ok(())
}

pub(super) async fn revert(
    hub: &Arc<Hub>,
    params: ThreadRevertParams,
) -> Result<Reply, MethodError> {
    let thread_id = &params.thread_id;
    thread_record(hub, thread_id).await?;
    ensure_idle(hub, thread_id)?;
    let turns = history_turns(hub, thread_id, View::All).await?;
    if !turns
        .iter()
        .any(|(turn, _)| turn.id == params.before_turn_id)
    {
        return Err(MethodError::invalid_params(format!(
            "thread {thread_id} has no turn {}",
            params.before_turn_id
        )));
    }
    revert_from(hub, thread_id, &params.before_turn_id).await?;
    let record = thread_record(hub, thread_id).await?;
    // Cursors from the end of what is left: the first page going back
    // holds the newest kept turn (item).
    let end = record.last_seq + 1;
    let kept = history_turns(hub, thread_id, View::Client).await?;
    let any_item = kept.iter().any(|(_, items)| !items.is_empty());
    reply(ThreadRevertResponse {
        thread: record.thread,
        turns_backwards_cursor: (!kept.is_empty()).then(|| cursor(Place::Turn, end)),
        items_backwards_cursor: any_item.then(|| cursor(Place::Item, end)),
    })
}

pub(super) async fn rollback(
    hub: &Arc<Hub>,
    params: ThreadRollbackParams,
) -> Result<Reply, MethodError> {
    let thread_id = &params.thread_id;
    if params.num_turns == 0 {
        return Err(MethodError::invalid_params("numTurns must be at least 1"));
    }
    thread_record(hub, thread_id).await?;
    ensure_idle(hub, thread_id)?;
    let turns = history_turns(hub, thread_id, View::All).await?;
    let drop = (params.num_turns as usize).min(turns.len());
    if let Some((first, _)) = turns.get(turns.len() - drop) {
        revert_from(hub, thread_id, &first.id).await?;
    }
    let mut thread = thread_record(hub, thread_id).await?.thread;
    thread.turns = turns_with_items(hub, thread_id).await?;
    reply(ThreadRollbackResponse { thread })
}

/// `turn/steer`: the input becomes a `userMessage` item of the running
/// turn, logged at once; the turn's next model call reads it with the rest
/// of the history, and a turn whose model answered while it arrived makes
/// one more call for it (as Codex does).
pub(super) async fn steer(hub: &Arc<Hub>, params: TurnSteerParams) -> Result<Reply, MethodError> {
    let thread_id = &params.thread_id;
    if params.input.is_empty() {
        return Err(MethodError::invalid_params("turn/steer needs some input"));
    }
    hub.check_input_size(&params.input)?;
    thread_record(hub, thread_id).await?;
    match hub.running_turn(thread_id) {
        Some(running) if running == params.expected_turn_id => {}
        Some(running) if !running.is_empty() => {
            return Err(MethodError::invalid_params(format!(
                "turn {} is not the running turn of thread {thread_id} ({running} is)",
                params.expected_turn_id
            )));
        }
        _ => {
            return Err(MethodError::invalid_params(format!(
                "thread {thread_id} has no turn in progress (expected {})",
                params.expected_turn_id
            )));
        }
    }
    let turn_id = params.expected_turn_id;
    feed_running_turn(
        hub,
        thread_id,
        &turn_id,
        params.input,
        params.client_user_message_id,
    )
    .await?;
    reply(TurnSteerResponse { turn_id })
}

/// Logs `input` as a user message of the running turn `turn_id` and tells
/// the run (`turn/steer`, and `turn/start` while a turn runs).
pub(super) async fn feed_running_turn(
    hub: &Arc<Hub>,
    thread_id: &str,
    turn_id: &str,
    input: Vec<UserInput>,
    client_user_message_id: Option<String>,
) -> Result<(), MethodError> {
    let mut item = ThreadItem::user_message(new_item_id(), input);
    if let ThreadItem::UserMessage { client_id, .. } = &mut item {
        *client_id = client_user_message_id;
    }
    let now = now_ms();
    let open = ItemEnvelope::started("user", item.kind().default_audience(), now);
    let done = ItemEnvelope {
        status: ItemStatus::Completed,
        completed_at_ms: Some(now),
        ..open.clone()
    };
    let events = vec![
        ServerNotification::ItemStarted(ItemStartedNotification {
            item: item.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            started_at_ms: now,
            envelope: Some(open),
        }),
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item,
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            completed_at_ms: now,
            envelope: Some(done),
        }),
    ];
    let appended = hub
        .store()
        .append(thread_id, events)
        .await
        .map_err(|error| match error {
            // The turn ended between the check and the append.
            StoreError::Refused { source, .. } => MethodError::invalid_params(format!(
                "turn {turn_id} no longer takes input: {source}"
            )),
            other => other.into(),
        })?;
    hub.publish(thread_id, logged(appended));
    hub.input_added(thread_id);
    Ok(())
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}
