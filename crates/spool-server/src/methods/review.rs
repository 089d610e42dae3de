//! `review/start`: a code review run as a turn (see
//! `spool_runtime::Review` for what the turn holds and what the model sees).
//!
//! The changes are read from git in the thread's working directory before
//! anything starts, so a target that cannot be reviewed (not a repository,
//! an unknown commit or branch, no uncommitted changes) is a -32602 reply
//! and no turn. `inline` (the default) runs the review on the thread
//! itself; `detached` creates a new thread in the same directory, with the
//! same settings, subscribes the requesting client to it (its
//! `thread/started` comes first) and runs the review there.

use std::path::Path;
use std::sync::Arc;

use spool_protocol::jsonrpc::error_codes;
use spool_protocol::*;
use spool_runtime::Review;
use spool_store::{NewThread, Store};
use spool_tools::review::{ReviewError, gather};

use super::{MethodError, Reply, reply, thread_record};
use crate::ceilings::Fields;
use crate::connection::ConnectionState;
use crate::hub::Hub;

pub(super) async fn review_start(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    params: ReviewStartParams,
) -> Result<Reply, MethodError> {
    let record = thread_record(hub, &params.thread_id).await?;
    let mut settings = hub.thread_settings(&params.thread_id);
    let cwd = settings
        .cwd
        .clone()
        .filter(|cwd| !cwd.is_empty())
        .unwrap_or(record.thread.cwd.clone());
    settings.cwd = Some(cwd);
    // Settings were checked when they were set; checked again because a
    // detached review starts a new thread with them.
    let settings = hub
        .ceilings()
        .check_thread_settings(settings, &Fields::CLIENT)?;
    let cwd = settings.cwd.clone().unwrap_or_default();
    let material = gather(Path::new(&cwd), &params.target)
        .await
        .map_err(review_error)?;
    let review = Review {
        hint: material.hint,
        prompt: material.prompt,
    };
    let thread_id = match params.delivery.unwrap_or_default() {
        ReviewDelivery::Inline => params.thread_id,
        ReviewDelivery::Detached => {
            let mut new = NewThread::new(hub.provider_name(), cwd);
            new.model = settings.model.clone();
            new.name = Some(format!("Review: {}", review.hint));
            let created = hub.store().create_thread(new).await?;
            let id = created.thread.id;
            hub.set_settings(&id, settings);
            hub.subscribe(&id, state.id, Some(0), &state.deliveries, &state.room)
                .await?;
            id
        }
    };
    let turn = hub.start_review(&thread_id, review).await?;
    reply(ReviewStartResponse {
        turn,
        review_thread_id: thread_id,
    })
}

/// What the client can fix is invalid params; git failing otherwise is
/// the server's problem.
fn review_error(error: ReviewError) -> MethodError {
    let code = match &error {
        ReviewError::NotARepository { .. }
        | ReviewError::NothingToReview { .. }
        | ReviewError::UnknownCommit(_)
        | ReviewError::UnknownBranch(_)
        | ReviewError::EmptyInstructions => error_codes::INVALID_PARAMS,
        ReviewError::Git { .. } | ReviewError::Spawn(_) => error_codes::INTERNAL_ERROR,
    };
    MethodError {
        code,
        message: format!("cannot start the review: {error}"),
    }
}
