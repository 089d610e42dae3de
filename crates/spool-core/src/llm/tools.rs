//! Tool items → a call and its output, as the model API wants them.
//!
//! Every tool item records both halves of one exchange, so both input
//! items come from the same record and are emitted together or not at all:
//! an item without a result yet (still running) emits nothing, because the
//! API rejects a call without its output.
//!
//! The call is the one the provider sent (`providerData`: its `call_id`,
//! `name` and `arguments`, as given, so the model sees its own words).
//! When none was recorded (the item came from the runtime or a client, not
//! from a model call) a call is synthesized with the item id as `call_id`
//! and the name the tool goes by: `shell`, `apply_patch`,
//! `mcp__{server}__{tool}`, the dynamic tool's name, `transfer_to_{agent}`,
//! `update_plan`.

use serde_json::{Value, json};
use spool_protocol::responses::{KnownResponseItem, ResponseItem};
use spool_protocol::{
    CommandExecutionStatus, DynamicToolCallOutputContentItem, DynamicToolCallStatus,
    FileUpdateChange, FunctionCallStatus, ItemStatus, McpToolCallError, McpToolCallResult,
    McpToolCallStatus, PatchApplyStatus, PatchChangeKind, ThreadItem,
};

use super::provider::{self, RecordedCall};
use crate::record::ItemRecord;

const DECLINED: &str = "The user declined this tool call.";
const INTERRUPTED: &str = "The tool call was interrupted before it finished.";
const FAILED: &str = "The tool call failed.";

/// Emits the call and its output for a tool item, or nothing while the
/// tool has no result.
pub(super) fn convert_tool(record: &ItemRecord, out: &mut Vec<ResponseItem>) {
    let Some(output) = tool_output(record) else {
        return;
    };
    let call = match &record.item {
        // The runtime keeps the provider's call on the item itself.
        ThreadItem::FunctionCall {
            call_id,
            name,
            arguments,
            ..
        } => RecordedCall {
            call_id: call_id.clone(),
            name: Some(name.clone()),
            arguments: Some(arguments.clone()),
            freeform_input: None,
        },
        item => provider::recorded_call(record.envelope.provider_data.as_deref())
            .unwrap_or_else(|| synthesized_call(item)),
    };
    let name = call.name.unwrap_or_else(|| synthesized_name(&record.item));
    if let Some(input) = call.freeform_input {
        // The model API has no typed item for freeform calls in this
        // protocol version; they travel as raw JSON, which it accepts.
        out.push(ResponseItem::Other(json!({
            "type": "custom_tool_call",
            "call_id": call.call_id,
            "name": name,
            "input": input,
        })));
        out.push(ResponseItem::Other(json!({
            "type": "custom_tool_call_output",
            "call_id": call.call_id,
            "output": output,
        })));
        return;
    }
    out.push(ResponseItem::Known(KnownResponseItem::FunctionCall {
        // Provider item ids (`fc_...`) and `status` are stripped: see the
        // module docs of `llm`.
        id: None,
        call_id: call.call_id.clone(),
        name,
        arguments: call.arguments.unwrap_or_else(|| "{}".to_owned()),
        status: None,
    }));
    out.push(ResponseItem::Known(KnownResponseItem::FunctionCallOutput {
        call_id: call.call_id,
        output,
    }));
}

