//! Builders shared by the views tests.

#![allow(dead_code)] // each test binary uses a different part

use serde_json::Value;
use spool_core::ItemRecord;
use spool_protocol::responses::ResponseItem;
use spool_protocol::{FunctionCallStatus, ItemEnvelope, ItemStatus, ThreadItem, UserInput};

/// A completed record with its kind's default audience.
pub fn record(turn: &str, ordinal: u64, item: ThreadItem) -> ItemRecord {
    let audience = item.kind().default_audience();
    let mut envelope = ItemEnvelope::started("agent", audience, 1_000);
    envelope.status = ItemStatus::Completed;
    envelope.completed_at_ms = Some(2_000);
    ItemRecord {
        thread_id: "thread".into(),
        turn_id: turn.into(),
        ordinal,
        seq: ordinal,
        item,
        envelope,
        token_count: None,
    }
}

pub fn with_provider(mut record: ItemRecord, data: Value) -> ItemRecord {
    record.envelope.provider_data = Some(data.into());
    record
}

pub fn with_status(mut record: ItemRecord, status: ItemStatus) -> ItemRecord {
    record.envelope.status = status;
    record
}

pub fn with_count(mut record: ItemRecord, count: u32) -> ItemRecord {
    record.token_count = Some(count);
    record
}

pub fn user(id: &str, text: &str) -> ThreadItem {
    ThreadItem::UserMessage {
        client_id: Default::default(),
        id: id.into(),
        content: vec![UserInput::text(text)],
    }
}

pub fn agent(id: &str, text: &str) -> ThreadItem {
    ThreadItem::AgentMessage {
        delivery: Default::default(),
        memory_citation: Default::default(),
        questions: Default::default(),
        id: id.into(),
        text: text.into(),
        phase: None,
    }
}

pub fn function_call(id: &str, call_id: &str, output: &str) -> ThreadItem {
    ThreadItem::FunctionCall {
        id: id.into(),
        name: "lookup".into(),
        call_id: call_id.into(),
        arguments: "{\"q\":1}".into(),
        status: FunctionCallStatus::Completed,
        output: Some(output.into()),
        duration_ms: Some(3),
    }
}

/// Every input item as JSON, the way a provider would send it.
pub fn json(input: &[ResponseItem]) -> Vec<Value> {
    input
        .iter()
        .map(|item| serde_json::to_value(item).unwrap())
        .collect()
}

/// A compact description of each input item: its type, and its role for
/// messages.
pub fn shape(input: &[ResponseItem]) -> Vec<String> {
    json(input)
        .iter()
        .map(|item| {
            let kind = item["type"].as_str().unwrap_or("?").to_owned();
            match item["role"].as_str() {
                Some(role) => format!("{kind}:{role}"),
                None => kind,
            }
        })
        .collect()
}

/// The text of every text part of every message, in order.
pub fn texts(input: &[ResponseItem]) -> Vec<String> {
    json(input)
        .iter()
        .filter_map(|item| item["content"].as_array().cloned())
        .flatten()
        .filter_map(|part| part["text"].as_str().map(str::to_owned))
        .collect()
}

/// The model's input for `records` under the default options, as JSON.
pub fn convert(records: &[ItemRecord]) -> Vec<Value> {
    json(&spool_core::llm::llm_view(records, &spool_core::llm::LlmViewOptions::default()).input)
}

/// [`convert`] of one record holding `item`.
pub fn convert_one(item: ThreadItem) -> Vec<Value> {
    convert(&[record("t", 1, item)])
}
