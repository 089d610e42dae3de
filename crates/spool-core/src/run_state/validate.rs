//! Invariants a decoded snapshot must hold before anyone resumes from it.
//!
//! Every rule protects "no tool runs twice, no decision approves the wrong
//! call": a resume trusts the ledger, so a ledger that contradicts itself is
//! refused rather than interpreted. Errors point at the offending field by
//! path and state the rule; they never repeat ids or other values.

use std::collections::{HashMap, HashSet};

use super::error::RunStateError;
use super::types::{RunState, ToolKey};

fn broken(path: String, rule: &'static str) -> RunStateError {
    RunStateError::Inconsistent { path, rule }
}

impl RunState {
    /// Checks the snapshot's invariants (see the module docs).
    /// [`RunState::from_json`] runs this; a runtime may run it before
    /// persisting a snapshot it built.
    pub fn validate(&self) -> Result<(), RunStateError> {
        check(self)
    }
}

pub(crate) fn check(state: &RunState) -> Result<(), RunStateError> {
    if state.acknowledged_input_count > state.input.len() {
        return Err(broken(
            "acknowledgedInputCount".into(),
            "is larger than the number of `input` items",
        ));
    }
    let ledger = check_calls(state)?;
    check_approvals(state, &ledger)?;
    check_interruptions(state, &ledger)
}

/// Call id -> (index, tool) for every ledger entry.
type Ledger<'a> = HashMap<&'a str, (usize, &'a ToolKey)>;

fn check_calls(state: &RunState) -> Result<Ledger<'_>, RunStateError> {
    let mut ledger = Ledger::new();
    for (index, call) in state.calls.iter().enumerate() {
        if ledger.insert(&call.call_id, (index, &call.tool)).is_some() {
            return Err(broken(
                format!("calls[{index}].callId"),
                "repeats the call id of an earlier ledger entry",
            ));
        }
        if call.completed && !call.executed {
            return Err(broken(
                format!("calls[{index}].completed"),
                "is true while `executed` is false (a call is marked executed before it starts)",
            ));
        }
        if call.output.is_some() && !call.completed {
            return Err(broken(
                format!("calls[{index}].output"),
                "is set while `completed` is false",
            ));
        }
    }
    Ok(ledger)
}

fn check_approvals(state: &RunState, ledger: &Ledger<'_>) -> Result<(), RunStateError> {
    let mut requests = HashSet::new();
    let mut decided = HashSet::new();
    for (index, approval) in state.approvals.iter().enumerate() {
        if !requests.insert(approval.request_id.as_str()) {
            return Err(broken(
                format!("approvals[{index}].requestId"),
                "repeats the request id of an earlier approval",
            ));
        }
        if !decided.insert((&approval.tool, approval.call_id.as_str())) {
            return Err(broken(
                format!("approvals[{index}]"),
                "decides a tool and call an earlier approval already decided",
            ));
        }
        if let Some((_, tool)) = ledger.get(approval.call_id.as_str())
            && **tool != approval.tool
        {
            return Err(broken(
                format!("approvals[{index}].tool"),
                "differs from the tool of the ledger entry with the same call id",
            ));
        }
    }
    Ok(())
}

