//! The schema version table and the `MAJOR.MINOR` arithmetic behind it.
//!
//! Versions compare numerically, component by component: `1.10` is newer
//! than `1.9`. Comparing them as strings would order `1.10` before `1.9`
//! and list the supported versions in a misleading order in every error.

use std::cmp::Ordering;
use std::fmt;

/// The version [`RunState::to_json`](super::RunState::to_json) writes.
pub const CURRENT_SCHEMA_VERSION: &str = "1.2";

/// Every version this build reads, each with a one-line summary of what it
/// added. Reading an older entry is a migration to the current struct (one
/// decoder arm per entry in `decode.rs`); shipping a version means adding
/// its row here, its decoder arm and its fixture directory
/// (`tests/fixtures/run_state/v<version>/`), which the tests enforce.
pub const SCHEMA_VERSIONS: &[(&str, &str)] = &[
    (
        "1.0",
        "first shipped shape: agent keys with occurrences, tool keys, call ledger, \
         bound approvals, pending interruptions",
    ),
    (
        "1.1",
        "the reasoning-id policy (`reasoningIds`) and a provider-held history \
         (`history`: mode, tracker cursor, conversation id)",
    ),
    (
        "1.2",
        "the interruption kind `mcpToolCall` (an MCP tool waiting for approval)",
    ),
];

/// A well-formed `MAJOR.MINOR` version.
///
/// Well-formed means two decimal components without signs, spaces or
/// leading zeros (so every version has exactly one spelling and `01.0`
/// cannot pose as `1.0`), each at most nine digits so it fits a `u32`.
/// Only strings that pass this check are ever repeated back in an error
/// message: they are short and cannot carry snapshot content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SchemaVersion {
    pub major: u32,
    pub minor: u32,
}

impl SchemaVersion {
    /// Parses `MAJOR.MINOR`; `None` for anything else.
    pub fn parse(text: &str) -> Option<SchemaVersion> {
        let (major, minor) = text.split_once('.')?;
        Some(SchemaVersion {
            major: parse_component(major)?,
            minor: parse_component(minor)?,
        })
    }
}

impl fmt::Display for SchemaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

fn parse_component(text: &str) -> Option<u32> {
    let well_formed = !text.is_empty()
        && text.len() <= 9
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if well_formed { text.parse().ok() } else { None }
}

/// Orders two version strings numerically. Well-formed versions sort by
/// (major, minor); malformed ones (never in a shipped table — a test checks)
/// sort after them, by text, so the order is still total.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (SchemaVersion::parse(a), SchemaVersion::parse(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The versions of a table, oldest first, compared numerically.
pub fn sorted_versions<'a>(table: &[(&'a str, &str)]) -> Vec<&'a str> {
    let mut versions: Vec<&str> = table.iter().map(|(version, _)| *version).collect();
    versions.sort_by(|a, b| compare_versions(a, b));
    versions
}

/// The versions this build reads, oldest first.
pub fn supported_versions() -> Vec<&'static str> {
    sorted_versions(SCHEMA_VERSIONS)
}

/// `"1.0, 1.1"`: the list every decode error ends with.
pub(crate) fn supported_list() -> String {
    supported_versions().join(", ")
}

/// Whether a well-formed version is newer than every supported one (as
/// opposed to an old or never-shipped one), to word the error helpfully.
pub(crate) fn is_newer_than_supported(version: SchemaVersion) -> bool {
    supported_versions()
        .iter()
        .filter_map(|v| SchemaVersion::parse(v))
        .all(|supported| version > supported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_version_is_in_the_table_and_every_summary_is_written() {
        assert!(
            SCHEMA_VERSIONS
                .iter()
                .any(|(version, _)| *version == CURRENT_SCHEMA_VERSION),
            "CURRENT_SCHEMA_VERSION {CURRENT_SCHEMA_VERSION} has no row in SCHEMA_VERSIONS"
        );
        for (version, summary) in SCHEMA_VERSIONS {
            assert!(
                !summary.trim().is_empty(),
                "version {version} has an empty summary"
            );
            assert!(
                SchemaVersion::parse(version).is_some(),
                "version {version} is not MAJOR.MINOR"
            );
        }
    }

    #[test]
    fn table_has_no_duplicates_and_current_is_newest() {
        let versions = supported_versions();
        let mut deduped = versions.clone();
        deduped.dedup();
        assert_eq!(versions, deduped, "a version appears twice");
        assert_eq!(versions.last(), Some(&CURRENT_SCHEMA_VERSION));
    }

    #[test]
    fn versions_sort_numerically_not_as_text() {
        let table = [
            ("1.10", "x"),
            ("2.0", "x"),
            ("1.9", "x"),
            ("1.0", "x"),
            ("10.0", "x"),
            ("1.2", "x"),
        ];
        assert_eq!(
            sorted_versions(&table),
            ["1.0", "1.2", "1.9", "1.10", "2.0", "10.0"]
        );
        assert_eq!(compare_versions("1.10", "1.9"), Ordering::Greater);
        assert_eq!(compare_versions("1.9", "1.10"), Ordering::Less);
        assert_eq!(compare_versions("2.0", "2.0"), Ordering::Equal);
    }

    #[test]
    fn parse_accepts_only_canonical_major_minor() {
        assert_eq!(
            SchemaVersion::parse("1.10"),
            Some(SchemaVersion {
                major: 1,
                minor: 10
            })
        );
        assert_eq!(
            SchemaVersion::parse("0.0").map(|v| v.to_string()),
            Some("0.0".into())
        );
        for bad in [
            "",
            "1",
            "1.",
            ".1",
            "1.0.0",
            "01.0",
            "1.00",
            "+1.0",
            "-1.0",
            " 1.0",
            "1.0 ",
            "one",
            "1.x",
            "1234567890.0",
            "١.٠",
        ] {
            assert_eq!(
                SchemaVersion::parse(bad),
                None,
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn newer_is_relative_to_the_newest_supported() {
        assert!(is_newer_than_supported(
            SchemaVersion::parse("9.0").unwrap()
        ));
        assert!(!is_newer_than_supported(
            SchemaVersion::parse("0.9").unwrap()
        ));
    }
}
