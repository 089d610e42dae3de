//! Agents: who answers (instructions, model settings), what they may do
//! (tools, handoffs) and what needs a person first (approval policy,
//! sandbox mode).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use spool_core::run_state::{AgentGraph, AgentKey, ToolKey};
use spool_model::ToolSpec;
use spool_tools::function::FunctionTool;
use spool_tools::mcp::{MODEL_NAME_PREFIX, McpToolbox};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};

/// One agent. Cheap to clone: handoff targets are shared.
#[derive(Clone)]
pub struct Agent {
    pub name: String,
    pub instructions: Option<String>,
    pub model: ModelSettings,
    pub tools: Vec<Tool>,
    /// Agents this one may hand control to (`transfer_to_{name}` tools).
    pub handoffs: Vec<Arc<Agent>>,
    pub approval_policy: ApprovalPolicy,
    pub sandbox: SandboxMode,
    /// Where shell commands run and patches apply; nothing outside it is
    /// written without a person's approval.
    pub workspace_root: PathBuf,
    /// How the sandbox mode holds for shell commands.
    pub confinement: Confinement,
    /// What the thread's sandbox policy adds to its mode: more writable
    /// roots, the network, the temp dirs left out.
    pub sandbox_options: SandboxOptions,
    /// Environment variables commands get even though their names look
    /// like secrets.
    pub env_pass_through: Vec<String>,
    /// Environment variables that are secrets whatever their names (the
    /// provider's key variable): never given to commands.
    pub env_secrets: Vec<String>,
    /// The MCP servers whose tools the agent may call (`mcpToolCall`
    /// items), listed before each model call.
    pub mcp: Option<Arc<dyn McpToolbox>>,
}

/// The parts of a sandbox policy beyond its mode (Codex's
/// `sandboxPolicy`: `writableRoots`, `networkAccess`, `excludeTmpdirEnvVar`,
/// `excludeSlashTmp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxOptions {
    /// Writable besides the workspace under `workspace-write`, for commands
    /// and patches alike. Absolute; folders that do not exist are skipped.
    pub writable_roots: Vec<PathBuf>,
    /// Commands inside the sandbox may use the network, and commands that
    /// name a host are not asked about it (deny rules still hold).
    pub network: bool,
    /// `$TMPDIR` is not writable under `workspace-write`.
    pub exclude_tmpdir_env_var: bool,
    /// `/tmp` is not writable under `workspace-write`.
    pub exclude_slash_tmp: bool,
}

/// How commands are kept inside the sandbox mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Confinement {
    /// The kernel confines them: each sandboxed command is started through
    /// this helper (the `spool` binary's `sandbox-exec`).
    Kernel(spool_tools::sandbox::Launcher),
    /// No OS sandbox: only commands known to be read-only count as inside
    /// it. The default of [`Agent::new`], because a library cannot know
    /// where a sandbox helper is; the `spool` binary always sets `Kernel`
    /// unless its operator chose this fallback explicitly.
    #[default]
    Classify,
}

impl Agent {
    pub fn new(name: impl Into<String>, workspace_root: impl Into<PathBuf>) -> Self {
        Agent {
            name: name.into(),
            instructions: None,
            model: ModelSettings::default(),
            tools: Vec::new(),
            handoffs: Vec::new(),
            approval_policy: ApprovalPolicy::default(),
            sandbox: SandboxMode::default(),
            workspace_root: workspace_root.into(),
            confinement: Confinement::default(),
            sandbox_options: SandboxOptions::default(),
            env_pass_through: Vec::new(),
            env_secrets: Vec::new(),
            mcp: None,
        }
    }

    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model.model = model.into();
        self
    }

    pub fn with_tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    pub fn with_handoff(mut self, agent: Arc<Agent>) -> Self {
        self.handoffs.push(agent);
        self
    }

    pub fn with_policy(mut self, policy: ApprovalPolicy, sandbox: SandboxMode) -> Self {
        self.approval_policy = policy;
        self.sandbox = sandbox;
        self
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field(
                "tools",
                &self.tools.iter().map(Tool::name).collect::<Vec<_>>(),
            )
            .field(
                "handoffs",
                &self.handoffs.iter().map(|a| &a.name).collect::<Vec<_>>(),
            )
            .field("approval_policy", &self.approval_policy)
            .field("sandbox", &self.sandbox)
            .field("confinement", &self.confinement)
            .field("mcp", &self.mcp.is_some())
            .finish()
    }
}

/// How an agent calls its model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelSettings {
    pub model: String,
    pub temperature: Option<f32>,
    pub max_output_tokens: Option<u32>,
    /// Let the model ask for several tool calls in one response.
    pub parallel_tool_calls: bool,
}

/// A tool an agent may call.
#[derive(Clone)]
pub enum Tool {
    /// Run a command (`commandExecution` items).
    Shell(ShellTool),
    /// Apply a patch in the model's patch format (`fileChange` items).
    ApplyPatch,
    /// A Rust closure run in-process (`functionCall` items).
    Function(FunctionTool),
    /// Declared and run by the client (`dynamicToolCall` items, answered
    /// through an `item/tool/call` request).
    Dynamic(DynamicTool),
    /// The agent's plan (`plan` items).
    UpdatePlan,
    /// Look at an image file in the workspace (`imageView` items; the
    /// image goes to the next model request).
    ViewImage,
}

/// Settings of the shell tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellTool {
    /// Used when the model gives no timeout.
    pub default_timeout: Duration,
    /// The most the model may ask for.
    pub max_timeout: Duration,
}

