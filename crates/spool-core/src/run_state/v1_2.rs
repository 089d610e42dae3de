//! Decoder for `$schemaVersion: "1.2"`: 1.1's fields, read by 1.1's
//! decoder under this version's name, with one more interruption kind:
//! `mcpToolCall`, an MCP tool waiting for a person's approval.
//!
//! Frozen once shipped, like every decoder.

use serde_json::{Map, Value};

use super::error::RunStateError;
use super::types::{InterruptionKind, RunState};
use super::{v1_0, v1_1};

const KINDS: [(&str, InterruptionKind); 5] = [
    v1_0::KINDS[0],
    v1_0::KINDS[1],
    v1_0::KINDS[2],
    v1_0::KINDS[3],
    ("mcpToolCall", InterruptionKind::McpToolCall),
];
const KIND_NAMES: &str = "commandExecution, fileChange, dynamicToolCall, network, mcpToolCall";

pub(crate) fn decode(
    version: &'static str,
    map: &Map<String, Value>,
) -> Result<RunState, RunStateError> {
    v1_1::decode_with(version, map, (&KINDS, KIND_NAMES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_match_what_serde_writes() {
        for (name, kind) in KINDS {
            assert_eq!(serde_json::to_value(kind).unwrap(), Value::from(name));
            assert!(KIND_NAMES.contains(name));
        }
    }
}
