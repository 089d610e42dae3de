//! (f) and (g): the log underneath sessions, driven the way the runtime
//! drives it (`spool-runtime`'s turn loop): lifecycle events and deltas
//! through `Store::append`, the model's history through `Store::llm_view`.

use std::time::Instant;

use anyhow::ensure;
use serde_json::Value;
use spool_core::llm::LlmViewOptions;
use spool_protocol::{
    Audience, ItemCompletedNotification, ItemEnvelope, ItemStartedNotification, ItemStatus,
    ServerNotification, TextDeltaNotification, ThreadItem, Turn, TurnCompletedNotification,
    TurnStartedNotification, TurnStatus, UserInput,
};
use spool_store::{AnyStore, Appender, NewThread, Store};

use super::workloads::{Sample, Sizes};
use super::{StoreAt, items, open_store};

/// What one streamed token looks like: a short word.
const DELTA: &str = "word ";

/// Turns per `append` while filling (g)'s thread: few enough commits that
/// the untimed setup does not dominate the run.
const SETUP_TURNS_PER_APPEND: usize = 250;

/// (f): deltas on one in-progress agent message, pushed one at a time
/// through an `Appender` as the turn loop streams them, then the
/// completion; timed until the completion is committed (which commits
/// every delta before it).
pub async fn deltas(at: &StoreAt<'_>, sizes: &Sizes) -> anyhow::Result<Sample> {
    let store = open_store(at).await?;
    let thread = Events::new(&store).await?;
    let turn = "turn_0";
    let item = "msg_0";
    thread
        .append(vec![
            thread.turn_started(turn),
            thread.item_started(turn, ThreadItem::agent_message(item, "")),
        ])
        .await?;
    let deltas: Vec<ServerNotification> = (0..sizes.deltas)
        .map(|_| thread.delta(turn, item, DELTA))
        .collect();
    let completed = thread.item_completed(
        turn,
        ThreadItem::agent_message(item, DELTA.repeat(sizes.deltas)),
    );

    // Pushed one by one through the appender, as the runtime's turn loop
    // streams them; the outcomes are not kept (a real caller forwards them).
    let (outcomes, received) = tokio::sync::mpsc::unbounded_channel();
    drop(received);
    let start = Instant::now();
    let appender = Appender::spawn(store.clone(), thread.id.clone(), outcomes);
    for delta in deltas {
        appender.push(vec![delta])?;
    }
    appender.push(vec![completed])?;
    // Returns once the completion is committed, and every delta with it.
    appender.finish().await?;
    let sample = Sample::timed(start.elapsed());

    thread.append(vec![thread.turn_completed(turn)]).await?;
    // thread/started, turn/started, item/started, the deltas, item/completed, turn/completed.
    let expected = sizes.deltas as u64 + 5;
    let last_seq = store.thread(&thread.id).await?.map(|t| t.last_seq);
    ensure!(
        last_seq == Some(expected),
        "the log ends at seq {last_seq:?}, not {expected}"
    );
    store.close().await?;
    Ok(sample)
}

/// (g): the model's history under a token budget, on a long thread.
pub async fn llm_view(at: &StoreAt<'_>, sizes: &Sizes) -> anyhow::Result<Sample> {
    let store = open_store(at).await?;
    let thread = Events::new(&store).await?;
    let turns = sizes.llm_items / 2;
    for first in (0..turns).step_by(SETUP_TURNS_PER_APPEND) {
        let last = (first + SETUP_TURNS_PER_APPEND).min(turns);
        let events = (first..last).flat_map(|k| thread.turn(k)).collect();
        thread.append(events).await?;
    }
    let options = LlmViewOptions {
        token_budget: Some(sizes.llm_budget),
        ..LlmViewOptions::default()
    };
    let cold_start = Instant::now();
    let cold = store.llm_view(&thread.id, options.clone()).await?;
    let cold_seconds = cold_start.elapsed().as_secs_f64();
    // The token counts the first call computed are cached by a later
    // commit; wait for it so the timed call finds them.
    store.flush().await?;

    let start = Instant::now();
    let warm = store.llm_view(&thread.id, options).await?;
    let mut sample = Sample::timed(start.elapsed());
    sample.extra.push(("cold_ms", cold_seconds * 1000.0));

    ensure!(!warm.input.is_empty(), "the llm view is empty");
    ensure!(
        warm.input == cold.input,
        "the second llm view differs from the first"
    );
    ensure!(
        warm.total_tokens <= sizes.llm_budget || warm.turns_included == 1,
        "the llm view holds {} tokens, over its budget of {}",
        warm.total_tokens,
        sizes.llm_budget
    );
    store.close().await?;
    Ok(sample)
}

