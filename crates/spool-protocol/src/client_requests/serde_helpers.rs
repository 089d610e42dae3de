//! Serde helpers for Codex's "omitted vs `null`" fields.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A field that is absent, `null`, or a value, and means something
/// different in each case (Codex's `Option<Option<T>>` fields such as
/// `serviceTier`): absent leaves the setting alone, `null` clears it.
///
/// Use with `#[serde(default, with = "double_option", skip_serializing_if =
/// "Option::is_none")]`: `None` is omitted, `Some(None)` is written as `null`.
pub(crate) mod double_option {
    use super::*;

    pub fn serialize<S: Serializer, T: Serialize>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

/// `skip_serializing_if` for Codex's `bool` flags that are written only when
/// set (`#[serde(default, skip_serializing_if = "std::ops::Not::not")]`).
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}
