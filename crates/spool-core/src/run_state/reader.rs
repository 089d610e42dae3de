//! Reads typed fields out of a `serde_json::Value`, tracking the path.
//!
//! Decoders use this instead of serde's derived `Deserialize` because a
//! derived error is either positionless (from a `Value`) or quotes the
//! offending value (`invalid type: string "..."`), and we want the
//! opposite: the exact field path, and never the value. Paths are built
//! only from the field names decoders ask for and from array indices.
//!
//! Keys a decoder does not ask for are skipped: a reader rejects unknown
//! *versions*, not unknown fields.

use serde_json::{Map, Value};

use super::error::{FieldProblem, RunStateError, json_type_name};

/// An object being decoded, and where it sits in the snapshot.
pub(crate) struct Obj<'a> {
    version: &'static str,
    path: String,
    map: &'a Map<String, Value>,
}

/// An array element being decoded.
pub(crate) struct Elem<'a> {
    pub version: &'static str,
    pub path: String,
    pub value: &'a Value,
}

impl<'a> Obj<'a> {
    /// The top level of a snapshot of `version`.
    pub fn root(version: &'static str, map: &'a Map<String, Value>) -> Self {
        Obj {
            version,
            path: String::new(),
            map,
        }
    }

    /// Reads an array element as an object.
    pub fn from_elem(elem: &Elem<'a>) -> Result<Self, RunStateError> {
        match elem.value {
            Value::Object(map) => Ok(Obj {
                version: elem.version,
                path: elem.path.clone(),
                map,
            }),
            other => Err(wrong_type(
                elem.version,
                elem.path.clone(),
                "an object",
                other,
            )),
        }
    }

    /// Whether the key is present and not `null`.
    pub fn has(&self, key: &str) -> bool {
        !matches!(self.map.get(key), None | Some(Value::Null))
    }

    fn child_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn error(&self, key: &str, problem: FieldProblem) -> RunStateError {
        RunStateError::Field {
            version: self.version,
            path: self.child_path(key),
            problem,
        }
    }

    /// A field that must be present and not null.
    fn required(&self, key: &str) -> Result<&'a Value, RunStateError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Err(self.error(key, FieldProblem::Missing)),
            Some(value) => Ok(value),
        }
    }

    fn mismatch(&self, key: &str, expected: &'static str, found: &Value) -> RunStateError {
        wrong_type(self.version, self.child_path(key), expected, found)
    }

    pub fn string(&self, key: &str) -> Result<String, RunStateError> {
        match self.required(key)? {
            Value::String(text) => Ok(text.clone()),
            other => Err(self.mismatch(key, "a string", other)),
        }
    }

    /// Absent and `null` both mean `None`.
    pub fn opt_string(&self, key: &str) -> Result<Option<String>, RunStateError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
    }

    pub fn bool(&self, key: &str) -> Result<bool, RunStateError> {
        match self.required(key)? {
            Value::Bool(flag) => Ok(*flag),
            other => Err(self.mismatch(key, "a boolean", other)),
        }
    }

    fn unsigned(&self, key: &str, expected: &'static str) -> Result<u64, RunStateError> {
        match self.required(key)? {
            Value::Number(number) => number.as_u64().ok_or_else(|| {
                // A negative or fractional number: right JSON type, wrong range.
                self.error(key, FieldProblem::OutOfRange { expected })
            }),
            other => Err(self.mismatch(key, "a number", other)),
        }
    }

    pub fn u32(&self, key: &str) -> Result<u32, RunStateError> {
        const RANGE: &str = "a whole number from 0 to 4294967295";
        let number = self.unsigned(key, RANGE)?;
        u32::try_from(number)
            .map_err(|_| self.error(key, FieldProblem::OutOfRange { expected: RANGE }))
    }

    pub fn usize(&self, key: &str) -> Result<usize, RunStateError> {
        const RANGE: &str = "a whole number no less than 0";
        let number = self.unsigned(key, RANGE)?;
        usize::try_from(number)
            .map_err(|_| self.error(key, FieldProblem::OutOfRange { expected: RANGE }))
    }

    pub fn u64(&self, key: &str) -> Result<u64, RunStateError> {
        self.unsigned(key, "a whole number from 0 to 18446744073709551615")
    }

    /// Absent and `null` both mean `None`.
    pub fn opt_object(&self, key: &str) -> Result<Option<Obj<'a>>, RunStateError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.object(key).map(Some),
        }
    }

    /// Any JSON value but `null`, kept as is.
    pub fn value(&self, key: &str) -> Result<Value, RunStateError> {
        self.required(key).cloned()
    }

    pub fn object(&self, key: &str) -> Result<Obj<'a>, RunStateError> {
        match self.required(key)? {
            Value::Object(map) => Ok(Obj {
                version: self.version,
                path: self.child_path(key),
                map,
            }),
            other => Err(self.mismatch(key, "an object", other)),
        }
    }

    /// The elements of an array field, each with its own path.
    pub fn array(&self, key: &str) -> Result<Vec<Elem<'a>>, RunStateError> {
        match self.required(key)? {
            Value::Array(items) => {
                let base = self.child_path(key);
                Ok(items
                    .iter()
                    .enumerate()
                    .map(|(index, value)| Elem {
                        version: self.version,
                        path: format!("{base}[{index}]"),
                        value,
                    })
                    .collect())
            }
            other => Err(self.mismatch(key, "an array", other)),
        }
    }

    /// A string field that must be one of `choices` (wire name, value).
    /// `expected` lists the names for the error; the value is not repeated.
    pub fn one_of<T: Copy>(
        &self,
        key: &str,
        choices: &[(&str, T)],
        expected: &'static str,
    ) -> Result<T, RunStateError> {
        let text = self.string(key)?;
        choices
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, value)| *value)
            .ok_or_else(|| self.error(key, FieldProblem::UnknownVariant { expected }))
    }
}

impl Elem<'_> {
    /// The error for an element of the wrong JSON type (never quoting it).
    pub fn wrong_type(&self, expected: &'static str, found: &Value) -> RunStateError {
        wrong_type(self.version, self.path.clone(), expected, found)
    }
}

fn wrong_type(
    version: &'static str,
    path: String,
    expected: &'static str,
    found: &Value,
) -> RunStateError {
    RunStateError::Field {
        version,
        path,
        problem: FieldProblem::WrongType {
            expected,
            found: json_type_name(found),
        },
    }
}
