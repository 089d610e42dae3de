//! Records to the JSON columns of their rows, for every backend.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use spool_core::llm::INPUT_ITEM_KEY;
use spool_core::{ItemRecord, TurnRecord};
use spool_protocol::{ItemEnvelope, ItemStatus, Provenance, ThreadItem, WorkPhase};

use super::filing;
use crate::error::StoreError;

/// The JSON columns of a turn row: its error and its token usage.
pub(crate) fn encode_turn_json(
    turn: &TurnRecord,
) -> Result<(Option<String>, Option<String>), StoreError> {
    let error = turn
        .error
        .as_ref()
        .map(|error| encode("turn error", error))
        .transpose()?;
    let token_usage = turn
        .token_usage
        .as_ref()
        .map(|usage| encode("turn token usage", usage))
        .transpose()?;
    Ok((error, token_usage))
}

/// The JSON columns of an item row: the item, its envelope without the raw
/// input item, and that raw input item. Encoded from the record: cheaper
/// than slicing the item out of its encoded completion.
///
/// An item that is what its raw input item is filed as (every Session API
/// item: `filing.rs`) is not stored twice: its `item` column holds
/// [`DERIVED_ITEM`] and decoding files the raw item again. Any other item
/// (one the runtime built, or changed after filing) is stored whole. An
/// envelope that is the one filing gives an item added whole
/// ([`derived_envelope`]) is stored as its time alone.
pub(crate) fn encode_item_json(
    record: &ItemRecord,
) -> Result<(String, String, Option<String>), StoreError> {
    let input_item = raw_input_item(&record.envelope);
    let item = match input_item {
        Some(raw) if filing::is_filing_of(raw, &record.item) => DERIVED_ITEM.to_owned(),
        _ => encode("item", &record.item)?,
    };
    let envelope = match derived_envelope_at(&record.item, &record.envelope) {
        Some(at_ms) => at_ms.to_string(),
        None => encode_envelope_without_input(&record.envelope)?,
    };
    Ok((item, envelope, input_item.map(super::json_text::to_text)))
}

/// The envelope of an item filed from a raw input item and added whole at
/// `at_ms` (the Session API's `add_items`): completed then, by the agent
/// and for the audience filing names (`filing::agent`, `filing::audience`),
/// with no provider data but the raw item, which the row keeps in a column
/// of its own and decoding puts back.
///
/// Such a row's `envelope` column holds `at_ms` in decimal, which no JSON
/// object is: the envelope's JSON was a fifth of the row's bytes, and
/// encoding it ~8% of the writer's instructions for the item. Like [`DERIVED_ITEM`], the rule
/// is part of the stored format: it must not change for rows already
/// written.
pub(crate) fn derived_envelope(item: &ThreadItem, at_ms: i64) -> ItemEnvelope {
    ItemEnvelope {
        status: ItemStatus::Completed,
        started_at_ms: at_ms,
        completed_at_ms: Some(at_ms),
        provenance: Provenance {
            agent: filing::agent(item).to_owned(),
            ..Provenance::default()
        },
        audience: filing::audience(item),
        provider_data: None,
    }
}

/// The time `envelope` is the [`derived_envelope`] of, its raw input item
/// being its only provider data; `None` when it says anything more.
/// Compares in place: no envelope is built.
fn derived_envelope_at(item: &ThreadItem, envelope: &ItemEnvelope) -> Option<i64> {
    // Destructured so that a new field must be placed in the rule.
    let ItemEnvelope {
        status,
        started_at_ms,
        completed_at_ms,
        provenance,
        audience,
        provider_data,
    } = envelope;
    let Provenance {
        agent,
        parent_item_id,
        phase,
        step_index,
        attempt,
    } = provenance;
    let only_raw_item = matches!(
        provider_data.as_deref(),
        Some(Value::Object(data)) if data.len() == 1 && data.keys().next().is_some_and(|key| key == INPUT_ITEM_KEY)
    );
    let derived = only_raw_item
        && *status == ItemStatus::Completed
        && *completed_at_ms == Some(*started_at_ms)
        && agent == filing::agent(item)
        && parent_item_id.is_none()
        && *phase == WorkPhase::default()
        && step_index.is_none()
        && attempt.is_none()
        && *audience == filing::audience(item);
    derived.then_some(*started_at_ms)
}

/// The `item` column of a row whose item is its raw input item as
/// `filing.rs` files it: empty, which no JSON text is. The
/// mapping is therefore part of the stored format: what it makes of a raw
/// item must not change for rows already written (a change needs a marker
/// of its own, and this one kept decoding as before).
pub(crate) const DERIVED_ITEM: &str = "";

/// The envelope's raw input item (`providerData.inputItem`), if any.
fn raw_input_item(envelope: &ItemEnvelope) -> Option<&Value> {
    envelope
        .provider_data
        .as_ref()
        .and_then(|data| filing::field(data, INPUT_ITEM_KEY))
}

/// The envelope's JSON with its raw input item left out (the item has a
/// column of its own, [`encode_item_json`]). Clones the provider's other
/// data, never the raw item, which is most of a session item.
pub(crate) fn encode_envelope_without_input(envelope: &ItemEnvelope) -> Result<String, StoreError> {
    let provider_data = match envelope.provider_data.as_deref() {
        Some(Value::Object(data)) if data.contains_key(INPUT_ITEM_KEY) => {
            let rest: serde_json::Map<String, Value> = data
                .iter()
                .filter(|(key, _)| *key != INPUT_ITEM_KEY)
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            (!rest.is_empty()).then(|| Arc::new(Value::Object(rest)))
        }
        _ => return encode("item envelope", envelope),
    };
    let rest = ItemEnvelope {
        status: envelope.status,
        started_at_ms: envelope.started_at_ms,
        completed_at_ms: envelope.completed_at_ms,
        provenance: envelope.provenance.clone(),
        audience: envelope.audience,
        provider_data,
    };
    encode("item envelope", &rest)
}

/// JSON text of a value to store.
pub(crate) fn encode<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Encode { what, source })
}
