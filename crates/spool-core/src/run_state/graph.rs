//! Checking a snapshot against the agent graph it will resume under.
//!
//! A snapshot names agents and tools by key. If the program was changed
//! between pause and resume (an agent renamed, a tool removed, two agents
//! reordered so occurrences shift), resuming could route an approved call
//! to a different tool or agent. So resume fails closed: every key the
//! snapshot uses must exist in the graph.

use std::collections::{HashMap, HashSet};

use super::error::RunStateError;
use super::types::{AgentKey, RunState, ToolKey};

/// What a runtime's agent graph must answer for a resume check.
pub trait AgentGraph {
    fn has_agent(&self, key: &AgentKey) -> bool;
    /// True only if the tool's agent exists and has this tool.
    fn has_tool(&self, key: &ToolKey) -> bool;
}

/// A graph given as a list of agents, each with its tool lookup keys.
/// Agents with the same name get occurrences 0, 1, ... in list order —
/// the same rule the runtime uses to key agents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticAgentGraph {
    agents: Vec<AgentKey>,
    tools: HashMap<AgentKey, HashSet<String>>,
}

impl StaticAgentGraph {
    /// `agents` in declaration order, each `(name, tool names)`.
    pub fn new<N, T>(agents: impl IntoIterator<Item = (N, Vec<T>)>) -> Self
    where
        N: Into<String>,
        T: Into<String>,
    {
        let mut graph = StaticAgentGraph::default();
        let mut seen: HashMap<String, u32> = HashMap::new();
        for (name, tools) in agents {
            let name = name.into();
            let occurrence = seen.entry(name.clone()).or_insert(0);
            let key = AgentKey::new(name, *occurrence);
            *occurrence += 1;
            graph
                .tools
                .insert(key.clone(), tools.into_iter().map(Into::into).collect());
            graph.agents.push(key);
        }
        graph
    }

    /// The agents' keys, in declaration order.
    pub fn agents(&self) -> &[AgentKey] {
        &self.agents
    }
}

impl AgentGraph for StaticAgentGraph {
    fn has_agent(&self, key: &AgentKey) -> bool {
        self.tools.contains_key(key)
    }

    fn has_tool(&self, key: &ToolKey) -> bool {
        self.tools
            .get(&key.agent)
            .is_some_and(|tools| tools.contains(&key.name))
    }
}

impl RunState {
    /// Fails if the current agent, or the agent or tool of any ledger
    /// entry, approval or interruption, is not in `graph`. The first
    /// missing one is named (agent and tool names are identifiers, not
    /// snapshot content).
    pub fn check_against(&self, graph: &dyn AgentGraph) -> Result<(), RunStateError> {
        if !graph.has_agent(&self.current_agent) {
            return Err(missing_agent("currentAgent".into(), &self.current_agent));
        }
        let tools = self
            .calls
            .iter()
            .enumerate()
            .map(|(i, call)| (format!("calls[{i}].tool"), &call.tool))
            .chain(
                self.approvals
                    .iter()
                    .enumerate()
                    .map(|(i, approval)| (format!("approvals[{i}].tool"), &approval.tool)),
            )
            .chain(
                self.interruptions
                    .iter()
                    .enumerate()
                    .map(|(i, pending)| (format!("interruptions[{i}].tool"), &pending.tool)),
            );
        for (path, tool) in tools {
            if !graph.has_agent(&tool.agent) {
                return Err(missing_agent(format!("{path}.agent"), &tool.agent));
            }
            if !graph.has_tool(tool) {
                return Err(RunStateError::MissingTool {
                    path,
                    agent: tool.agent.name.clone(),
                    occurrence: tool.agent.occurrence,
                    tool: tool.name.clone(),
                });
            }
        }
        Ok(())
    }
}

fn missing_agent(path: String, agent: &AgentKey) -> RunStateError {
    RunStateError::MissingAgent {
        path,
        name: agent.name.clone(),
        occurrence: agent.occurrence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_follow_declaration_order_per_name() {
        let graph = StaticAgentGraph::new([
            ("coder", vec!["shell"]),
            ("triage", vec!["transfer"]),
            ("coder", vec!["apply_patch"]),
        ]);
        assert_eq!(
            graph.agents(),
            [
                AgentKey::new("coder", 0),
                AgentKey::new("triage", 0),
                AgentKey::new("coder", 1)
            ]
        );
        assert!(graph.has_tool(&ToolKey::new(AgentKey::new("coder", 0), "shell")));
        assert!(!graph.has_tool(&ToolKey::new(AgentKey::new("coder", 1), "shell")));
        assert!(graph.has_tool(&ToolKey::new(AgentKey::new("coder", 1), "apply_patch")));
        assert!(!graph.has_agent(&AgentKey::new("coder", 2)));
        assert!(!graph.has_tool(&ToolKey::new(AgentKey::new("coder", 2), "shell")));
    }
}
