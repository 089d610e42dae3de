//! Filing a model's function call as the item its tool produces.
//!
//! Each call becomes exactly one item, started here: `commandExecution`
//! for the shell, `fileChange` for a patch, `functionCall` for a Rust
//! closure, `dynamicToolCall` for a client's tool; `plan`, `imageView` and
//! `handoff` are finished at once. Arguments are checked before anything
//! runs: a call whose arguments do not make sense (not JSON, missing
//! fields, a patch that does not parse or apply, a path outside the
//! workspace) is filed as a failed `functionCall` whose output tells the
//! model what was wrong, so it can try again. The provider's call goes to
//! the item's `providerData`, so the model view sends it back as written.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use spool_core::llm::IMAGE_URL_KEY;
use spool_core::run_state::{AgentKey, ToolKey};
use spool_protocol::*;
use spool_tools::apply_patch::{self, Patch};
use spool_tools::function::FunctionTool;
use spool_tools::mcp::McpToolInfo;
use spool_tools::shell::{self, ShellCommand};

use super::items::{ItemSink, OpenItem};
use crate::agent::{Agent, AgentSet, DynamicTool, ShellTool, Tool};
use crate::output_mapper::{ModelCall, new_item_id};

/// What a call asks for, with its arguments checked (nothing started).
pub(crate) enum Prepared {
    Shell {
        command: ShellCommand,
        escalation_requested: bool,
    },
    Patch {
        patch: Patch,
        /// Every path the patch touches, resolved inside the workspace.
        paths: Vec<PathBuf>,
        changes: Vec<FileUpdateChange>,
    },
    Function(FunctionTool),
    Dynamic {
        tool: DynamicTool,
        arguments: Value,
    },
    Mcp {
        tool: McpToolInfo,
        arguments: Value,
    },
    Plan(String),
    Image(PathBuf),
    Handoff(AgentKey, Arc<Agent>),
    /// The call cannot run; the model is told why.
    Invalid(String),
}

/// A call filed as an item, and what is left to do with it.
pub(crate) enum Filed {
    Shell {
        open: OpenItem,
        command: ShellCommand,
        escalation_requested: bool,
        /// Runs outside the kernel sandbox (a person or a grant let it).
        outside: bool,
    },
    Patch {
        open: OpenItem,
        patch: Patch,
        paths: Vec<PathBuf>,
    },
    Function {
        open: OpenItem,
        tool: FunctionTool,
    },
    Dynamic {
        open: OpenItem,
        tool: DynamicTool,
        arguments: Value,
    },
    Mcp {
        open: OpenItem,
        tool: McpToolInfo,
        arguments: Value,
    },
    /// Finished when filed (its events are already out).
    Done,
}

pub(crate) struct FiledCall {
    pub call: ModelCall,
    pub tool: ToolKey,
    pub item_id: String,
    pub filed: Filed,
    /// Control passes to this agent after the step.
    pub handoff: Option<AgentKey>,
}

/// Checks a call's arguments against the tool it names (`mcp`: the MCP
/// tools offered to the model for this step).
pub(crate) fn prepare(
    call: &ModelCall,
    agent: &Agent,
    agents: &AgentSet,
    mcp: &[McpToolInfo],
) -> Prepared {
    let tool = agent.tools.iter().find(|tool| tool.name() == call.name);
    let prepared = match tool {
        Some(Tool::Shell(settings)) => shell_command(&call.arguments, agent, settings).map(
            |(command, escalation_requested)| Prepared::Shell {
                command,
                escalation_requested,
            },
        ),
        Some(Tool::ApplyPatch) => {
            patch_of(&call.arguments, &agent.workspace_root).map(|(patch, paths, changes)| {
                Prepared::Patch {
                    patch,
                    paths,
                    changes,
                }
            })
        }
        Some(Tool::Function(tool)) => Ok(Prepared::Function(tool.clone())),
        Some(Tool::Dynamic(tool)) => serde_json::from_str::<Value>(non_empty(&call.arguments))
            .map(|arguments| Prepared::Dynamic {
                tool: tool.clone(),
                arguments,
            })
            .map_err(|e| format!("arguments are not JSON: {e}")),
        Some(Tool::UpdatePlan) => plan_text(&call.arguments).map(Prepared::Plan),
        Some(Tool::ViewImage) => {
            image_path(&call.arguments, &agent.workspace_root).map(Prepared::Image)
        }
        None => match handoff_target(&call.name, agent, agents) {
            Some((key, target)) => Ok(Prepared::Handoff(key, target)),
            None => match mcp.iter().find(|tool| tool.model_name() == call.name) {
                Some(tool) => mcp_arguments(&call.arguments).map(|arguments| Prepared::Mcp {
                    tool: tool.clone(),
                    arguments,
                }),
                None => Err(format!(
                    "no tool named `{}` is available to this agent",
                    call.name
                )),
            },
        },
    };
    prepared.unwrap_or_else(Prepared::Invalid)
}

