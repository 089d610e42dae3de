//! Reading a paused run's snapshot: `RunState::from_json` and
//! `SchemaVersion::parse` over arbitrary text.
//!
//! Asserts: no panic; a version that parses is canonical (it prints back
//! as the same text); a snapshot that reads writes back (`to_json`) to one
//! that reads as the same state; and an error never quotes the snapshot
//! (its string values are replaced by marked ones and read again: the
//! marker must not appear in the error's Display or Debug).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use spool_core::run_state::{RunState, SchemaVersion};

const MARK: &str = "\u{1}SECRET\u{2}";

/// Marks every string value (not the top-level `$schemaVersion`, so the
/// decoder gets past the version check).
fn mark(value: &mut Value, top: bool) {
    match value {
        Value::String(s) => *s = format!("{MARK}{s}"),
        Value::Array(items) => items.iter_mut().for_each(|v| mark(v, false)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !(top && key == "$schemaVersion") {
                    mark(v, false);
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for candidate in std::iter::once(text.as_ref()).chain(text.lines().take(4)) {
        if let Some(version) = SchemaVersion::parse(candidate) {
            assert_eq!(
                version.to_string(),
                candidate,
                "a version that is not canonical parsed"
            );
        }
    }
    match RunState::from_json(&text) {
        Ok(state) => {
            let written = state.to_json();
            let again = RunState::from_json(&written)
                .unwrap_or_else(|e| panic!("a state that read does not read back: {e}\n{written}"));
            assert_eq!(again, state, "the state changed on the way out and back");
        }
        Err(error) => {
            let _ = error.to_string();
        }
    }
    if let Ok(mut value) = serde_json::from_str::<Value>(&text) {
        mark(&mut value, true);
        if let Err(error) = RunState::from_json(&value.to_string()) {
            let shown = format!("{error}\n{error:?}");
            assert!(
                !shown.contains(MARK),
                "an error quotes the snapshot: {shown}"
            );
        }
    }
});
