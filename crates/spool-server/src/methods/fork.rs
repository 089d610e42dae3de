//! `thread/fork`: a new thread whose history starts as a copy of
//! another's, up to a turn.
//!
//! The store creates the thread (`forkedFromId` = the source) and logs in
//! its own log a copy of each finished turn of the source (same turn and
//! item ids), in one transaction; the source is only read. The forking
//! client gets the new thread's `thread/started` and then its live events,
//! as after `thread/start`; the copied history is in the response (unless
//! `excludeTurns`) and in the log (`thread/resume` with `afterSeq: 0`).

use std::sync::Arc;

use spool_core::View;
use spool_protocol::*;
use spool_store::{Appended, NewThread, Store, StoreError};

use super::{
    MethodError, Reply, admit_existing, history_turns, reply, session, settings_of, thread_record,
    turns_with_items,
};
use crate::connection::ConnectionState;
use crate::hub::{Delivery, Hub};

pub(super) async fn thread_fork(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    params: ThreadForkParams,
) -> Result<Reply, MethodError> {
    let source = thread_record(hub, &params.thread_id).await?;
    let before_turn = copy_before(hub, &params).await?;
    // Checked before the store creates anything.
    let settings = admit_existing(
        hub,
        settings_of(
            params.model.or(source.thread.model.clone()),
            params.cwd,
            params.approval_policy,
            params.sandbox,
            params.developer_instructions.or(params.base_instructions),
        ),
        &source.thread.cwd,
    )?;
    let mut new = NewThread::new(
        hub.provider_name(),
        settings.cwd.clone().unwrap_or_default(),
    );
    new.model = settings.model.clone();
    new.forked_from_id = Some(source.thread.id.clone());
    // A provider's chain cannot be forked: the fork replays spool's log.
    let source_mode = source.thread.history_owner.unwrap_or_default();
    if source_mode != HistoryMode::Replay {
        tracing::info!(
            source = %source.thread.id,
            mode = source_mode.as_str(),
            "the fork of a thread whose history the provider owns starts in replay mode"
        );
    }
    new.history_mode = HistoryMode::Replay;
    new.dev_mode = source.dev_mode;
    let record = hub
        .store()
        .fork_thread(new, &source.thread.id, before_turn.as_deref())
        .await
        .map_err(|error| match error {
            StoreError::Refused { source, .. } => {
                MethodError::invalid_params(format!("cannot fork: {source}"))
            }
            other => other.into(),
        })?;
    let thread_id = record.thread.id.clone();
    hub.set_settings(&thread_id, settings.clone());
    // `thread/started` first, then whatever happens from now on.
    if let Some(started) = hub.store().events_after(&thread_id, 0, 1).await?.pop() {
        let _ = state
            .deliveries
            .send(Delivery::Event(Appended::Logged(started)));
    }
    hub.subscribe(&thread_id, state.id, None, &state.deliveries, &state.room)
        .await?;
    let mut thread = record.thread;
    if !params.exclude_turns {
        thread.turns = turns_with_items(hub, &thread_id).await?;
    }
    reply(session(hub, thread, settings).into_fork())
}

/// The source turn the copy stops before (`None`: copy every finished
/// turn), from `lastTurnId` (inclusive; it must have finished) or
/// `beforeTurnId`.
async fn copy_before(
    hub: &Arc<Hub>,
    params: &ThreadForkParams,
) -> Result<Option<String>, MethodError> {
    let thread_id = &params.thread_id;
    let unknown = |turn_id: &str| {
        MethodError::invalid_params(format!("thread {thread_id} has no turn {turn_id}"))
    };
    match (&params.last_turn_id, &params.before_turn_id) {
        (Some(_), Some(_)) => Err(MethodError::invalid_params(
            "give lastTurnId or beforeTurnId, not both",
        )),
        (None, None) => Ok(None),
        (None, Some(before)) => {
            let turns = history_turns(hub, thread_id, View::All).await?;
            match turns.iter().any(|(turn, _)| &turn.id == before) {
                true => Ok(Some(before.clone())),
                false => Err(unknown(before)),
            }
        }
        (Some(last), None) => {
            let turns = hub.store().turns(thread_id).await?;
            let Some(index) = turns.iter().position(|turn| &turn.id == last) else {
                return Err(unknown(last));
            };
            if !turns[index].status.is_terminal() {
                return Err(MethodError::invalid_params(format!(
                    "turn {last} is still in progress"
                )));
            }
            Ok(turns.get(index + 1).map(|turn| turn.id.clone()))
        }
    }
}
