//! Lenient field access on provider JSON, with errors that name the event
//! and field, for the two SSE parsers.

use serde_json::Value;
use spool_protocol::TokenUsageBreakdown;

use crate::error::ModelError;
use crate::transport::Endpoint;

pub(crate) fn opt_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn opt_usize(v: &Value, key: &str) -> Option<usize> {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// The most parts one response may have (output items, reasoning summary
/// parts, content parts). Indexes size the lists that hold them, so an
/// index past this is a malformed stream, never an allocation.
pub(crate) const MAX_STREAM_INDEX: usize = 4096;

/// An index field (`output_index`, `summary_index`, …), within
/// [`MAX_STREAM_INDEX`].
pub(crate) fn opt_index(
    endpoint: &Endpoint,
    event: &str,
    v: &Value,
    key: &str,
) -> Result<Option<usize>, ModelError> {
    let Some(raw) = v.get(key).filter(|raw| !raw.is_null()) else {
        return Ok(None);
    };
    match raw.as_u64().and_then(|n| usize::try_from(n).ok()) {
        Some(index) if index <= MAX_STREAM_INDEX => Ok(Some(index)),
        _ => Err(endpoint.malformed(format!(
            "`{event}` event with `{key}` {raw}: not an index of at most {MAX_STREAM_INDEX}"
        ))),
    }
}

/// A string field the event cannot do without.
pub(crate) fn req_str<'a>(
    endpoint: &Endpoint,
    event: &str,
    v: &'a Value,
    key: &str,
) -> Result<&'a str, ModelError> {
    opt_str(v, key)
        .ok_or_else(|| endpoint.malformed(format!("`{event}` event without a string `{key}`")))
}

fn int(v: &Value, path: &[&str]) -> Option<i64> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    cur.as_i64()
}

/// Token usage in either dialect: Responses (`input_tokens`,
/// `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`)
/// or Chat (`prompt_tokens`, `completion_tokens`, `*_details`). `None` when
/// the object has neither.
pub(crate) fn usage(v: &Value) -> Option<TokenUsageBreakdown> {
    if !v.is_object() {
        return None;
    }
    let input = int(v, &["input_tokens"]).or_else(|| int(v, &["prompt_tokens"]));
    let output = int(v, &["output_tokens"]).or_else(|| int(v, &["completion_tokens"]));
    if input.is_none() && output.is_none() {
        return None;
    }
    let input = input.unwrap_or(0);
    let output = output.unwrap_or(0);
    Some(TokenUsageBreakdown {
        input_tokens: input,
        cached_input_tokens: int(v, &["input_tokens_details", "cached_tokens"])
            .or_else(|| int(v, &["prompt_tokens_details", "cached_tokens"]))
            .unwrap_or(0),
        cache_write_input_tokens: int(v, &["input_tokens_details", "cache_write_tokens"])
            .or_else(|| int(v, &["cache_creation_input_tokens"]))
            .unwrap_or(0),
        output_tokens: output,
        reasoning_output_tokens: int(v, &["output_tokens_details", "reasoning_tokens"])
            .or_else(|| int(v, &["completion_tokens_details", "reasoning_tokens"]))
            .unwrap_or(0),
        // Saturating: the counts are the provider's, and a sum past i64
        // panicked in debug builds (found by the `provider_events` fuzz
        // target).
        total_tokens: int(v, &["total_tokens"]).unwrap_or(input.saturating_add(output)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_usage_dialects() {
        let r = usage(&json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15}))
        .unwrap();
        assert_eq!(
            (
                r.input_tokens,
                r.cached_input_tokens,
                r.output_tokens,
                r.reasoning_output_tokens,
                r.total_tokens
            ),
            (10, 4, 5, 2, 15)
        );
        let c = usage(&json!({"prompt_tokens": 7, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 6}}))
        .unwrap();
        assert_eq!(
            (c.input_tokens, c.cached_input_tokens, c.total_tokens),
            (7, 6, 10)
        );
        assert_eq!(usage(&json!(null)), None);
        assert_eq!(usage(&json!({})), None);
    }

    /// Regression (found by the `provider_events` fuzz target): counts
    /// whose sum does not fit an i64, and no `total_tokens`, overflowed.
    #[test]
    fn a_total_past_i64_saturates() {
        // The usage of the fuzzer's Chat chunk.
        let u = usage(&json!({"prompt_tokens": 2478217244019686666_i64,
            "completion_tokens": 9010124391409417482_i64, "total_tokens": null,
            "prompt_tokens_details": {"cached_tokens": null},
            "completion_tokens_details": {"reasoning_tokens": null}}))
        .unwrap();
        assert_eq!(u.input_tokens, 2478217244019686666);
        assert_eq!(u.total_tokens, i64::MAX);
        let u = usage(&json!({"input_tokens": i64::MIN, "output_tokens": -1})).unwrap();
        assert_eq!(u.total_tokens, i64::MIN);
    }
}
