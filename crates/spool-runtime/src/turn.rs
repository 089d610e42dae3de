//! One turn: record the user's input, call the model with the thread's
//! history, and record what it answers as items, streaming each event to
//! the caller once the store has given it a seq.
//!
//! Lifecycle events are durable before the caller sees them (the store
//! resolves their append after the commit); deltas are forwarded as soon as
//! their seq is assigned and committed in groups. Whatever happens — a
//! provider error, a dropped stream, an interrupt — the turn ends with
//! exactly one `turn/completed`, and items left open end `incomplete`.

use futures_util::StreamExt;
use spool_model::{ModelEvent, ModelProvider, ModelRequest};
use spool_protocol::*;
use tokio::sync::{mpsc, watch};

use spool_core::llm::LlmViewOptions;
use spool_store::{Appended, Appender, Store};

use crate::output_mapper::{OutputMapper, new_item_id};
use crate::{RuntimeError, now_ms};

/// How to run one turn.
#[derive(Debug, Clone)]
pub struct TurnOptions {
    pub model: String,
    pub instructions: Option<String>,
    /// Token budget of the history sent to the model (`None`: everything).
    pub history_token_budget: Option<usize>,
    /// The agent name recorded in provenance.
    pub agent: String,
    /// Cap on the tokens the model may write in one response.
    pub max_output_tokens: Option<u32>,
    pub temperature: Option<f32>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub turn_id: String,
    pub status: TurnStatus,
    pub error: Option<TurnError>,
    pub usage: Option<TokenUsageBreakdown>,
    /// The text of the last agent message, if any.
    pub final_text: Option<String>,
}

/// Resolves when the caller asks the turn to stop.
pub type InterruptSignal = watch::Receiver<bool>;

enum ResponseEnd {
    Completed { usage: Option<TokenUsageBreakdown> },
    Failed(TurnError),
    Interrupted,
}