/// Files `call` as the item its tool produces; the events to log go to
/// `out`.
pub(crate) fn file_call(
    call: ModelCall,
    prepared: Prepared,
    agent: &Agent,
    agent_key: &AgentKey,
    sink: &ItemSink,
    out: &mut Vec<ServerNotification>,
) -> FiledCall {
    let tool_key = ToolKey::new(agent_key.clone(), call.name.clone());
    let raw = Some(call.raw.clone());
    let mut handoff = None;
    let (filed, item_id) = match prepared {
        Prepared::Shell {
            command,
            escalation_requested,
        } => {
            let (open, started) = sink.start(command_item(&command), None, raw);
            out.push(started);
            let id = open.id().to_owned();
            let filed = Filed::Shell {
                open,
                command,
                escalation_requested,
                outside: false,
            };
            (filed, id)
        }
        Prepared::Patch {
            patch,
            paths,
            changes,
        } => {
            let item = ThreadItem::FileChange {
                id: new_item_id(),
                changes,
                status: PatchApplyStatus::InProgress,
            };
            let (open, started) = sink.start(item, None, raw);
            out.push(started);
            let id = open.id().to_owned();
            (Filed::Patch { open, patch, paths }, id)
        }
        Prepared::Function(tool) => {
            let item = ThreadItem::FunctionCall {
                id: new_item_id(),
                name: call.name.clone(),
                call_id: call.call_id.clone(),
                arguments: call.arguments.clone(),
                status: FunctionCallStatus::InProgress,
                output: None,
                duration_ms: None,
            };
            let (open, started) = sink.start(item, None, raw);
            out.push(started);
            let id = open.id().to_owned();
            (Filed::Function { open, tool }, id)
        }
        Prepared::Dynamic { tool, arguments } => {
            let item = ThreadItem::DynamicToolCall {
                id: new_item_id(),
                namespace: tool.namespace.clone(),
                tool: tool.name.clone(),
                arguments: arguments.clone(),
                status: DynamicToolCallStatus::InProgress,
                content_items: None,
                success: None,
                duration_ms: None,
            };
            let (open, started) = sink.start(item, None, raw);
            out.push(started);
            let id = open.id().to_owned();
            let filed = Filed::Dynamic {
                open,
                tool,
                arguments,
            };
            (filed, id)
        }
        Prepared::Mcp { tool, arguments } => {
            let item = super::mcp_call::item(&tool, &arguments);
            let (open, started) = sink.start(item, None, raw);
            out.push(started);
            let id = open.id().to_owned();
            let filed = Filed::Mcp {
                open,
                tool,
                arguments,
            };
            (filed, id)
        }
        Prepared::Plan(text) => {
            let item = ThreadItem::Plan {
                id: new_item_id(),
                text: String::new(),
            };
            let (mut open, started) = sink.start(item, None, raw);
            out.push(started);
            out.push(sink.plan_delta(open.id(), text.clone()));
            if let ThreadItem::Plan { text: t, .. } = &mut open.item {
                *t = text;
            }
            let id = open.id().to_owned();
            out.push(sink.complete(open, ItemStatus::Completed));
            (Filed::Done, id)
        }
        Prepared::Image(path) => match image_data_url(&path) {
            Ok(url) => {
                let id = new_item_id();
                let item = ThreadItem::ImageView {
                    id: id.clone(),
                    path: path.display().to_string(),
                };
                let mut data = call.raw.clone();
                if let Some(object) = data.as_object_mut() {
                    object.insert(IMAGE_URL_KEY.to_owned(), Value::String(url));
                }
                out.extend(sink.whole(item, None, Some(data)));
                (Filed::Done, id)
            }
            Err(message) => {
                let id = failed_call(&call, message, sink, out);
                (Filed::Done, id)
            }
        },
        Prepared::Handoff(key, target) => {
            let id = new_item_id();
            let item = ThreadItem::Handoff {
                id: id.clone(),
                from_agent: agent.name.clone(),
                to_agent: target.name.clone(),
                call_id: Some(call.call_id.clone()),
            };
            out.extend(sink.whole(item, None, raw));
            handoff = Some(key);
            (Filed::Done, id)
        }
        Prepared::Invalid(message) => {
            let id = failed_call(&call, message, sink, out);
            (Filed::Done, id)
        }
    };
    FiledCall {
        call,
        tool: tool_key,
        item_id,
        filed,
        handoff,
    }
}

