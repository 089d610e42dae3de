//! Reading a snapshot: version first, then the decoder for that version.

use serde_json::Value;

use super::error::{RunStateError, json_type_name};
use super::types::RunState;
use super::version::{SCHEMA_VERSIONS, SchemaVersion, is_newer_than_supported};
use super::{v1_0, v1_1, v1_2, validate};

const VERSION_KEY: &str = "$schemaVersion";

impl RunState {
    /// Reads a snapshot of any supported version into the current shape.
    ///
    /// Refuses, with a typed error that never quotes the snapshot: text
    /// that is not a JSON object, a missing or malformed `$schemaVersion`,
    /// a version this build does not support (including newer ones: they
    /// are never read optimistically), a field of the wrong shape, and a
    /// snapshot that breaks the ledger invariants.
    pub fn from_json(text: &str) -> Result<RunState, RunStateError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| RunStateError::not_json(&error))?;
        from_value(value)
    }
}

/// [`RunState::from_json`] for an already-parsed value (also what
/// `RunState`'s `Deserialize` runs).
pub(crate) fn from_value(value: Value) -> Result<RunState, RunStateError> {
    let Value::Object(map) = &value else {
        return Err(RunStateError::NotAnObject {
            found: json_type_name(&value),
        });
    };
    let version = match map.get(VERSION_KEY) {
        None => return Err(RunStateError::MissingVersion),
        Some(Value::String(text)) => {
            SchemaVersion::parse(text).ok_or(RunStateError::BadVersionFormat {
                found: "a string that is not MAJOR.MINOR",
            })?
        }
        Some(other) => {
            return Err(RunStateError::BadVersionFormat {
                found: json_type_name(other),
            });
        }
    };
    // One arm per entry of SCHEMA_VERSIONS. Each arm turns its version's
    // shape into the current struct: reading an old version IS the
    // migration, so adding a version means adding an arm here on purpose.
    // The arm's string must be the table's `&'static str` (see `shipped`),
    // which also keeps the table and the arms from drifting apart.
    let state = match (version.major, version.minor) {
        (1, 0) => v1_0::decode(shipped("1.0"), map)?,
        (1, 1) => v1_1::decode(shipped("1.1"), map)?,
        (1, 2) => v1_2::decode(shipped("1.2"), map)?,
        _ => {
            return Err(RunStateError::UnsupportedVersion {
                version: version.to_string(),
                newer: is_newer_than_supported(version),
            });
        }
    };
    validate::check(&state)?;
    Ok(state)
}

