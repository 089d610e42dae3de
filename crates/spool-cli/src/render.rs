//! Human-readable lines for items and model input, for `threads show`.

use spool_core::ItemRecord;
use spool_protocol::responses::{ContentItem, KnownResponseItem, ResponseItem};
use spool_protocol::{ItemStatus, PatchChangeKind, ThreadItem, UserInput};

/// One block of text per item: a `[kind]` label and its content.
pub fn item(record: &ItemRecord) -> String {
    let status = match record.envelope.status {
        ItemStatus::Completed => String::new(),
        other => format!(" ({})", other.as_str()),
    };
    let (label, body) = match &record.item {
        ThreadItem::UserMessage { content, .. } => ("user", user_text(content)),
        ThreadItem::AgentMessage { text, .. } => ("assistant", text.clone()),
        ThreadItem::Reasoning {
            summary, content, ..
        } => (
            "reasoning",
            if summary.is_empty() {
                content.join("\n")
            } else {
                summary.join("\n")
            },
        ),
        ThreadItem::Plan { text, .. } => ("plan", text.clone()),
        ThreadItem::CommandExecution { .. } | ThreadItem::FileChange { .. } => {
            let label = match &record.item {
                ThreadItem::CommandExecution { .. } => "command",
                _ => "fileChange",
            };
            (label, tool_summary(&record.item))
        }
        ThreadItem::McpToolCall {
            server,
            tool,
            arguments,
            ..
        } => ("mcpToolCall", format!("{server}/{tool} {arguments}")),
        ThreadItem::DynamicToolCall {
            tool, arguments, ..
        } => ("dynamicToolCall", format!("{tool} {arguments}")),
        ThreadItem::WebSearch { query, .. } => ("webSearch", query.clone()),
        ThreadItem::ImageView { path, .. } => ("imageView", path.clone()),
        ThreadItem::EnteredReviewMode { review, .. } => ("enteredReviewMode", review.clone()),
        ThreadItem::ExitedReviewMode { review, .. } => ("exitedReviewMode", review.clone()),
        ThreadItem::ContextCompaction { summary, .. } => {
            ("contextCompaction", summary.clone().unwrap_or_default())
        }
        ThreadItem::FunctionCall {
            name,
            arguments,
            output,
            ..
        } => (
            "functionCall",
            format!("{name}({arguments}) → {}", output.as_deref().unwrap_or("…")),
        ),
        ThreadItem::Handoff {
            from_agent,
            to_agent,
            ..
        } => ("handoff", format!("{from_agent} → {to_agent}")),
        ThreadItem::Component { name, props, .. } => ("component", format!("{name} {props}")),
        ThreadItem::Container { children, .. } => ("container", children.join(", ")),
        ThreadItem::Status { text, .. } => ("status", text.clone()),
        ThreadItem::StateChange { key, value, .. } => ("stateChange", format!("{key} = {value}")),
        ThreadItem::ResourceChange { uri, change, .. } => {
            ("resourceChange", format!("{change} {uri}"))
        }
        ThreadItem::StepError { message, .. } => ("stepError", message.clone()),
        ThreadItem::Error { message, .. } => ("error", message.clone()),
        ThreadItem::Context { text, .. } => ("context", text.clone()),
    };
    format!("[{label}{status}] {body}")
}

