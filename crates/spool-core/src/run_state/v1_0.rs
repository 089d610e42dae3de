//! Decoder for `$schemaVersion: "1.0"`, the first shipped shape.
//!
//! Frozen: this reads what a 1.0 writer wrote, forever. When the current
//! struct grows (a 1.1 field), this decoder fills the new field with the
//! default that reproduces 1.0 behaviour; it never learns to read the new
//! field, which would make it a second 1.1 reader.
//!
//! Required: everything except `lastResponseId` and `calls[].output`,
//! which may be absent or `null`.

use serde_json::{Map, Value};

use super::error::RunStateError;
use super::reader::{Elem, Obj};
use super::types::{
    AgentKey, ApprovalRecord, CallRecord, Interruption, InterruptionKind, RunState, ToolKey,
};
use crate::llm::ReasoningIdPolicy;

/// The interruption kinds 1.0 knows. Its own list, not the current enum's,
/// so a kind added later is not silently accepted in a 1.0 snapshot.
pub(crate) const KINDS: [(&str, InterruptionKind); 4] = [
    ("commandExecution", InterruptionKind::CommandExecution),
    ("fileChange", InterruptionKind::FileChange),
    ("dynamicToolCall", InterruptionKind::DynamicToolCall),
    ("network", InterruptionKind::Network),
];
pub(crate) const KIND_NAMES: &str = "commandExecution, fileChange, dynamicToolCall, network";

/// The interruption kinds a version reads, and their names for errors.
pub(crate) type Kinds<'k> = (&'k [(&'static str, InterruptionKind)], &'static str);

pub(crate) fn decode(
    version: &'static str,
    map: &Map<String, Value>,
) -> Result<RunState, RunStateError> {
    decode_with(version, map, (&KINDS, KIND_NAMES))
}

/// 1.0's fields, with the interruption kinds of a later version (which
/// may know more of them).
pub(crate) fn decode_with(
    version: &'static str,
    map: &Map<String, Value>,
    kinds: Kinds<'_>,
) -> Result<RunState, RunStateError> {
    let root = Obj::root(version, map);
    Ok(RunState {
        thread_id: root.string("threadId")?,
        turn_id: root.string("turnId")?,
        current_agent: agent_key(&root.object("currentAgent")?)?,
        step: root.u32("step")?,
        max_turns: root.u32("maxTurns")?,
        last_response_id: root.opt_string("lastResponseId")?,
        acknowledged_input_count: root.usize("acknowledgedInputCount")?,
        input: each(&root, "input", input_item)?,
        calls: each(&root, "calls", call)?,
        approvals: each(&root, "approvals", approval)?,
        interruptions: each(&root, "interruptions", |elem| interruption(elem, kinds))?,
        // 1.0 had neither: ids were kept and spool replayed its log.
        reasoning_ids: ReasoningIdPolicy::Preserve,
        history: None,
    })
}

pub(crate) fn each<T>(
    parent: &Obj<'_>,
    key: &str,
    decode: impl Fn(&Elem<'_>) -> Result<T, RunStateError>,
) -> Result<Vec<T>, RunStateError> {
    parent.array(key)?.iter().map(decode).collect()
}

/// Input items are opaque Responses-API items, but each is an object.
fn input_item(elem: &Elem<'_>) -> Result<Value, RunStateError> {
    Obj::from_elem(elem)?;
    Ok(elem.value.clone())
}

fn agent_key(obj: &Obj<'_>) -> Result<AgentKey, RunStateError> {
    Ok(AgentKey {
        name: obj.string("name")?,
        occurrence: obj.u32("occurrence")?,
    })
}

fn tool_key(obj: &Obj<'_>) -> Result<ToolKey, RunStateError> {
    Ok(ToolKey {
        agent: agent_key(&obj.object("agent")?)?,
        name: obj.string("name")?,
    })
}

fn call(elem: &Elem<'_>) -> Result<CallRecord, RunStateError> {
    let obj = Obj::from_elem(elem)?;
    Ok(CallRecord {
        call_id: obj.string("callId")?,
        tool: tool_key(&obj.object("tool")?)?,
        item_id: obj.string("itemId")?,
        arguments: obj.string("arguments")?,
        executed: obj.bool("executed")?,
        completed: obj.bool("completed")?,
        output: obj.opt_string("output")?,
    })
}

fn approval(elem: &Elem<'_>) -> Result<ApprovalRecord, RunStateError> {
    let obj = Obj::from_elem(elem)?;
    Ok(ApprovalRecord {
        request_id: obj.string("requestId")?,
        call_id: obj.string("callId")?,
        tool: tool_key(&obj.object("tool")?)?,
        decision: obj.value("decision")?,
    })
}

fn interruption(elem: &Elem<'_>, (kinds, names): Kinds<'_>) -> Result<Interruption, RunStateError> {
    let obj = Obj::from_elem(elem)?;
    Ok(Interruption {
        request_id: obj.string("requestId")?,
        call_id: obj.string("callId")?,
        tool: tool_key(&obj.object("tool")?)?,
        item_id: obj.string("itemId")?,
        kind: obj.one_of("kind", kinds, names)?,
        summary: obj.string("summary")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_match_what_serde_writes() {
        for (name, kind) in KINDS {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                Value::String(name.into())
            );
            assert!(KIND_NAMES.contains(name));
        }
    }
}
