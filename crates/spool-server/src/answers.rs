//! A client's answer to a server request, read so that no answer can
//! leave a turn waiting: a JSON-RPC error counts as a refusal (recorded as
//! such), and an answer of the wrong shape is refused back to the client
//! with the answers it may give, the request still open.

use serde_json::Value;
use spool_protocol::*;

/// `value` as the answer `request` expects, or why it is not one.
pub(crate) fn answer_of(
    request: &ServerRequest,
    value: Value,
) -> Result<ServerRequestAnswer, serde_json::Error> {
    request.answer_from(value)
}

/// The answers `request` takes, for the client told its answer was not one.
pub(crate) fn valid_answers(request: &ServerRequest) -> &'static str {
    match request {
        ServerRequest::CommandExecutionRequestApproval(_) => {
            "{\"decision\": D} with D one of \"accept\", \"acceptForSession\", \
             {\"acceptWithExecpolicyAmendment\": {...}}, \
             {\"applyNetworkPolicyAmendment\": {...}}, \"decline\", \"cancel\""
        }
        ServerRequest::FileChangeRequestApproval(_) => {
            "{\"decision\": D} with D one of \"accept\", \"acceptForSession\", \"decline\", \
             \"cancel\""
        }
        ServerRequest::DynamicToolCall(_) => "{\"contentItems\": [...], \"success\": true|false}",
        ServerRequest::McpServerElicitation(_) => {
            "{\"action\": A} with A one of \"accept\", \"decline\", \"cancel\" (and for a tool \
             approval, \"_meta\": {\"persist\": \"session\"} to allow it for the session)"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn approval() -> ServerRequest {
        ServerRequest::FileChangeRequestApproval(FileChangeRequestApprovalParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item_id: "i".into(),
            started_at_ms: 1,
            reason: None,
            grant_root: None,
        })
    }

    #[test]
    fn every_valid_answer_named_is_read_and_others_are_not() {
        for decision in ["accept", "acceptForSession", "decline", "cancel"] {
            assert!(answer_of(&approval(), json!({"decision": decision})).is_ok());
            assert!(valid_answers(&approval()).contains(&format!("\"{decision}\"")));
        }
        assert!(answer_of(&approval(), json!({"decision": "maybe"})).is_err());
    }

    #[test]
    fn a_refused_approval_is_a_decline() {
        assert_eq!(
            approval().refusal("boom"),
            ServerRequestAnswer::FileChange(FileChangeRequestApprovalResponse {
                decision: FileChangeApprovalDecision::Decline,
            })
        );
    }
}
