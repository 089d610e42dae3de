//! The Session API: conversation memory in the shape of the OpenAI Agents
//! SDK's sessions, over spool's log (`docs/internals/sessions.md`).
//!
//! A session is a thread whose id is the session id. Its items are
//! Responses API input items as JSON, kept exactly as given:
//!
//! - `add_items` appends one turn per call (`turn/started`, then
//!   `item/started` + `item/completed` per item, then `turn/completed`) in
//!   one `append`, which is one transaction. Each item is filed as the
//!   closest spool item (`codec/filing.rs`) and carries the raw JSON in
//!   `envelope.providerData.inputItem` (only on its completion: the start
//!   announces the item, the completion is authoritative), which the store
//!   keeps in a column of its own so reads decode only that.
//! - `get_items` returns the raw items (items the runtime added to the
//!   same thread come converted as the model view converts them). After a
//!   compaction (a `contextCompaction` item, which `spool_runtime`'s
//!   `CompactingSession` writes) it returns the summary, then the newer
//!   items: the older ones stay in the log, and in the `all` view.
//! - `pop_item` logs `item/removed` and `clear` logs `thread/cleared`: the
//!   log keeps the history, the projection drops the rows, and every view
//!   follows. The store chooses the newest item and logs its removal in
//!   one transaction of its single writer, so a pop is atomic.
//!
//! The session's items are the thread's items in the model's view; items
//! only a UI sees (components the runtime added, say) are not among them.

mod window;

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use spool_core::ItemRecord;
use spool_core::llm::{INPUT_ITEM_KEY, ReasoningIdPolicy, input_items, raw_input_item};
use spool_protocol::{
    ItemCompletedNotification, ItemEnvelope, ItemStatus, Provenance, ServerNotification,
    ThreadClearedNotification, Turn, TurnCompletedNotification, TurnStartedNotification,
    TurnStatus,
};

use crate::codec::filing;
use crate::error::StoreError;
use crate::input_json::InputJson;
use crate::phases::{Phase, Timer};
use crate::sqlite::SqliteStore;
use crate::types::{InputItems, NewThread};
use crate::{Store, ToAppend};

/// The model provider recorded on threads a session creates: they are
/// filled by the session's caller, not by a provider spool runs.
const SESSION_PROVIDER: &str = "session";

/// Conversation memory for one session id (see the module docs). Cheap to
/// keep around; any number of sessions (and clones of the store) may use
/// the same id at once.
#[derive(Debug, Clone)]
pub struct Session<S = SqliteStore> {
    store: S,
    id: String,
}