/// The `commandExecution` item of a command about to be asked about or run.
fn command_item(command: &ShellCommand) -> ThreadItem {
    ThreadItem::CommandExecution {
        id: new_item_id(),
        plugin_id: None,
        script_path: None,
        command: shell::format_command(&command.argv),
        cwd: command.cwd.display().to_string(),
        process_id: None,
        source: CommandExecutionSource::Agent,
        status: CommandExecutionStatus::InProgress,
        command_actions: shell::command_actions(&command.argv),
        aggregated_output: None,
        exit_code: None,
        duration_ms: None,
    }
}

/// A call that cannot run, filed as a failed `functionCall` telling the
/// model why; returns its item id.
fn failed_call(
    call: &ModelCall,
    message: String,
    sink: &ItemSink,
    out: &mut Vec<ServerNotification>,
) -> String {
    let item = ThreadItem::FunctionCall {
        id: new_item_id(),
        name: call.name.clone(),
        call_id: call.call_id.clone(),
        arguments: call.arguments.clone(),
        status: FunctionCallStatus::Failed,
        output: Some(format!("{}: {message}", call.name)),
        duration_ms: Some(0),
    };
    let (open, started) = sink.start(item, None, Some(call.raw.clone()));
    let id = open.id().to_owned();
    out.push(started);
    out.push(sink.complete(open, ItemStatus::Failed));
    id
}

/// An MCP call's arguments: a JSON object (MCP takes nothing else).
fn mcp_arguments(arguments: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(non_empty(arguments)) {
        Ok(object @ Value::Object(_)) => Ok(object),
        Ok(_) => Err("arguments must be a JSON object".to_owned()),
        Err(e) => Err(format!("arguments are not JSON: {e}")),
    }
}

fn non_empty(arguments: &str) -> &str {
    match arguments.trim().is_empty() {
        true => "{}",
        false => arguments,
    }
}

#[derive(Deserialize)]
struct ShellArguments {
    command: Vec<String>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    sandbox_permissions: Option<String>,
}

fn shell_command(
    arguments: &str,
    agent: &Agent,
    settings: &ShellTool,
) -> Result<(ShellCommand, bool), String> {
    let parsed: ShellArguments = serde_json::from_str(non_empty(arguments))
        .map_err(|e| format!("invalid arguments: {e}"))?;
    if parsed.command.is_empty() || parsed.command[0].is_empty() {
        return Err("invalid arguments: `command` must name a program".to_owned());
    }
    let cwd = match &parsed.workdir {
        None => agent.workspace_root.clone(),
        Some(dir) => {
            let dir = Path::new(dir);
            match dir.is_absolute() {
                true => dir.to_owned(),
                false => agent.workspace_root.join(dir),
            }
        }
    };
    if !cwd.is_dir() {
        return Err(format!(
            "working directory {} does not exist",
            cwd.display()
        ));
    }
    let timeout = parsed
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(settings.default_timeout)
        .min(settings.max_timeout);
    let escalation = match parsed.sandbox_permissions.as_deref() {
        None | Some("use_default") => false,
        Some("require_escalated") => true,
        Some(other) => {
            return Err(format!(
                "invalid arguments: sandbox_permissions {other:?} is not use_default or require_escalated"
            ));
        }
    };
    Ok((
        ShellCommand::new(parsed.command, cwd).timeout(timeout),
        escalation,
    ))
}

