//! What a server-managed history still lacks: the tracker.
//!
//! In the `previousResponseId` and `conversationId` modes the provider keeps
//! the conversation, and each request carries only what it does not hold
//! yet. [`HistoryCursor`] says what it holds, in a form whose size does not
//! grow with the thread, so preparing a request reads the new records only:
//!
//! - every input item of a record at or before `through_ordinal` is held,
//!   except the parts listed in `unsent`;
//! - a record after it is held in none of its parts, except the call half
//!   of a tool exchange whose call a response the provider stored made
//!   (`held_calls`): the model produced it, the provider kept it, and spool
//!   files the call's record only once that response has ended.
//!
//! A *part* is one input item of a record's conversion (a tool record is
//! two: its call and its output), named by the record's item id and its
//! position ([`PartKey`]).
//!
//! A request goes through three steps, and only the last moves the cursor:
//!
//! 1. [`HistoryCursor::prepare`] converts the records after
//!    `through_ordinal` and those with unsent parts, leaves out the parts
//!    held, and removes duplicates; every item keeps its part's key.
//! 2. [`Prepared::mark_sent`], after any input filter, matches the list
//!    actually sent to those keys. A part the filter left out stays unsent.
//!    Marks come from that list and nothing else: what is prepared later (a
//!    retry, the next call) starts from the cursor again.
//! 3. [`HistoryCursor::acknowledge`]: only a response the provider stored
//!    (in `previousResponseId` mode: one that completed with an id) moves
//!    the cursor. A failed request, or a response without an id, leaves it
//!    where it was, so the next attempt sends the same delta — nothing is
//!    lost, nothing sent twice — and an earlier valid
//!    `previous_response_id` is never replaced by nothing.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use spool_protocol::responses::{KnownResponseItem, ResponseItem};

use super::ReasoningIdPolicy;
use super::convert::{convert, in_view};
use super::sanitize::{ToolSide, side};
use crate::record::ItemRecord;

/// One input item of a record's conversion.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartKey {
    pub item_id: String,
    pub part: u32,
}

/// What the provider holds of a thread's history (see the module docs).
/// The default holds nothing: the next request carries the whole view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryCursor {
    /// The stored response the next request continues from
    /// (`previousResponseId` mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Records at or before this ordinal are held, but for `unsent`.
    #[serde(default)]
    pub through_ordinal: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsent: Vec<PartKey>,
    /// Call ids whose call half the provider holds although their records
    /// come after `through_ordinal`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_calls: Vec<String>,
}

/// A request's input, each item with the part it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Oldest first: what the request carries unless a filter changes it.
    pub input: Vec<ResponseItem>,
    keys: Vec<PartKey>,
    /// The newest record prepared from.
    through: u64,
    /// Held calls whose records were among those prepared: from now on
    /// `through_ordinal` covers their call halves.
    calls_filed: Vec<String>,
}

/// What a request carried, as the cursor needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    through: u64,
    /// Parts prepared but not in the list sent (an input filter left them
    /// out): still owed to the provider.
    not_sent: Vec<PartKey>,
    calls_filed: Vec<String>,
}

/// How one response ended, as the cursor needs it.
pub struct Response<'a> {
    /// The provider holds the request and its output: a response that
    /// completed with an id in `previousResponseId` mode, any completed
    /// response in `conversationId` mode.
    pub stored: bool,
    pub response_id: Option<String>,
    /// Records in the view logged after the request was prepared, as they
    /// stand once the response ended: the response's own output and any
    /// input that arrived meanwhile (a steer).
    pub logged_since: &'a [ItemRecord],
    /// Item ids of the records the response produced.
    pub produced: &'a HashSet<String>,
    /// Call ids of the calls it made.
    pub calls: Vec<String>,
}