/// Runs one turn on `thread_id` and returns how it ended. Errors are only
/// those of the store: a model failure is a failed turn, not an error.
pub async fn run_turn<S: Store + Clone + 'static>(
    store: &S,
    provider: &dyn ModelProvider,
    thread_id: &str,
    input: Vec<UserInput>,
    options: &TurnOptions,
    events: &mpsc::UnboundedSender<Appended>,
    mut interrupt: InterruptSignal,
) -> Result<TurnOutcome, RuntimeError> {
    let turn_id = new_item_id();
    let started_at_ms = now_ms();
    // Events stream through an appender: the loop never waits for a delta's
    // round trip to the writer, and what queues up behind an append in
    // flight goes as one. Its outcomes reach `events` in order; a caller
    // that stopped listening does not stop the turn.
    let appender = Appender::spawn(store.clone(), thread_id, events.clone());
    let emit = |payloads: Vec<ServerNotification>| appender.push(payloads);

    emit(vec![ServerNotification::TurnStarted(
        TurnStartedNotification {
            thread_id: thread_id.to_owned(),
            turn: Turn {
                id: turn_id.clone(),
                items: Vec::new(),
                items_view: TurnItemsView::NotLoaded,
                status: TurnStatus::InProgress,
                error: None,
                started_at: Some(started_at_ms / 1000),
                completed_at: None,
                duration_ms: None,
                token_usage: None,
            },
        },
    )])?;
    emit(user_message(thread_id, &turn_id, input))?;
    // The history read below must see the user's message.
    appender.sync().await?;

    let history = store
        .llm_view(
            thread_id,
            LlmViewOptions {
                token_budget: options.history_token_budget,
                ..LlmViewOptions::default()
            },
        )
        .await?
        .input;
    let request = ModelRequest {
        model: options.model.clone(),
        instructions: options.instructions.clone(),
        input: history,
        max_output_tokens: options.max_output_tokens,
        temperature: options.temperature,
        ..ModelRequest::default()
    };
    let mut mapper = OutputMapper::new(thread_id, &turn_id, &options.agent);
    let mut final_text = None;
    let mut stream = provider.stream(request);
    let end = loop {
        let next = tokio::select! {
            next = stream.next() => next,
            // A dropped sender can no longer ask: that is not a stop.
            Ok(_) = interrupt.wait_for(|stop| *stop) => break ResponseEnd::Interrupted,
        };
        match next {
            Some(Ok(ModelEvent::Completed { usage, .. })) => {
                break ResponseEnd::Completed { usage };
            }
            Some(Ok(event)) => {
                let payloads = mapper.on_event(event, now_ms());
                for p in &payloads {
                    if let ServerNotification::ItemCompleted(ItemCompletedNotification {
                        item: ThreadItem::AgentMessage { text, .. },
                        ..
                    }) = p
                    {
                        final_text = Some(text.clone());
                    }
                }
                emit(payloads)?;
            }
            Some(Err(e)) => {
                break ResponseEnd::Failed(TurnError::new(
                    e.to_string(),
                    Some(e.codex_error_info()),
                ));
            }
            None => {
                break ResponseEnd::Failed(TurnError::new(
                    format!(
                        "provider {} ended its stream without completing the response",
                        provider.name()
                    ),
                    Some(CodexErrorInfo::ResponseStreamDisconnected {
                        http_status_code: None,
                    }),
                ));
            }
        }
    };
    drop(stream);

    // Tools arrive with the agent loop; until then a call has nobody to
    // answer it, which the model is told in the call's output.
    let now = now_ms();
    let unanswered: Vec<ServerNotification> = mapper
        .take_pending_calls()
        .into_iter()
        .map(|call| {
            let (name, _) = call.name_and_arguments();
            let output = format!("no tool named `{name}` is available to this agent");
            call.complete(FunctionCallStatus::Failed, output, 0, now)
        })
        .collect();
    emit(unanswered)?;
    emit(mapper.close_open(now))?;

    let (status, error, usage) = match end {
        ResponseEnd::Completed { usage } => (TurnStatus::Completed, None, usage),
        ResponseEnd::Failed(error) => {
            emit(vec![ServerNotification::Error(ErrorNotification {
                error: error.clone(),
                will_retry: false,
                thread_id: thread_id.to_owned(),
                turn_id: turn_id.clone(),
            })])?;
            (TurnStatus::Failed, Some(error), None)
        }
        ResponseEnd::Interrupted => (TurnStatus::Interrupted, None, None),
    };
    if let Some(last) = usage {
        emit(vec![
            crate::usage::token_usage_update(store, thread_id, &turn_id, last).await?,
        ])?;
    }
    let completed_at_ms = now_ms();
    emit(vec![ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: thread_id.to_owned(),
            turn: Turn {
                id: turn_id.clone(),
                items: Vec::new(),
                items_view: TurnItemsView::NotLoaded,
                status,
                error: error.clone(),
                started_at: Some(started_at_ms / 1000),
                completed_at: Some(completed_at_ms / 1000),
                duration_ms: Some(completed_at_ms - started_at_ms),
                token_usage: usage,
            },
        },
    )])?;
    appender.finish().await?;
    Ok(TurnOutcome {
        turn_id,
        status,
        error,
        usage,
        final_text,
    })
}

/// `item/started` and `item/completed` of the user's message.
fn user_message(thread_id: &str, turn_id: &str, input: Vec<UserInput>) -> Vec<ServerNotification> {
    let now = now_ms();
    let item = ThreadItem::user_message(new_item_id(), input);
    let started = ItemEnvelope::started("user", Audience::BOTH, now);
    let mut completed = started.clone();
    completed.status = ItemStatus::Completed;
    completed.completed_at_ms = Some(now);
    vec![
        ServerNotification::ItemStarted(ItemStartedNotification {
            item: item.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            started_at_ms: now,
            envelope: Some(started),
        }),
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item,
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            completed_at_ms: now,
            envelope: Some(completed),
        }),
    ]
}