/// What the tool answered, or `None` while there is no answer yet.
fn tool_output(record: &ItemRecord) -> Option<String> {
    let envelope = record.envelope.status;
    match &record.item {
        ThreadItem::FunctionCall { status, output, .. } => match status {
            FunctionCallStatus::Completed => Some(output.clone().unwrap_or_default()),
            FunctionCallStatus::Failed => Some(output.clone().unwrap_or_else(|| FAILED.into())),
            // A refusal by the policy carries its reason; a person's
            // decline does not.
            FunctionCallStatus::Declined => Some(output.clone().unwrap_or_else(|| DECLINED.into())),
            FunctionCallStatus::InProgress => unfinished(envelope),
        },
        ThreadItem::CommandExecution {
            status,
            aggregated_output,
            exit_code,
            ..
        } => match status {
            CommandExecutionStatus::Completed | CommandExecutionStatus::Failed => Some(
                command_output(*status, aggregated_output.as_deref(), *exit_code),
            ),
            CommandExecutionStatus::Declined => Some(
                aggregated_output
                    .clone()
                    .unwrap_or_else(|| "The user declined to run this command.".into()),
            ),
            CommandExecutionStatus::InProgress => unfinished(envelope),
        },
        ThreadItem::FileChange {
            changes, status, ..
        } => match status {
            PatchApplyStatus::Completed => {
                Some(files_output("Updated the following files:", changes))
            }
            PatchApplyStatus::Failed => {
                Some(files_output("Failed to apply the patch to:", changes))
            }
            PatchApplyStatus::Declined => Some("The user declined this patch.".into()),
            PatchApplyStatus::InProgress => unfinished(envelope),
        },
        ThreadItem::McpToolCall {
            status,
            result,
            error,
            ..
        } => match status {
            McpToolCallStatus::Completed | McpToolCallStatus::Failed => {
                Some(mcp_output(result.as_deref(), error.as_ref()))
            }
            McpToolCallStatus::InProgress => unfinished(envelope),
        },
        ThreadItem::DynamicToolCall {
            status,
            content_items,
            success,
            ..
        } => match status {
            DynamicToolCallStatus::Completed | DynamicToolCallStatus::Failed => {
                Some(dynamic_output(content_items.as_deref(), *status, *success))
            }
            DynamicToolCallStatus::InProgress => unfinished(envelope),
        },
        // These two have no result of their own: the envelope says whether
        // they happened.
        ThreadItem::Handoff { to_agent, .. } => match envelope {
            ItemStatus::InProgress => None,
            ItemStatus::Completed => Some(format!("Transferred to {to_agent}")),
            ItemStatus::Declined => Some(DECLINED.into()),
            ItemStatus::Incomplete | ItemStatus::Failed => {
                Some(format!("The transfer to {to_agent} did not complete."))
            }
        },
        ThreadItem::Plan { .. } => match envelope {
            ItemStatus::InProgress => None,
            ItemStatus::Completed | ItemStatus::Incomplete | ItemStatus::Failed => {
                Some("Plan updated".into())
            }
            ItemStatus::Declined => Some(DECLINED.into()),
        },
        // Not tool items; `convert` never routes them here.
        ThreadItem::UserMessage { .. }
        | ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::WebSearch { .. }
        | ThreadItem::ImageView { .. }
        | ThreadItem::EnteredReviewMode { .. }
        | ThreadItem::ExitedReviewMode { .. }
        | ThreadItem::ContextCompaction { .. }
        | ThreadItem::Component { .. }
        | ThreadItem::Container { .. }
        | ThreadItem::Status { .. }
        | ThreadItem::StateChange { .. }
        | ThreadItem::ResourceChange { .. }
        | ThreadItem::StepError { .. }
        | ThreadItem::Error { .. }
        | ThreadItem::Context { .. } => None,
    }
}

/// A tool item whose own status never left `inProgress`. While its
/// envelope is in progress too the tool is still running: no answer yet.
/// Once the envelope is terminal (a crash, an interrupt) the tool will never
/// answer, and the call still needs an output for the history to stay valid.
fn unfinished(envelope: ItemStatus) -> Option<String> {
    match envelope {
        ItemStatus::InProgress => None,
        ItemStatus::Declined => Some(DECLINED.into()),
        ItemStatus::Completed | ItemStatus::Incomplete | ItemStatus::Failed => {
            Some(INTERRUPTED.into())
        }
    }
}

