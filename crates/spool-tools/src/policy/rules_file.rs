//! The rules file: command and network rules in one text file, one rule per
//! line, meant to be read (and edited) by the operator.
//!
//! ```text
//! # blank lines and lines starting with '#' are ignored
//! prefix_rule(pattern=["cargo", "test"], decision="allow")  # thread 0196…, 2026-11-21T10:00:00Z
//! prefix_rule(pattern=["git", "push"], decision="allow", thread="0196abcd")
//! network_rule(host="pypi.org", decision="deny")
//! ```
//!
//! Values are JSON literals (strings, or an array of strings for `pattern`),
//! so any argv round-trips exactly. `thread` scopes a rule to one thread; the
//! trailing comment is only a note. The file is append-only from spool's
//! side: appending never rewrites what the operator wrote, and a bad line is
//! reported with its place instead of being skipped, because silently
//! dropping a deny rule would be worse than refusing to start.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::grants::{ExecRule, NetworkRule, Rule, RuleDecision};

#[derive(Debug, thiserror::Error)]
pub enum RulesFileError {
    #[error("cannot read rules file {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write rules file {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("{}:{line}: {message}: {content}", path.display())]
    Malformed {
        path: PathBuf,
        /// 1-based.
        line: usize,
        content: String,
        message: String,
    },
    #[error("refusing to write an invalid rule: {0}")]
    InvalidRule(String),
}

/// The rules read from one file, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesFile {
    pub rules: Vec<Rule>,
}

impl RulesFile {
    /// Reads and parses `path`. A missing file is an empty rule set (no rules
    /// written yet); any other problem is an error.
    pub fn load(path: &Path) -> Result<Self, RulesFileError> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(RulesFileError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Parses rules text; `path` only labels errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, RulesFileError> {
        let mut rules = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let rule = parse_line(trimmed).map_err(|message| RulesFileError::Malformed {
                path: path.to_owned(),
                line: index + 1,
                content: line.to_owned(),
                message,
            })?;
            rules.push(rule);
        }
        Ok(Self { rules })
    }

    /// Appends one rule as a new line, creating the file and its parent
    /// directories if needed, and syncs it to disk before returning: an
    /// approval the person was told is remembered must survive a crash.
    pub fn append(path: &Path, rule: &Rule) -> Result<(), RulesFileError> {
        validate(rule)?;
        let write_err = |source| RulesFileError::Write {
            path: path.to_owned(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(write_err)?;
        }
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(write_err)?;
        let mut line = format_rule(rule);
        line.push('\n');
        // An operator's last line without a newline must not be glued to ours.
        if file.metadata().map_err(write_err)?.len() > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::End(-1)).map_err(write_err)?;
            file.read_exact(&mut last).map_err(write_err)?;
            if last[0] != b'\n' {
                line.insert(0, '\n');
            }
        }
        file.write_all(line.as_bytes()).map_err(write_err)?;
        file.sync_all().map_err(write_err)?;
        // A new file's directory entry is durable only once the directory is.
        #[cfg(unix)]
        if !existed && let Some(parent) = path.parent() {
            let dir = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(write_err)?;
        }
        #[cfg(not(unix))]
        let _ = existed;
        Ok(())
    }
}

/// One rule as a line (without the newline). Values are JSON-encoded, so a
/// line never contains a raw newline; the note has newlines flattened.
pub fn format_rule(rule: &Rule) -> String {
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    let (mut text, thread, note) = match rule {
        Rule::Exec(r) => (
            format!(
                "prefix_rule(pattern={}, decision={}",
                Value::from(r.pattern.clone()),
                quote(r.decision.as_str())
            ),
            &r.thread,
            &r.note,
        ),
        Rule::Network(r) => (
            format!(
                "network_rule(host={}, decision={}",
                quote(&r.host),
                quote(r.decision.as_str())
            ),
            &r.thread,
            &r.note,
        ),
    };
    if let Some(thread) = thread {
        text.push_str(&format!(", thread={}", quote(thread)));
    }
    text.push(')');
    if let Some(note) = note {
        let flat: String = note
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        text.push_str("  # ");
        text.push_str(flat.trim());
    }
    text
}

