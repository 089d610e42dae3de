//! `review/start`: a code review run as a turn.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::thread::Turn;

/// `review/start` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStartParams {
    pub thread_id: String,
    pub target: ReviewTarget,
    /// Where the review runs: `inline` (the default) as a turn of this
    /// thread, or `detached` as the first turn of a new thread, whose id the
    /// reply gives as `reviewThreadId`.
    #[serde(default)]
    pub delivery: Option<ReviewDelivery>,
}

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ReviewTarget {
    /// The working tree against `HEAD`: staged, unstaged and untracked
    /// changes.
    UncommittedChanges,
    /// The current branch against where it left `branch` (their merge
    /// base).
    BaseBranch { branch: String },
    /// The changes one commit introduced.
    Commit {
        sha: String,
        /// Shown in the review's title when given.
        #[serde(default)]
        title: Option<String>,
    },
    /// Free-form instructions, reviewed as written.
    Custom { instructions: String },
}

/// Where a review runs (see [`ReviewStartParams::delivery`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReviewDelivery {
    #[default]
    Inline,
    Detached,
}

/// `review/start` result: the review's turn (`inProgress`) and the thread
/// it runs on (the request's own thread when inline).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStartResponse {
    pub turn: Turn,
    pub review_thread_id: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn targets_read_as_codex_writes_them() {
        let read = |value| serde_json::from_value::<ReviewTarget>(value).unwrap();
        assert_eq!(
            read(json!({"type": "uncommittedChanges"})),
            ReviewTarget::UncommittedChanges
        );
        assert_eq!(
            read(json!({"type": "baseBranch", "branch": "main"})),
            ReviewTarget::BaseBranch {
                branch: "main".into()
            }
        );
        assert_eq!(
            read(json!({"type": "commit", "sha": "abc1234", "title": null})),
            ReviewTarget::Commit {
                sha: "abc1234".into(),
                title: None
            }
        );
        assert_eq!(
            read(json!({"type": "custom", "instructions": "look at x"})),
            ReviewTarget::Custom {
                instructions: "look at x".into()
            }
        );
        assert!(serde_json::from_value::<ReviewTarget>(json!({"type": "commit"})).is_err());
    }

    #[test]
    fn delivery_defaults_to_inline_and_the_reply_is_camel_case() {
        let params: ReviewStartParams = serde_json::from_value(json!({
            "threadId": "t", "target": {"type": "uncommittedChanges"}
        }))
        .unwrap();
        assert_eq!(params.delivery.unwrap_or_default(), ReviewDelivery::Inline);
        let detached: ReviewStartParams = serde_json::from_value(json!({
            "threadId": "t", "target": {"type": "uncommittedChanges"}, "delivery": "detached"
        }))
        .unwrap();
        assert_eq!(detached.delivery, Some(ReviewDelivery::Detached));
        let reply = ReviewStartResponse {
            turn: Turn::new("turn_1", crate::TurnStatus::InProgress),
            review_thread_id: "t".into(),
        };
        let value = serde_json::to_value(reply).unwrap();
        assert_eq!(value["reviewThreadId"], "t");
        assert_eq!(value["turn"]["id"], "turn_1");
    }
}