impl HistoryCursor {
    /// Item ids of the records holding unsent parts: read them with the
    /// records after `through_ordinal`.
    pub fn unsent_item_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.unsent.iter().map(|k| k.item_id.clone()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The input of the next request from `records` (ordinal order): the
    /// thread's records in the view after `through_ordinal`, plus those
    /// named by [`unsent_item_ids`](Self::unsent_item_ids). Records of
    /// other kinds, or outside the view, are skipped.
    pub fn prepare(&self, records: &[ItemRecord], policy: ReasoningIdPolicy) -> Prepared {
        let unsent: HashSet<&PartKey> = self.unsent.iter().collect();
        let held: HashSet<&str> = self.held_calls.iter().map(String::as_str).collect();
        let mut prepared = Prepared {
            input: Vec::new(),
            keys: Vec::new(),
            through: self.through_ordinal,
            calls_filed: Vec::new(),
        };
        let mut seen_keys = HashSet::new();
        let mut seen_ids = HashSet::new();
        let mut seen_outputs = HashSet::new();
        let mut parts = Vec::new();
        for record in records.iter().filter(|r| in_view(r)) {
            let old = record.ordinal <= self.through_ordinal;
            prepared.through = prepared.through.max(record.ordinal);
            parts.clear();
            convert(record, policy, &mut parts);
            for (index, item) in parts.drain(..).enumerate() {
                let key = PartKey {
                    item_id: record.item.id().to_owned(),
                    part: u32::try_from(index).unwrap_or(u32::MAX),
                };
                if let Some(ToolSide::Call(call_id)) = side(&item)
                    && held.contains(call_id)
                {
                    prepared.calls_filed.push(call_id.to_owned());
                    continue;
                }
                if old && !unsent.contains(&key) {
                    continue;
                }
                // Duplicates: the same part twice, then the same provider
                // item id, then a second output for one call.
                if !seen_keys.insert(key.clone()) {
                    continue;
                }
                if let Some(id) = provider_id(&item)
                    && !id.is_empty()
                    && !seen_ids.insert(id.to_owned())
                {
                    continue;
                }
                if let Some(ToolSide::Output(call_id)) = side(&item)
                    && !seen_outputs.insert(call_id.to_owned())
                {
                    continue;
                }
                prepared.input.push(item);
                prepared.keys.push(key);
            }
        }
        prepared
    }

    /// The cursor after `response`, or `None` when it does not move (the
    /// provider did not store the response).
    pub fn acknowledge(&self, sent: &Sent, response: Response<'_>) -> Option<HistoryCursor> {
        if !response.stored {
            return None;
        }
        let mut through = sent.through;
        let mut unsent = sent.not_sent.clone();
        let mut parts = Vec::new();
        for record in response.logged_since.iter().filter(|r| in_view(r)) {
            through = through.max(record.ordinal);
            if response.produced.contains(record.item.id()) {
                continue;
            }
            parts.clear();
            convert(record, ReasoningIdPolicy::Preserve, &mut parts);
            unsent.extend((0..parts.len()).map(|index| PartKey {
                item_id: record.item.id().to_owned(),
                part: u32::try_from(index).unwrap_or(u32::MAX),
            }));
        }
        let mut held_calls: Vec<String> = self
            .held_calls
            .iter()
            .filter(|call| !sent.calls_filed.contains(call))
            .cloned()
            .collect();
        held_calls.extend(response.calls);
        Some(HistoryCursor {
            previous_response_id: response
                .response_id
                .or_else(|| self.previous_response_id.clone()),
            through_ordinal: through,
            unsent,
            held_calls,
        })
    }
}

impl Sent {
    /// The newest record the request was prepared from: records after it
    /// were logged while the response ran.
    pub fn through(&self) -> u64 {
        self.through
    }
}

impl Prepared {
    /// The marks of a request that carried `sent` (the prepared input, or
    /// what an input filter made of it). Each item sent takes the key of
    /// the prepared item it is: an equal one first, then one of the same
    /// type and `call_id` in order (the filter changed it). Prepared items
    /// left unmatched were not sent.
    pub fn mark_sent(&self, sent: &[ResponseItem]) -> Sent {
        let mut matched = vec![false; self.input.len()];
        let mut unmatched_sent = Vec::new();
        for item in sent {
            match (0..self.input.len()).find(|&i| !matched[i] && self.input[i] == *item) {
                Some(i) => matched[i] = true,
                None => unmatched_sent.push(item),
            }
        }
        for item in unmatched_sent {
            let wanted = shape(item);
            if let Some(i) =
                (0..self.input.len()).find(|&i| !matched[i] && shape(&self.input[i]) == wanted)
            {
                matched[i] = true;
            }
        }
        Sent {
            through: self.through,
            not_sent: self
                .keys
                .iter()
                .zip(matched)
                .filter(|(_, matched)| !matched)
                .map(|(key, _)| key.clone())
                .collect(),
            calls_filed: self.calls_filed.clone(),
        }
    }
}

/// The provider's id of an input item, if it carries one.
fn provider_id(item: &ResponseItem) -> Option<&str> {
    match item {
        ResponseItem::Known(
            KnownResponseItem::Message { id, .. }
            | KnownResponseItem::FunctionCall { id, .. }
            | KnownResponseItem::WebSearchCall { id, .. },
        ) => id.as_deref(),
        ResponseItem::Known(KnownResponseItem::Reasoning { id, .. }) => Some(id),
        ResponseItem::Known(KnownResponseItem::FunctionCallOutput { .. }) => None,
        ResponseItem::Other(value) => value.get("id").and_then(Value::as_str),
    }
}

/// An item's type and `call_id`: what a filter is not expected to change.
fn shape(item: &ResponseItem) -> (Option<String>, Option<String>) {
    let json = serde_json::to_value(item).unwrap_or(Value::Null);
    let field = |name: &str| json.get(name).and_then(Value::as_str).map(str::to_owned);
    (field("type"), field("call_id"))
}