/// Builds the notifications of one thread, as the runtime would.
struct Events<'a> {
    store: &'a AnyStore,
    id: String,
}

impl<'a> Events<'a> {
    async fn new(store: &'a AnyStore) -> anyhow::Result<Events<'a>> {
        let record = store.create_thread(NewThread::new("bench", "/")).await?;
        Ok(Events {
            store,
            id: record.thread.id,
        })
    }

    async fn append(&self, events: Vec<ServerNotification>) -> anyhow::Result<()> {
        self.store.append(&self.id, events).await?;
        Ok(())
    }

    /// Turn `k`: the user message and the agent's answer of items `2k` and
    /// `2k + 1` (the same texts the session workloads store).
    fn turn(&self, k: usize) -> Vec<ServerNotification> {
        let turn = format!("turn_{k}");
        let (user_n, agent_n) = (2 * k, 2 * k + 1);
        let user = ThreadItem::user_message(
            format!("item_{user_n}"),
            vec![UserInput::text(text_of(&items::item(user_n)))],
        );
        let agent =
            ThreadItem::agent_message(format!("msg_{agent_n}"), text_of(&items::item(agent_n)));
        vec![
            self.turn_started(&turn),
            self.item_started(&turn, user.clone()),
            self.item_completed(&turn, user),
            self.item_started(&turn, ThreadItem::agent_message(agent.id(), "")),
            self.item_completed(&turn, agent),
            self.turn_completed(&turn),
        ]
    }

    fn turn_started(&self, turn: &str) -> ServerNotification {
        let mut turn = Turn::new(turn, TurnStatus::InProgress);
        turn.started_at = Some(now_ms() / 1000);
        ServerNotification::TurnStarted(TurnStartedNotification {
            thread_id: self.id.clone(),
            turn,
        })
    }

    fn turn_completed(&self, turn: &str) -> ServerNotification {
        let mut turn = Turn::new(turn, TurnStatus::Completed);
        turn.completed_at = Some(now_ms() / 1000);
        ServerNotification::TurnCompleted(TurnCompletedNotification {
            thread_id: self.id.clone(),
            turn,
        })
    }

    fn item_started(&self, turn: &str, item: ThreadItem) -> ServerNotification {
        let now = now_ms();
        ServerNotification::ItemStarted(ItemStartedNotification {
            item,
            thread_id: self.id.clone(),
            turn_id: turn.to_owned(),
            started_at_ms: now,
            envelope: Some(ItemEnvelope::started("bench", Audience::BOTH, now)),
        })
    }

    fn item_completed(&self, turn: &str, item: ThreadItem) -> ServerNotification {
        let now = now_ms();
        let mut envelope = ItemEnvelope::started("bench", Audience::BOTH, now);
        envelope.status = ItemStatus::Completed;
        envelope.completed_at_ms = Some(now);
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item,
            thread_id: self.id.clone(),
            turn_id: turn.to_owned(),
            completed_at_ms: now,
            envelope: Some(envelope),
        })
    }

    fn delta(&self, turn: &str, item: &str, text: &str) -> ServerNotification {
        ServerNotification::AgentMessageDelta(TextDeltaNotification {
            thread_id: self.id.clone(),
            turn_id: turn.to_owned(),
            item_id: item.to_owned(),
            delta: text.to_owned(),
        })
    }
}

/// The text of a generated session item (either shape).
fn text_of(item: &Value) -> String {
    let text = match &item["content"] {
        Value::String(text) => Some(text.as_str()),
        content => content[0]["text"].as_str(),
    };
    text.unwrap_or_default().to_owned()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