fn command_output(
    status: CommandExecutionStatus,
    output: Option<&str>,
    exit_code: Option<i32>,
) -> String {
    let head = match (exit_code, status) {
        (Some(code), _) => format!("Exit code: {code}\n"),
        (None, CommandExecutionStatus::Failed) => "The command failed.\n".to_owned(),
        (None, _) => String::new(),
    };
    format!("{head}Output:\n{}", output.unwrap_or_default())
}

fn files_output(head: &str, changes: &[FileUpdateChange]) -> String {
    let mut text = head.to_owned();
    for change in changes {
        let line = match &change.kind {
            PatchChangeKind::Add => format!("\nA {}", change.path),
            PatchChangeKind::Delete => format!("\nD {}", change.path),
            PatchChangeKind::Update { move_path: None } => format!("\nM {}", change.path),
            PatchChangeKind::Update {
                move_path: Some(to),
            } => format!("\nM {} -> {to}", change.path),
        };
        text.push_str(&line);
    }
    text
}

fn mcp_output(result: Option<&McpToolCallResult>, error: Option<&McpToolCallError>) -> String {
    if let Some(error) = error {
        return format!("Error: {}", error.message);
    }
    let Some(result) = result else {
        return FAILED.into();
    };
    if result.content.is_empty() {
        return result
            .structured_content
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default();
    }
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block.get("text").and_then(Value::as_str) {
            // MCP text blocks go in as the text; anything else (images,
            // resources) as its JSON, which the model can still read.
            Some(text) if block.get("type").and_then(Value::as_str) == Some("text") => {
                text.to_owned()
            }
            _ => block.to_string(),
        })
        .collect();
    parts.join("\n")
}

fn dynamic_output(
    content: Option<&[DynamicToolCallOutputContentItem]>,
    status: DynamicToolCallStatus,
    success: Option<bool>,
) -> String {
    let parts: Vec<String> = content
        .unwrap_or_default()
        .iter()
        .map(|part| match part {
            DynamicToolCallOutputContentItem::InputText { text } => text.clone(),
            // A function output here is text only; the image is referenced.
            DynamicToolCallOutputContentItem::InputImage { image_url } => {
                format!("[image: {image_url}]")
            }
            DynamicToolCallOutputContentItem::InputAudio { audio_url } => {
                format!("[audio: {audio_url}]")
            }
        })
        .collect();
    let failed = status == DynamicToolCallStatus::Failed || success == Some(false);
    if parts.is_empty() && failed {
        return FAILED.into();
    }
    parts.join("\n")
}

/// A call for a tool item that has no provider call on record.
fn synthesized_call(item: &ThreadItem) -> RecordedCall {
    let (call_id, arguments) = match item {
        ThreadItem::CommandExecution {
            id, command, cwd, ..
        } => (id, json!({"command": command, "workdir": cwd}).to_string()),
        ThreadItem::FileChange { id, changes, .. } => (id, json!({"changes": changes}).to_string()),
        ThreadItem::McpToolCall { id, arguments, .. }
        | ThreadItem::DynamicToolCall { id, arguments, .. } => (id, arguments_text(arguments)),
        ThreadItem::Handoff { id, call_id, .. } => (call_id.as_ref().unwrap_or(id), "{}".into()),
        ThreadItem::Plan { id, text } => (id, json!({"plan": text}).to_string()),
        ThreadItem::FunctionCall {
            call_id, arguments, ..
        } => (call_id, arguments.clone()),
        // Not tool items: an empty call keyed by the item id.
        ThreadItem::UserMessage { id, .. }
        | ThreadItem::AgentMessage { id, .. }
        | ThreadItem::Reasoning { id, .. }
        | ThreadItem::WebSearch { id, .. }
        | ThreadItem::ImageView { id, .. }
        | ThreadItem::EnteredReviewMode { id, .. }
        | ThreadItem::ExitedReviewMode { id, .. }
        | ThreadItem::ContextCompaction { id, .. }
        | ThreadItem::Component { id, .. }
        | ThreadItem::Container { id, .. }
        | ThreadItem::Status { id, .. }
        | ThreadItem::StateChange { id, .. }
        | ThreadItem::ResourceChange { id, .. }
        | ThreadItem::StepError { id, .. }
        | ThreadItem::Error { id, .. }
        | ThreadItem::Context { id, .. } => (id, "{}".into()),
    };
    RecordedCall {
        call_id: call_id.clone(),
        name: None,
        arguments: Some(arguments),
        freeform_input: None,
    }
}