/// What `append` would write must parse back to the same rule.
fn validate(rule: &Rule) -> Result<(), RulesFileError> {
    let problem = match rule {
        Rule::Exec(r) if r.pattern.is_empty() => Some("empty command pattern"),
        Rule::Network(r) if r.host.trim().is_empty() => Some("empty host"),
        _ => None,
    };
    match problem {
        Some(p) => Err(RulesFileError::InvalidRule(p.to_owned())),
        None => Ok(()),
    }
}

/// Parses one non-blank, non-comment line. `Err` is the message only; the
/// caller adds file, line and content.
fn parse_line(line: &str) -> Result<Rule, String> {
    let open = line
        .find('(')
        .ok_or("expected prefix_rule(...) or network_rule(...)")?;
    let kind = line[..open].trim();
    if kind != "prefix_rule" && kind != "network_rule" {
        return Err(format!(
            "unknown rule {kind:?}; expected prefix_rule or network_rule"
        ));
    }

    let mut rest = &line[open + 1..];
    let mut args: Vec<(String, Value)> = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with('#') {
            return Err("missing ')'".to_owned());
        }
        if let Some(after) = rest.strip_prefix(')') {
            rest = after;
            break;
        }
        if !args.is_empty() {
            rest = rest
                .strip_prefix(',')
                .ok_or("expected ',' or ')' after a value")?
                .trim_start();
            // Allow a trailing comma before ')'.
            if let Some(after) = rest.strip_prefix(')') {
                rest = after;
                break;
            }
        }
        let eq = rest.find('=').ok_or("expected key=value")?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad key {key:?}"));
        }
        if args.iter().any(|(k, _)| k == key) {
            return Err(format!("{key} given twice"));
        }
        let (value, used) = parse_json_value(rest[eq + 1..].trim_start())
            .map_err(|e| format!("bad value for {key}: {e}"))?;
        let after_value = rest[eq + 1..].trim_start();
        rest = &after_value[used..];
        args.push((key.to_owned(), value));
    }
    let rest = rest.trim_start();
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err("unexpected text after ')'; comments start with '#'".to_owned());
    }
    let note = rest
        .strip_prefix('#')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);

    let mut fields = Fields(args);
    let decision = match fields.string("decision")?.as_str() {
        "allow" => RuleDecision::Allow,
        "deny" => RuleDecision::Deny,
        other => {
            return Err(format!(
                "decision must be \"allow\" or \"deny\", not {other:?}"
            ));
        }
    };
    let thread = fields.optional_string("thread")?;
    let rule = if kind == "prefix_rule" {
        let pattern = fields.string_list("pattern")?;
        if pattern.is_empty() {
            return Err("pattern must not be empty (it would match every command)".to_owned());
        }
        Rule::Exec(ExecRule {
            pattern,
            decision,
            thread,
            note,
        })
    } else {
        let host = fields.string("host")?;
        if host.trim().is_empty() {
            return Err("host must not be empty".to_owned());
        }
        Rule::Network(NetworkRule {
            host,
            decision,
            thread,
            note,
        })
    };
    fields.finish()?;
    Ok(rule)
}

/// Reads one JSON value at the start of `text`; returns it and the bytes used.
/// Only strings and lists are accepted: both are self-delimiting, so the
/// value ends where the JSON ends and a following ',' or ')' is left alone.
fn parse_json_value(text: &str) -> Result<(Value, usize), String> {
    if !text.starts_with(['"', '[']) {
        return Err("expected a \"string\" or a [list]".to_owned());
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value)) => Ok((value, stream.byte_offset())),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("missing".to_owned()),
    }
}

/// The key=value pairs of one rule, taken out one by one so that whatever
/// is left at the end is an unknown key.
struct Fields(Vec<(String, Value)>);

impl Fields {
    fn take(&mut self, key: &str) -> Option<Value> {
        let index = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(index).1)
    }

    fn string(&mut self, key: &str) -> Result<String, String> {
        self.optional_string(key)?
            .ok_or_else(|| format!("missing {key}"))
    }

    fn optional_string(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("{key} must be a string")),
        }
    }

    fn string_list(&mut self, key: &str) -> Result<Vec<String>, String> {
        let value = self.take(key).ok_or_else(|| format!("missing {key}"))?;
        serde_json::from_value(value).map_err(|_| format!("{key} must be a list of strings"))
    }

    fn finish(self) -> Result<(), String> {
        match self.0.first() {
            Some((key, _)) => Err(format!("unknown key {key}")),
            None => Ok(()),
        }
    }
}