fn check_interruptions(state: &RunState, ledger: &Ledger<'_>) -> Result<(), RunStateError> {
    let answered: HashSet<&str> = state
        .approvals
        .iter()
        .map(|approval| approval.request_id.as_str())
        .collect();
    let mut requests = HashSet::new();
    let mut waiting = HashSet::new();
    for (index, interruption) in state.interruptions.iter().enumerate() {
        let request_id = interruption.request_id.as_str();
        if !requests.insert(request_id) {
            return Err(broken(
                format!("interruptions[{index}].requestId"),
                "repeats the request id of an earlier interruption",
            ));
        }
        if answered.contains(request_id)
            || state
                .decision_for(&interruption.tool, &interruption.call_id)
                .is_some()
        {
            return Err(broken(
                format!("interruptions[{index}]"),
                "is still pending although an approval already decided it",
            ));
        }
        if !waiting.insert((&interruption.tool, interruption.call_id.as_str())) {
            return Err(broken(
                format!("interruptions[{index}]"),
                "waits on the same tool and call as an earlier interruption",
            ));
        }
        if let Some((call_index, tool)) = ledger.get(interruption.call_id.as_str()) {
            if **tool != interruption.tool {
                return Err(broken(
                    format!("interruptions[{index}].tool"),
                    "differs from the tool of the ledger entry with the same call id",
                ));
            }
            if state.calls[*call_index].executed {
                return Err(broken(
                    format!("interruptions[{index}].callId"),
                    "names a call the ledger says already started (a call waiting for approval cannot have run)",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_state::{AgentKey, ApprovalRecord, CallRecord, Interruption, InterruptionKind};

    fn tool(agent_occurrence: u32, name: &str) -> ToolKey {
        ToolKey::new(AgentKey::new("coder", agent_occurrence), name)
    }

    fn call(id: &str, executed: bool, completed: bool) -> CallRecord {
        CallRecord {
            call_id: id.into(),
            tool: tool(0, "shell"),
            item_id: format!("item_{id}"),
            arguments: "{}".into(),
            executed,
            completed,
            output: completed.then(|| "ok".into()),
        }
    }

    fn interruption(request: &str, call_id: &str, tool: ToolKey) -> Interruption {
        Interruption {
            request_id: request.into(),
            call_id: call_id.into(),
            tool,
            item_id: "item".into(),
            kind: InterruptionKind::CommandExecution,
            summary: "ls".into(),
        }
    }

    fn approval(request: &str, call_id: &str, tool: ToolKey) -> ApprovalRecord {
        ApprovalRecord {
            request_id: request.into(),
            call_id: call_id.into(),
            tool,
            decision: "accept".into(),
        }
    }

    fn state() -> RunState {
        RunState {
            thread_id: "t".into(),
            turn_id: "u".into(),
            current_agent: AgentKey::new("coder", 0),
            step: 1,
            max_turns: 5,
            last_response_id: None,
            acknowledged_input_count: 0,
            input: vec![],
            calls: vec![call("a", true, true), call("b", false, false)],
            approvals: vec![],
            interruptions: vec![interruption("r1", "b", tool(0, "shell"))],
            reasoning_ids: Default::default(),
            history: None,
        }
    }

    fn rule_path(state: &RunState) -> String {
        match check(state).unwrap_err() {
            RunStateError::Inconsistent { path, .. } => path,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_consistent_state_passes() {
        check(&state()).unwrap();
    }

    #[test]
    fn each_rule_is_enforced() {
        let mut s = state();
        s.acknowledged_input_count = 1;
        assert_eq!(rule_path(&s), "acknowledgedInputCount");

        let mut s = state();
        s.calls.push(call("a", false, false));
        assert_eq!(rule_path(&s), "calls[2].callId");

        let mut s = state();
        s.calls[1].completed = true;
        assert_eq!(rule_path(&s), "calls[1].completed");

        let mut s = state();
        s.calls[1].output = Some("early".into());
        assert_eq!(rule_path(&s), "calls[1].output");

        let mut s = state();
        s.approvals = vec![approval("r0", "a", tool(1, "shell"))];
        assert_eq!(rule_path(&s), "approvals[0].tool");

        let mut s = state();
        s.approvals = vec![
            approval("r0", "a", tool(0, "shell")),
            approval("r0", "x", tool(0, "shell")),
        ];
        assert_eq!(rule_path(&s), "approvals[1].requestId");

        let mut s = state();
        s.approvals = vec![
            approval("r0", "a", tool(0, "shell")),
            approval("r2", "a", tool(0, "shell")),
        ];
        assert_eq!(rule_path(&s), "approvals[1]");

        let mut s = state();
        s.approvals = vec![approval("r1", "z", tool(0, "shell"))];
        assert_eq!(rule_path(&s), "interruptions[0]");

        let mut s = state();
        s.approvals = vec![approval("r9", "b", tool(0, "shell"))];
        assert_eq!(rule_path(&s), "interruptions[0]");

        let mut s = state();
        s.interruptions
            .push(interruption("r1", "c", tool(0, "shell")));
        assert_eq!(rule_path(&s), "interruptions[1].requestId");

        let mut s = state();
        s.interruptions
            .push(interruption("r2", "b", tool(0, "shell")));
        assert_eq!(rule_path(&s), "interruptions[1]");

        let mut s = state();
        s.interruptions[0].tool = tool(1, "shell");
        assert_eq!(rule_path(&s), "interruptions[0].tool");

        let mut s = state();
        s.interruptions[0].call_id = "a".into();
        assert_eq!(rule_path(&s), "interruptions[0].callId");
    }

    #[test]
    fn decisions_bind_to_tool_and_call() {
        let mut s = state();
        s.interruptions.clear();
        s.approvals = vec![approval("r0", "b", tool(0, "shell"))];
        assert!(s.decision_for(&tool(0, "shell"), "b").is_some());
        assert!(s.decision_for(&tool(0, "apply_patch"), "b").is_none());
        assert!(s.decision_for(&tool(1, "shell"), "b").is_none());
        assert!(s.decision_for(&tool(0, "shell"), "a").is_none());
    }
}