/// The function name a tool item goes by when no provider call names it.
fn synthesized_name(item: &ThreadItem) -> String {
    match item {
        ThreadItem::CommandExecution { .. } => "shell".into(),
        ThreadItem::FileChange { .. } => "apply_patch".into(),
        ThreadItem::McpToolCall { server, tool, .. } => format!("mcp__{server}__{tool}"),
        ThreadItem::DynamicToolCall { tool, .. } => tool.clone(),
        ThreadItem::FunctionCall { name, .. } => name.clone(),
        ThreadItem::Handoff { to_agent, .. } => format!("transfer_to_{}", function_style(to_agent)),
        ThreadItem::Plan { .. } => "update_plan".into(),
        ThreadItem::UserMessage { .. }
        | ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::WebSearch { .. }
        | ThreadItem::ImageView { .. }
        | ThreadItem::EnteredReviewMode { .. }
        | ThreadItem::ExitedReviewMode { .. }
        | ThreadItem::ContextCompaction { .. }
        | ThreadItem::Component { .. }
        | ThreadItem::Container { .. }
        | ThreadItem::Status { .. }
        | ThreadItem::StateChange { .. }
        | ThreadItem::ResourceChange { .. }
        | ThreadItem::StepError { .. }
        | ThreadItem::Error { .. }
        | ThreadItem::Context { .. } => item.kind().as_str().into(),
    }
}

/// Arguments as JSON text: a string is taken to be the text already.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => "{}".into(),
        other => other.to_string(),
    }
}

/// An agent name as a function name (`Billing Agent` → `billing_agent`),
/// as handoff tools are named: function names allow `[a-zA-Z0-9_-]` only.
fn function_style(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Where the runtime keeps a viewed image (a `data:` URL) in the item's
/// `providerData`, next to the call that asked for it: this crate does no
/// I/O, so the image is read when the tool runs, not when a view is built.
pub const IMAGE_URL_KEY: &str = "imageUrl";

/// An `imageView`: the call that asked for it and its output (when the
/// model asked), then the image itself as user input, which is how the
/// model API takes images.
pub(super) fn image_view(record: &ItemRecord, path: &str, out: &mut Vec<ResponseItem>) {
    if record.envelope.status == ItemStatus::InProgress {
        return;
    }
    let data = record.envelope.provider_data.as_deref();
    let image_url = data
        .and_then(|d| d.get(IMAGE_URL_KEY))
        .and_then(Value::as_str);
    if let Some(call) = provider::recorded_call(data) {
        let output = match image_url {
            Some(_) => format!("Attached the image {path}."),
            None => format!("The image {path} could not be attached."),
        };
        out.push(ResponseItem::Known(KnownResponseItem::FunctionCall {
            id: None,
            call_id: call.call_id.clone(),
            name: call.name.unwrap_or_else(|| "view_image".to_owned()),
            arguments: call.arguments.unwrap_or_else(|| "{}".to_owned()),
            status: None,
        }));
        out.push(ResponseItem::Known(KnownResponseItem::FunctionCallOutput {
            call_id: call.call_id,
            output,
        }));
    }
    if let Some(url) = image_url {
        out.push(ResponseItem::Known(KnownResponseItem::Message {
            id: None,
            role: "user".to_owned(),
            content: vec![
                spool_protocol::responses::ContentItem::InputText {
                    text: format!("Image {path}:"),
                },
                spool_protocol::responses::ContentItem::InputImage {
                    image_url: Some(url.to_owned()),
                    file_id: None,
                    detail: None,
                },
            ],
            status: None,
        }));
    }
}
