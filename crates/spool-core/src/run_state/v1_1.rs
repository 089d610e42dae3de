//! Decoder for `$schemaVersion: "1.1"`: 1.0's fields, read by 1.0's
//! decoder under this version's name, plus two.
//!
//! - `reasoningIds` (required): `"preserve"` or `"omit"`.
//! - `history` (absent or `null`: spool replays its log): `mode`
//!   (`"previousResponseId"` or `"conversationId"`), `cursor`
//!   (`previousResponseId`, absent or `null` before the first stored
//!   response; `throughOrdinal`; `unsent`: `[{ itemId, part }]`;
//!   `heldCalls`: call ids) and `conversationId` (absent or `null` until
//!   the conversation exists). Every key of `cursor` but
//!   `throughOrdinal` may be absent; the writer leaves out empty ones.
//!
//! Frozen once shipped, like every decoder: a 1.2 field gets a 1.2
//! decoder.

use serde_json::{Map, Value};

use super::error::RunStateError;
use super::reader::{Elem, Obj};
use super::types::{RunHistory, RunState};
use super::v1_0;
use crate::llm::{HistoryCursor, PartKey, ReasoningIdPolicy};
use spool_protocol::HistoryMode;

const POLICIES: [(&str, ReasoningIdPolicy); 2] = [
    ("preserve", ReasoningIdPolicy::Preserve),
    ("omit", ReasoningIdPolicy::Omit),
];
const POLICY_NAMES: &str = "preserve, omit";

/// The modes in which the provider holds the history: `replay` has none.
const MODES: [(&str, HistoryMode); 2] = [
    ("previousResponseId", HistoryMode::PreviousResponseId),
    ("conversationId", HistoryMode::ConversationId),
];
const MODE_NAMES: &str = "previousResponseId, conversationId";

pub(crate) fn decode(
    version: &'static str,
    map: &Map<String, Value>,
) -> Result<RunState, RunStateError> {
    decode_with(version, map, (&v1_0::KINDS, v1_0::KIND_NAMES))
}

/// 1.1's fields, with the interruption kinds of a later version.
pub(crate) fn decode_with(
    version: &'static str,
    map: &Map<String, Value>,
    kinds: v1_0::Kinds<'_>,
) -> Result<RunState, RunStateError> {
    let mut state = v1_0::decode_with(version, map, kinds)?;
    let root = Obj::root(version, map);
    state.reasoning_ids = root.one_of("reasoningIds", &POLICIES, POLICY_NAMES)?;
    state.history = root
        .opt_object("history")?
        .map(|h| history(&h))
        .transpose()?;
    Ok(state)
}

fn history(obj: &Obj<'_>) -> Result<RunHistory, RunStateError> {
    let cursor = obj.object("cursor")?;
    Ok(RunHistory {
        mode: obj.one_of("mode", &MODES, MODE_NAMES)?,
        cursor: HistoryCursor {
            previous_response_id: cursor.opt_string("previousResponseId")?,
            through_ordinal: cursor.u64("throughOrdinal")?,
            unsent: optional_each(&cursor, "unsent", part_key)?,
            held_calls: optional_each(&cursor, "heldCalls", string)?,
        },
        conversation_id: obj.opt_string("conversationId")?,
    })
}

/// An array the writer leaves out when it is empty.
fn optional_each<T>(
    parent: &Obj<'_>,
    key: &str,
    decode: impl Fn(&Elem<'_>) -> Result<T, RunStateError>,
) -> Result<Vec<T>, RunStateError> {
    if parent.has(key) {
        v1_0::each(parent, key, decode)
    } else {
        Ok(Vec::new())
    }
}

fn part_key(elem: &Elem<'_>) -> Result<PartKey, RunStateError> {
    let obj = Obj::from_elem(elem)?;
    Ok(PartKey {
        item_id: obj.string("itemId")?,
        part: obj.u32("part")?,
    })
}

fn string(elem: &Elem<'_>) -> Result<String, RunStateError> {
    match elem.value {
        Value::String(text) => Ok(text.clone()),
        other => Err(elem.wrong_type("a string", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_what_serde_writes() {
        for (name, policy) in POLICIES {
            assert_eq!(serde_json::to_value(policy).unwrap(), Value::from(name));
            assert!(POLICY_NAMES.contains(name));
        }
        for (name, mode) in MODES {
            assert_eq!(serde_json::to_value(mode).unwrap(), Value::from(name));
            assert!(MODE_NAMES.contains(name));
        }
    }
}