impl Default for ShellTool {
    fn default() -> Self {
        ShellTool {
            default_timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
        }
    }
}

/// A tool the client runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicTool {
    pub namespace: Option<String>,
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

pub const SHELL: &str = "shell";
pub const APPLY_PATCH: &str = "apply_patch";
pub const UPDATE_PLAN: &str = "update_plan";
pub const VIEW_IMAGE: &str = "view_image";

impl Tool {
    /// The name the model calls it by (the tool lookup key).
    pub fn name(&self) -> &str {
        match self {
            Tool::Shell(_) => SHELL,
            Tool::ApplyPatch => APPLY_PATCH,
            Tool::Function(tool) => tool.name(),
            Tool::Dynamic(tool) => &tool.name,
            Tool::UpdatePlan => UPDATE_PLAN,
            Tool::ViewImage => VIEW_IMAGE,
        }
    }

    /// What the model is told about it.
    pub fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self {
            Tool::Shell(_) => (
                "Runs a command (argv) in the workspace and returns its exit code and output. \
                 Set sandbox_permissions to \"require_escalated\" (with a justification) to ask \
                 a person to let it run outside the sandbox.",
                json!({
                    "type": "object",
                    "properties": {
                        "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        "workdir": {"type": "string"},
                        "timeout_ms": {"type": "integer", "minimum": 1},
                        "sandbox_permissions": {"type": "string", "enum": ["use_default", "require_escalated"]},
                        "justification": {"type": "string"}
                    },
                    "required": ["command"],
                    "additionalProperties": false
                }),
            ),
            Tool::ApplyPatch => (
                "Edits files with a patch: '*** Begin Patch', then '*** Add File: path' (+lines), \
                 '*** Update File: path' (optionally '*** Move to: path', then @@ hunks with \
                 ' ', '-', '+' lines) or '*** Delete File: path', and '*** End Patch'.",
                json!({
                    "type": "object",
                    "properties": {"input": {"type": "string"}},
                    "required": ["input"],
                    "additionalProperties": false
                }),
            ),
            Tool::Function(tool) => {
                return ToolSpec {
                    name: tool.name().to_owned(),
                    description: tool.description().to_owned(),
                    parameters: tool.parameters().clone(),
                };
            }
            Tool::Dynamic(tool) => {
                return ToolSpec {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.parameters.clone(),
                };
            }
            Tool::UpdatePlan => (
                "Records your plan: a list of steps, each pending, in_progress or completed.",
                json!({
                    "type": "object",
                    "properties": {
                        "explanation": {"type": "string"},
                        "plan": {"type": "array", "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["step", "status"]
                        }}
                    },
                    "required": ["plan"]
                }),
            ),
            Tool::ViewImage => (
                "Shows you an image file from the workspace.",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
        };
        ToolSpec {
            name: self.name().to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }
}

/// Every agent reachable from the first one, each with its identity
/// (name + occurrence, so two agents with one name stay apart).
#[derive(Debug, Clone)]
pub struct AgentSet {
    agents: Vec<(AgentKey, Arc<Agent>)>,
}

impl AgentSet {
    /// Walks handoffs depth-first from `start` in declaration order; an
    /// agent reached twice (the same `Arc`) is listed once.
    pub fn new(start: Arc<Agent>) -> Self {
        let mut agents: Vec<(AgentKey, Arc<Agent>)> = Vec::new();
        let mut stack = vec![start];
        while let Some(agent) = stack.pop() {
            if agents.iter().any(|(_, seen)| Arc::ptr_eq(seen, &agent)) {
                continue;
            }
            let occurrence = agents.iter().filter(|(k, _)| k.name == agent.name).count();
            let key = AgentKey::new(agent.name.clone(), occurrence as u32);
            for next in agent.handoffs.iter().rev() {
                stack.push(next.clone());
            }
            agents.push((key, agent));
        }
        AgentSet { agents }
    }

    pub fn start(&self) -> (&AgentKey, &Arc<Agent>) {
        let (key, agent) = &self.agents[0];
        (key, agent)
    }

    pub fn get(&self, key: &AgentKey) -> Option<&Arc<Agent>> {
        self.agents.iter().find(|(k, _)| k == key).map(|(_, a)| a)
    }

    pub fn key_of(&self, agent: &Arc<Agent>) -> Option<&AgentKey> {
        self.agents
            .iter()
            .find(|(_, a)| Arc::ptr_eq(a, agent))
            .map(|(k, _)| k)
    }

    /// The handoff tool name for a target agent: `transfer_to_{name}`,
    /// with `_{occurrence}` when its name is not the first of its kind.
    pub fn handoff_tool_name(key: &AgentKey) -> String {
        let name: String = key
            .name
            .chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    true => c,
                    false => '_',
                },
            )
            .collect();
        match key.occurrence {
            0 => format!("transfer_to_{name}"),
            n => format!("transfer_to_{name}_{n}"),
        }
    }
}

impl AgentGraph for AgentSet {
    fn has_agent(&self, key: &AgentKey) -> bool {
        self.get(key).is_some()
    }

    fn has_tool(&self, key: &ToolKey) -> bool {
        let Some(agent) = self.get(&key.agent) else {
            return false;
        };
        agent.tools.iter().any(|tool| tool.name() == key.name)
            // MCP tools are listed at each step; a call to one that is
            // gone by then is told so when it is filed.
            || (agent.mcp.is_some() && key.name.starts_with(MODEL_NAME_PREFIX))
            || agent.handoffs.iter().any(|target| {
                self.key_of(target)
                    .is_some_and(|k| AgentSet::handoff_tool_name(k) == key.name)
            })
    }
}