/// The table's spelling of a version a decoder arm handles. Panics if an
/// arm exists for a version with no row in `SCHEMA_VERSIONS`: that is a
/// build mistake the fixture tests hit immediately, not a runtime input.
#[allow(clippy::expect_used)] // the invariant is in the doc comment above
fn shipped(version: &str) -> &'static str {
    SCHEMA_VERSIONS
        .iter()
        .map(|(shipped, _)| *shipped)
        .find(|shipped| *shipped == version)
        .expect("every decoder arm has a row in SCHEMA_VERSIONS")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_state::{FieldProblem, JsonErrorKind};

    const SECRET: &str = "SECRET_TOKEN_do_not_echo_7Qx9Lm";

    fn assert_no_secret(error: &RunStateError) {
        let display = error.to_string();
        let debug = format!("{error:?}");
        assert!(!display.contains(SECRET), "Display leaks: {display}");
        assert!(!debug.contains(SECRET), "Debug leaks: {debug}");
        assert!(display.contains("1.0"), "no supported list: {display}");
    }

    fn minimal() -> Value {
        serde_json::json!({
            "$schemaVersion": "1.0",
            "threadId": "thr_1",
            "turnId": "turn_1",
            "currentAgent": { "name": "main", "occurrence": 0 },
            "step": 0,
            "maxTurns": 10,
            "acknowledgedInputCount": 0,
            "input": [],
            "calls": [],
            "approvals": [],
            "interruptions": []
        })
    }

    fn with(pointer: &str, replacement: Value) -> String {
        let mut value = minimal();
        if pointer == "/calls/0" || pointer.starts_with("/calls/0/") {
            value["calls"] = serde_json::json!([{
                "callId": "c1",
                "tool": { "agent": { "name": "main", "occurrence": 0 }, "name": "shell" },
                "itemId": "i1", "arguments": "{}",
                "executed": false, "completed": false
            }]);
        }
        *value.pointer_mut(pointer).expect("pointer exists") = replacement;
        value.to_string()
    }

    #[test]
    fn secrets_in_wrong_types_are_never_echoed() {
        let secret = Value::String(SECRET.into());
        for pointer in [
            "/step",
            "/currentAgent",
            "/currentAgent/occurrence",
            "/input",
            "/calls/0/executed",
            "/calls/0/tool/agent",
        ] {
            let error = RunState::from_json(&with(pointer, secret.clone())).unwrap_err();
            assert_no_secret(&error);
            assert!(matches!(error, RunStateError::Field { .. }), "{error:?}");
        }
        // serde_json itself would quote the value; check we do not.
        let serde_error = serde_json::from_value::<crate::run_state::CallRecord>(
            serde_json::json!({ "callId": "c", "tool": { "agent": { "name": "a", "occurrence": 0 }, "name": "t" },
                "itemId": "i", "arguments": "", "executed": SECRET, "completed": false }),
        )
        .unwrap_err();
        assert!(serde_error.to_string().contains(SECRET));
    }

    #[test]
    fn field_errors_name_the_path() {
        let error = RunState::from_json(&with("/calls/0/executed", "yes".into())).unwrap_err();
        assert_eq!(
            error,
            RunStateError::Field {
                version: "1.0",
                path: "calls[0].executed".into(),
                problem: FieldProblem::WrongType {
                    expected: "a boolean",
                    found: "a string"
                }
            }
        );
        assert!(
            error
                .to_string()
                .starts_with("RunState 1.0 field `calls[0].executed` has the wrong type")
        );
        let error = RunState::from_json(&with("/step", serde_json::json!(-1))).unwrap_err();
        assert!(
            matches!(error, RunStateError::Field { problem: FieldProblem::OutOfRange { .. }, ref path, .. } if path == "step")
        );
        let error =
            RunState::from_json(&with("/maxTurns", serde_json::json!(1u64 << 40))).unwrap_err();
        assert!(matches!(
            error,
            RunStateError::Field {
                problem: FieldProblem::OutOfRange { .. },
                ..
            }
        ));
    }

    #[test]
    fn version_errors_do_not_echo_malformed_versions() {
        for bad in [
            serde_json::json!(SECRET),
            serde_json::json!(format!("1.{SECRET}")),
            serde_json::json!(1.0),
            serde_json::json!([SECRET]),
        ] {
            let error = RunState::from_json(&with("/$schemaVersion", bad)).unwrap_err();
            assert!(matches!(error, RunStateError::BadVersionFormat { .. }));
            assert_no_secret(&error);
        }
        let error = RunState::from_json(&with("/$schemaVersion", "1.10".into())).unwrap_err();
        assert_eq!(
            error,
            RunStateError::UnsupportedVersion {
                version: "1.10".into(),
                newer: true
            }
        );
        assert!(error.to_string().contains("version 1.10 is not supported"));
        let error = RunState::from_json(&with("/$schemaVersion", "0.9".into())).unwrap_err();
        assert!(matches!(
            error,
            RunStateError::UnsupportedVersion { newer: false, .. }
        ));
    }

    #[test]
    fn not_json_and_not_object() {
        let error = RunState::from_json(&format!("{{\"threadId\": \"{SECRET}")).unwrap_err();
        assert!(matches!(
            error,
            RunStateError::NotJson {
                kind: JsonErrorKind::Eof,
                line: 1,
                ..
            }
        ));
        assert_no_secret(&error);
        let error = RunState::from_json(&format!("[\"{SECRET}\"]")).unwrap_err();
        assert_eq!(error, RunStateError::NotAnObject { found: "an array" });
        assert_no_secret(&error);
        let error = RunState::from_json("{}").unwrap_err();
        assert_eq!(error, RunStateError::MissingVersion);
    }

    #[test]
    fn unknown_fields_are_skipped_within_a_known_version() {
        let mut value = minimal();
        value["addedByAFutureMinor"] = serde_json::json!({ "x": 1 });
        assert!(RunState::from_json(&value.to_string()).is_ok());
    }

    #[test]
    fn serde_deserialize_goes_through_the_same_checks() {
        let error = serde_json::from_str::<RunState>(&with("/$schemaVersion", "9.0".into()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("version 9.0 is not supported"), "{error}");
        let state: RunState = serde_json::from_value(minimal()).unwrap();
        assert_eq!(serde_json::to_value(&state).unwrap(), {
            // A 1.0 snapshot is written back as 1.2 with 1.0's defaults.
            let mut expected = minimal();
            expected["$schemaVersion"] = "1.2".into();
            expected["lastResponseId"] = Value::Null;
            expected["reasoningIds"] = "preserve".into();
            expected["history"] = Value::Null;
            // Compare as maps: key order is checked by `to_json` tests.
            expected
        });
    }
}
