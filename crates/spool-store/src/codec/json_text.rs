//! A `serde_json::Value` as compact JSON text, byte for byte what
//! `serde_json::to_string` writes, in a third of the instructions.
//!
//! Every Session API item is stored as the JSON of the raw input item its
//! caller gave (`items.input_item`). serde_json writes a string one byte
//! at a time through `io::Write` (a table lookup and a call per run), which
//! was ~3.5k instructions for a 300-byte item, the largest piece of spool's
//! own work per item after SQLite (callgrind over `spool bench store
//! --workloads b`). Here a string is scanned eight bytes at a time for the
//! three things JSON escapes (`"`, `\` and bytes below 0x20) and copied in
//! runs; everything else (numbers, the escapes themselves) is what
//! serde_json does. The output must stay identical: the tests hold it to
//! `serde_json::to_string` on every value they draw.

use std::fmt::Write;

use serde_json::Value;

/// The compact JSON text of `value`.
pub(crate) fn to_text(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // serde_json's own text for a number (itoa, or ryu for floats).
        Value::Number(number) => {
            let _ = write!(out, "{number}");
        }
        Value::String(text) => write_str(out, text),
        Value::Array(values) => {
            out.push('[');
            for (index, value) in values.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(out, value);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (index, (key, value)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                write_value(out, value);
            }
            out.push('}');
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any byte of `word` may need escaping: a zero byte after XOR
/// with `"` or `\`, or a byte below 0x20. May say yes for a word that
/// needs nothing (the caller then looks byte by byte), never no for one
/// that does.
fn may_escape(word: u64) -> bool {
    let zero_in = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let quote = zero_in(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_in(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    quote | backslash | control != 0
}

/// What serde_json writes for a byte that needs escaping.
fn escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match byte {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        0x08 => out.push_str("\\b"),
        0x0c => out.push_str("\\f"),
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        b'\t' => out.push_str("\\t"),
        _ => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

fn write_str(out: &mut String, text: &str) {
    out.push('"');
    let bytes = text.as_bytes();
    // `bytes[start..at]` is copied as it is when the next escape (or the
    // end) is reached. Escaped bytes are ASCII, so every cut falls on a
    // character boundary.
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(chunk) = bytes.get(at..at + 8) {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            if !may_escape(word) {
                at += 8;
                continue;
            }
        }
        let byte = bytes[at];
        if needs_escape(byte) {
            out.push_str(&text[start..at]);
            escape(out, byte);
            start = at + 1;
        }
        at += 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// Strings that reach every path: plain runs of every length around
    /// the 8-byte word, every byte that needs escaping, multi-byte
    /// characters across word boundaries.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-zA-Z0-9 ]{0,17}",
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            (0u8..0x20).prop_map(|b| char::from(b).to_string()),
            Just("\u{7f}é€😀\u{2028}".to_owned()),
            any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((text(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn writes_what_serde_json_writes(value in value()) {
            prop_assert_eq!(to_text(&value), serde_json::to_string(&value).unwrap());
        }
    }

    #[test]
    fn every_byte_that_needs_escaping_is_escaped_as_serde_json_does() {
        for byte in 0u8..0x80 {
            // At every offset within and across a word.
            for offset in 0..17 {
                let text = format!(
                    "{}{}{}",
                    "x".repeat(offset),
                    char::from(byte),
                    "y".repeat(9)
                );
                let value = Value::String(text);
                assert_eq!(
                    to_text(&value),
                    serde_json::to_string(&value).unwrap(),
                    "byte {byte:#x} at {offset}"
                );
            }
        }
        let item = json!({"role": "user", "content": "a \"quoted\" \\ line\nnext\ttab\u{1}"});
        assert_eq!(to_text(&item), serde_json::to_string(&item).unwrap());
    }
}
