//! OpenAI Responses API items, as providers send and receive them.

use serde_json::Value;

/// Schemas of the Responses API types, for `schema/`.
pub fn schemas() -> Vec<(&'static str, Value)> {
    Vec::new()
}