impl<S: Store> Session<S> {
    /// Opens the session with this id, creating its thread if it does not
    /// exist.
    pub async fn open(store: S, session_id: &str) -> Result<Session<S>, StoreError> {
        if store.thread(session_id).await?.is_none() {
            let new = NewThread {
                id: Some(session_id.to_owned()),
                ..NewThread::new(SESSION_PROVIDER, "")
            };
            match store.create_thread(new).await {
                // Someone else created it meanwhile: that is the session.
                Ok(_) | Err(StoreError::ThreadExists(_)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(Session {
            store,
            id: session_id.to_owned(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The latest `limit` items in chronological order (`None`: all,
    /// `Some(0)`: none), exactly as they were added. A window that leaves
    /// items out never holds a tool output (`function_call_output`, …)
    /// whose call it left out: such an output is left out of the result,
    /// never deleted (`get_items(None)` still has it). A finished
    /// compaction stands for every item before it: the window ends there,
    /// with the summary.
    pub async fn get_items(&self, limit: Option<usize>) -> Result<Vec<Value>, StoreError> {
        self.get_items_as(limit).await
    }

    /// [`Session::get_items`], each item as its JSON text
    /// ([`RawValue::get`]), checked but never built into a [`Value`]: for
    /// a caller that passes the items on (into a model request, over the
    /// wire) without looking inside. The same items, the same window.
    pub async fn get_items_raw(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<Box<RawValue>>, StoreError> {
        self.get_items_as(limit).await
    }

    async fn get_items_as<T: InputJson>(&self, limit: Option<usize>) -> Result<Vec<T>, StoreError> {
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let InputItems { items, complete } = self.store.input_items(&self.id, limit).await?;
        Ok(match complete {
            true => items,
            false => window::without_cut_outputs(items),
        })
    }

    /// Adds the items as one turn, in one durable transaction (durable
    /// when this returns, at the store's durability level). No items, no
    /// turn.
    pub async fn add_items(&self, items: Vec<Value>) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let timer = Timer::start();
        let notifications = turn_of(&self.id, items, now_ms());
        timer.stop(Phase::Session);
        self.store.append_quiet(&self.id, notifications).await
    }

    /// Atomically removes the newest item and returns it (`None` when the
    /// session is empty), also against other handles on the same session.
    pub async fn pop_item(&self) -> Result<Option<Value>, StoreError> {
        let popped = self.store.pop_item(&self.id).await?;
        popped.map(as_input_item).transpose()
    }

    /// Removes every item (logged as `thread/cleared`; the log keeps them).
    pub async fn clear(&self) -> Result<(), StoreError> {
        let cleared = ServerNotification::ThreadCleared(ThreadClearedNotification {
            thread_id: self.id.clone(),
        });
        self.store.append(&self.id, vec![cleared]).await?;
        Ok(())
    }
}

/// The entries of one `add_items` call: a turn holding the items, each
/// born complete and given as its completion alone (its start is implied:
/// `ToAppend::BornComplete`).
fn turn_of(thread_id: &str, items: Vec<Value>, now_ms: i64) -> Vec<ToAppend> {
    let mut ids = CallIds::new(items.len());
    let turn_id = ids.next();
    let mut turn = Turn::new(turn_id.clone(), TurnStatus::InProgress);
    turn.started_at = Some(now_ms.div_euclid(1000));
    let mut entries = Vec::with_capacity(items.len() + 2);
    entries.push(ToAppend::Notification(ServerNotification::TurnStarted(
        TurnStartedNotification {
            thread_id: thread_id.to_owned(),
            turn: turn.clone(),
        },
    )));
    for raw in items {
        let item = filing::thread_item(ids.next(), &raw);
        // Sized for its one key: an empty map grows its table on the first
        // insert, ~200 instructions an item more (callgrind, `bench store
        // --workloads b`).
        let mut provider_data = serde_json::Map::with_capacity(1);
        provider_data.insert(INPUT_ITEM_KEY.to_owned(), raw);
        let envelope = ItemEnvelope {
            status: ItemStatus::Completed,
            started_at_ms: now_ms,
            completed_at_ms: Some(now_ms),
            provenance: Provenance {
                agent: filing::agent(&item).to_owned(),
                ..Provenance::default()
            },
            audience: filing::audience(&item),
            provider_data: Some(Arc::new(Value::Object(provider_data))),
        };
        entries.push(ToAppend::BornComplete(ItemCompletedNotification {
            item,
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.clone(),
            completed_at_ms: now_ms,
            envelope: Some(envelope),
        }));
    }
    turn.status = TurnStatus::Completed;
    turn.completed_at = turn.started_at;
    turn.duration_ms = Some(0);
    entries.push(ToAppend::Notification(ServerNotification::TurnCompleted(
        TurnCompletedNotification {
            thread_id: thread_id.to_owned(),
            turn,
        },
    )));
    entries
}

/// The ids of one `add_items` call, turn first, as UUIDv7 text in
/// increasing order.
///
/// The turn's id is a fresh `Uuid::now_v7`; each item's is the one before
/// it plus one. A v7 id from the `uuid` crate ends in 32 random bits below
/// its counter, so while adding the call's items to them does not carry,
/// every id of the call sorts after the turn's and before any id the
/// process makes next: unique, and increasing as the writer's fresh-id
/// check likes (`thread_state/fresh_ids.rs`). When it would carry, each id
/// is a fresh `now_v7`. A fresh `now_v7` per item cost ~560 instructions,
/// and formatting it ~300 more.
struct CallIds {
    next: Option<u128>,
}

impl CallIds {
    fn new(items: usize) -> CallIds {
        CallIds::from(uuid::Uuid::now_v7().as_u128(), items)
    }

    /// The ids of a call of `items` items whose turn's id is `first`.
    fn from(first: u128, items: usize) -> CallIds {
        let room = u64::from(u32::MAX - first as u32);
        let fits = u64::try_from(items).is_ok_and(|items| items <= room);
        CallIds {
            next: Some(first).filter(|_| fits),
        }
    }

    fn next(&mut self) -> String {
        let id = match self.next.as_mut() {
            Some(next) => {
                let id = *next;
                *next += 1;
                id
            }
            None => uuid::Uuid::now_v7().as_u128(),
        };
        let mut text = uuid::Uuid::encode_buffer();
        uuid::Uuid::from_u128(id)
            .hyphenated()
            .encode_lower(&mut text)
            .to_owned()
    }
}

/// Now, in unix milliseconds.
fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// A popped record as the session gives it back: its raw input item, or,
/// for an item the runtime added, the last input item it converts to (a
/// tool item's output; its call went with it), or as a last resort the
/// spool item itself.
fn as_input_item(record: ItemRecord) -> Result<Value, StoreError> {
    if let Some(raw) = raw_input_item(&record) {
        return Ok(raw.clone());
    }
    let encoded = match input_items(&record, ReasoningIdPolicy::Preserve).pop() {
        Some(item) => serde_json::to_value(item),
        None => serde_json::to_value(&record.item),
    };
    encoded.map_err(|source| StoreError::Encode {
        what: "popped item",
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::CallIds;

    fn ids(mut call: CallIds, count: usize) -> Vec<String> {
        let ids: Vec<String> = (0..count).map(|_| call.next()).collect();
        for id in &ids {
            let id = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(id.get_version_num(), 7);
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        }
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
        ids
    }

    #[test]
    fn a_calls_ids_are_v7_increasing_and_below_the_next_one() {
        let made = ids(CallIds::new(100), 101);
        assert!(uuid::Uuid::now_v7().to_string() > made[100]);
        let first = uuid::Uuid::parse_str(&made[0]).unwrap().as_u128();
        let last = uuid::Uuid::parse_str(&made[100]).unwrap().as_u128();
        assert_eq!(last - first, 100, "counted up from the turn's id");
    }

    #[test]
    fn ids_that_would_carry_into_the_counter_are_fresh() {
        let first =
            uuid::Uuid::now_v7().as_u128() & !u128::from(u32::MAX) | u128::from(u32::MAX - 5);
        let made = ids(CallIds::from(first, 10), 11);
        assert!(
            made.iter()
                .all(|id| uuid::Uuid::parse_str(id).unwrap().as_u128() != first)
        );
        // Room for exactly its items: counted up.
        let made = ids(CallIds::from(first, 5), 6);
        assert_eq!(
            uuid::Uuid::parse_str(&made[5]).unwrap().as_u128() as u32,
            u32::MAX
        );
    }
}
