//! Token usage reported at the end of a turn.

use spool_protocol::*;
use spool_store::{Store, StoreError};

/// `thread/tokenUsage/updated` for a turn that used `last`: the thread's
/// total is every earlier turn's usage plus this one (read from the store,
/// so it costs one read of the thread's turns).
pub(crate) async fn token_usage_update<S: Store>(
    store: &S,
    thread_id: &str,
    turn_id: &str,
    last: TokenUsageBreakdown,
) -> Result<ServerNotification, StoreError> {
    let mut total = TokenUsageBreakdown::default();
    for turn in store.turns(thread_id).await? {
        if let Some(usage) = &turn.token_usage {
            total.add(usage);
        }
    }
    total.add(&last);
    Ok(ServerNotification::ThreadTokenUsageUpdated(
        ThreadTokenUsageUpdatedNotification {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            token_usage: ThreadTokenUsage {
                total,
                last,
                model_context_window: None,
            },
        },
    ))
}