fn user_text(content: &[UserInput]) -> String {
    content
        .iter()
        .map(|c| match c {
            UserInput::Text { text, .. } => text.clone(),
            UserInput::Image { url, file_id, .. } => format!(
                "<image {}>",
                url.as_deref().or(file_id.as_deref()).unwrap_or("?")
            ),
            UserInput::LocalImage { path, .. } => format!("<image {path}>"),
            UserInput::Audio { url } => format!("<audio {url}>"),
            UserInput::LocalAudio { path } => format!("<audio {path}>"),
            UserInput::Skill { name, .. } => format!("<skill {name}>"),
            UserInput::Mention { name, .. } => format!("<mention {name}>"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One line per model input item.
pub fn input_item(item: &ResponseItem) -> String {
    match item {
        ResponseItem::Known(KnownResponseItem::Message { role, content, .. }) => {
            let text: Vec<String> = content
                .iter()
                .map(|c| match c {
                    ContentItem::InputText { text } | ContentItem::OutputText { text, .. } => {
                        text.clone()
                    }
                    ContentItem::InputImage {
                        image_url, file_id, ..
                    } => format!(
                        "<image {}>",
                        image_url.as_deref().or(file_id.as_deref()).unwrap_or("?")
                    ),
                    ContentItem::InputAudio { audio_url } => {
                        format!("<audio {}>", audio_url.as_deref().unwrap_or("?"))
                    }
                    ContentItem::Refusal { refusal } => format!("<refusal {refusal}>"),
                })
                .collect();
            format!("[{role}] {}", text.join(" "))
        }
        ResponseItem::Known(KnownResponseItem::Reasoning { summary, .. }) => {
            format!("[reasoning] {} summary part(s)", summary.len())
        }
        ResponseItem::Known(KnownResponseItem::FunctionCall {
            name,
            arguments,
            call_id,
            ..
        }) => format!("[function_call {call_id}] {name}({arguments})"),
        ResponseItem::Known(KnownResponseItem::FunctionCallOutput { call_id, output }) => {
            format!("[function_call_output {call_id}] {output}")
        }
        ResponseItem::Known(KnownResponseItem::WebSearchCall { .. }) => "[web_search_call]".into(),
        ResponseItem::Other(v) => format!("[other] {v}"),
    }
}

/// How many lines of a command's output a summary shows.
const OUTPUT_TAIL_LINES: usize = 12;

/// A tool item in a few lines: a command with its exit code and the tail
/// of its output; a patch as one line per file with its added and removed
/// line counts.
pub fn tool_summary(item: &ThreadItem) -> String {
    match item {
        ThreadItem::CommandExecution {
            command,
            exit_code,
            aggregated_output,
            status,
            ..
        } => {
            let end = match (exit_code, status) {
                (Some(code), _) => format!("exit {code}"),
                (None, status) => format!("{status:?}").to_lowercase(),
            };
            let output = aggregated_output.as_deref().unwrap_or("");
            let lines: Vec<&str> = output.lines().collect();
            let skipped = lines.len().saturating_sub(OUTPUT_TAIL_LINES);
            let mut text = format!("$ {command}  ({end})");
            if skipped > 0 {
                text.push_str(&format!("\n  … {skipped} earlier lines"));
            }
            for line in &lines[skipped..] {
                text.push_str("\n  ");
                text.push_str(line);
            }
            text
        }
        ThreadItem::FileChange {
            changes, status, ..
        } => {
            let mut text = format!("patch ({})", format!("{status:?}").to_lowercase());
            for change in changes {
                let (added, removed) = diff_counts(&change.diff);
                let mark = match &change.kind {
                    PatchChangeKind::Add => "A".to_owned(),
                    PatchChangeKind::Delete => "D".to_owned(),
                    PatchChangeKind::Update { move_path: None } => "M".to_owned(),
                    PatchChangeKind::Update {
                        move_path: Some(to),
                    } => format!("R → {to}"),
                };
                text.push_str(&format!("\n  {mark} {} (+{added} -{removed})", change.path));
            }
            text
        }
        ThreadItem::FunctionCall {
            name,
            status,
            output,
            ..
        } => format!(
            "{name} ({}) {}",
            format!("{status:?}").to_lowercase(),
            output.as_deref().unwrap_or("")
        ),
        ThreadItem::Plan { text, .. } => format!("plan\n{text}"),
        other => format!("{:?}", other.kind()),
    }
}

/// Lines added and removed in a unified diff (headers not counted).
fn diff_counts(diff: &str) -> (usize, usize) {
    diff.lines().fold((0, 0), |(added, removed), line| {
        if line.starts_with("+++") || line.starts_with("---") {
            (added, removed)
        } else if line.starts_with('+') {
            (added + 1, removed)
        } else if line.starts_with('-') {
            (added, removed + 1)
        } else {
            (added, removed)
        }
    })
}