type PatchPlan = (Patch, Vec<PathBuf>, Vec<FileUpdateChange>);

fn patch_of(arguments: &str, root: &Path) -> Result<PatchPlan, String> {
    #[derive(Deserialize)]
    struct PatchArguments {
        input: String,
    }
    // Models send the patch as `{"input": …}`; accept a bare patch too.
    let text = match serde_json::from_str::<PatchArguments>(non_empty(arguments)) {
        Ok(parsed) => parsed.input,
        Err(_) if arguments.contains("*** Begin Patch") => arguments.to_owned(),
        Err(e) => return Err(format!("invalid arguments: {e}")),
    };
    let patch = apply_patch::parse_patch(&text).map_err(|e| e.to_string())?;
    let changes = apply_patch::preview(&patch, root).map_err(|e| e.to_string())?;
    let paths = apply_patch::affected_paths(&patch)
        .iter()
        .map(|path| apply_patch::resolve_in_workspace(root, &path.to_string_lossy()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok((patch, paths, changes))
}

fn plan_text(arguments: &str) -> Result<String, String> {
    #[derive(Deserialize)]
    struct Step {
        step: String,
        status: String,
    }
    #[derive(Deserialize)]
    struct PlanArguments {
        #[serde(default)]
        explanation: Option<String>,
        plan: Vec<Step>,
    }
    let parsed: PlanArguments = serde_json::from_str(non_empty(arguments))
        .map_err(|e| format!("invalid arguments: {e}"))?;
    let mut text = String::new();
    if let Some(explanation) = parsed.explanation.filter(|e| !e.trim().is_empty()) {
        text.push_str(explanation.trim());
        text.push('\n');
    }
    for step in parsed.plan {
        let mark = match step.status.as_str() {
            "completed" => "[x]",
            "in_progress" => "[~]",
            "pending" => "[ ]",
            other => return Err(format!("invalid step status {other:?}")),
        };
        text.push_str(&format!("- {mark} {}\n", step.step));
    }
    Ok(text)
}

const IMAGE_EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "gif", "webp"];

fn image_path(arguments: &str, root: &Path) -> Result<PathBuf, String> {
    let parsed: Value = serde_json::from_str(non_empty(arguments))
        .map_err(|e| format!("invalid arguments: {e}"))?;
    let Some(path) = parsed.get("path").and_then(Value::as_str) else {
        return Err("invalid arguments: `path` is required".to_owned());
    };
    let resolved = apply_patch::resolve_in_workspace(root, path).map_err(|e| e.to_string())?;
    let extension = resolved
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if !IMAGE_EXTENSIONS.contains(&extension.as_str()) {
        return Err(format!(
            "{path} is not an image (expected one of: {})",
            IMAGE_EXTENSIONS.join(", ")
        ));
    }
    if !resolved.is_file() {
        return Err(format!("{path} does not exist"));
    }
    Ok(resolved)
}

fn handoff_target(name: &str, agent: &Agent, agents: &AgentSet) -> Option<(AgentKey, Arc<Agent>)> {
    agent.handoffs.iter().find_map(|target| {
        let key = agents.key_of(target)?;
        (AgentSet::handoff_tool_name(key) == name).then(|| (key.clone(), target.clone()))
    })
}

/// Largest image `view_image` attaches (model APIs refuse larger ones).
const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// The image as a `data:` URL, the form the model API takes inline.
fn image_data_url(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if size > MAX_IMAGE_BYTES {
        return Err(format!(
            "{} is {size} bytes; images over {MAX_IMAGE_BYTES} bytes are not attached",
            path.display()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mime = match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        _ => "image/webp",
    };
    Ok(format!(
        "data:{mime};base64,{}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes)
    ))
}
