//! What lets a call run without asking (or stops it outright): approvals a
//! person gave during this session, and the operator's persistent rules.
//!
//! Session approvals are exact on purpose: approving `cargo test` for the
//! session does not approve `cargo test; rm -rf ~`. Wider approvals are the
//! job of prefix rules, which a person writes (or accepts) knowingly and which
//! land in a file the operator can review.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Allow or deny, for both kinds of rule (and for network amendments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDecision {
    Allow,
    Deny,
}

impl RuleDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleDecision::Allow => "allow",
            RuleDecision::Deny => "deny",
        }
    }
}

/// A rule on commands whose argv starts with `pattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRule {
    /// Argv prefix, matched word by word. Never empty (an empty prefix would
    /// match every command; the parser refuses it and it matches nothing).
    pub pattern: Vec<String>,
    pub decision: RuleDecision,
    /// `Some(id)`: applies only in that thread. `None`: in every thread.
    pub thread: Option<String>,
    /// Free text kept in the file's trailing comment (who/when/why).
    pub note: Option<String>,
}

/// A rule on connections to one host (exact, case-insensitive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRule {
    pub host: String,
    pub decision: RuleDecision,
    pub thread: Option<String>,
    pub note: Option<String>,
}

/// One line of the rules file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Exec(ExecRule),
    Network(NetworkRule),
}

impl ExecRule {
    pub fn new(pattern: Vec<String>, decision: RuleDecision) -> Self {
        Self {
            pattern,
            decision,
            thread: None,
            note: None,
        }
    }

    pub fn for_thread(mut self, thread: impl Into<String>) -> Self {
        self.thread = Some(thread.into());
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    pub fn matches(&self, argv: &[String]) -> bool {
        !self.pattern.is_empty() && argv.starts_with(&self.pattern)
    }
}

impl NetworkRule {
    pub fn new(host: impl Into<String>, decision: RuleDecision) -> Self {
        Self {
            host: host.into(),
            decision,
            thread: None,
            note: None,
        }
    }

    pub fn for_thread(mut self, thread: impl Into<String>) -> Self {
        self.thread = Some(thread.into());
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    pub fn matches(&self, host: &str) -> bool {
        let own = normalize_host(&self.host);
        !own.is_empty() && own == normalize_host(host)
    }
}

/// A thread-scoped rule applies in its thread only; an unscoped one everywhere.
fn applies(rule_thread: Option<&str>, thread: Option<&str>) -> bool {
    rule_thread.is_none() || rule_thread == thread
}

/// Hosts compare without case and without a trailing root dot.
fn normalize_host(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// Command rules. A matching deny beats any matching allow, so adding an
/// allow can never unblock something the operator denied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRules {
    rules: Vec<ExecRule>,
}

impl ExecRules {
    pub fn add(&mut self, rule: ExecRule) {
        self.rules.push(rule);
    }

    pub fn rules(&self) -> &[ExecRule] {
        &self.rules
    }

    /// The rule that decides `argv` in `thread`, if any (deny first).
    pub fn evaluate(&self, argv: &[String], thread: Option<&str>) -> Option<&ExecRule> {
        let mut matching = self
            .rules
            .iter()
            .filter(|r| applies(r.thread.as_deref(), thread) && r.matches(argv));
        let first = matching.next()?;
        if first.decision == RuleDecision::Deny {
            return Some(first);
        }
        Some(
            matching
                .find(|r| r.decision == RuleDecision::Deny)
                .unwrap_or(first),
        )
    }
}

/// Host rules, with the same deny-wins order as [`ExecRules`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkRules {
    rules: Vec<NetworkRule>,
}

impl NetworkRules {
    pub fn add(&mut self, rule: NetworkRule) {
        self.rules.push(rule);
    }

    pub fn rules(&self) -> &[NetworkRule] {
        &self.rules
    }

    pub fn evaluate(&self, host: &str, thread: Option<&str>) -> Option<&NetworkRule> {
        let mut matching = self
            .rules
            .iter()
            .filter(|r| applies(r.thread.as_deref(), thread) && r.matches(host));
        let first = matching.next()?;
        if first.decision == RuleDecision::Deny {
            return Some(first);
        }
        Some(
            matching
                .find(|r| r.decision == RuleDecision::Deny)
                .unwrap_or(first),
        )
    }
}

/// Approvals given with `acceptForSession`; they live as long as the
/// session (not persisted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionApprovals {
    commands: HashSet<Vec<String>>,
    roots: Vec<PathBuf>,
    hosts: HashSet<String>,
    /// MCP tools, as (server, tool).
    mcp_tools: HashSet<(String, String)>,
}

impl SessionApprovals {
    pub fn approve_command(&mut self, argv: Vec<String>) {
        self.commands.insert(argv);
    }

    pub fn is_command_approved(&self, argv: &[String]) -> bool {
        self.commands.contains(argv)
    }

    /// Approves writes under `root`. A relative root is kept but matches
    /// nothing: there is no base to resolve it against here.
    pub fn approve_root(&mut self, root: impl Into<PathBuf>) {
        self.roots.push(root.into());
    }

    /// True when every path lies under some approved root.
    pub fn covers_paths(&self, paths: &[PathBuf]) -> bool {
        paths
            .iter()
            .all(|p| self.roots.iter().any(|root| path_within(p, root)))
    }

    pub fn approve_host(&mut self, host: &str) {
        self.hosts.insert(normalize_host(host));
    }

    pub fn is_host_approved(&self, host: &str) -> bool {
        self.hosts.contains(&normalize_host(host))
    }

    pub fn approve_mcp_tool(&mut self, server: &str, tool: &str) {
        self.mcp_tools.insert((server.to_owned(), tool.to_owned()));
    }

    pub fn is_mcp_tool_approved(&self, server: &str, tool: &str) -> bool {
        self.mcp_tools
            .contains(&(server.to_owned(), tool.to_owned()))
    }
}

/// Everything [`decide`](super::decide) consults besides the policy itself,
/// for one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// The thread these grants serve; selects thread-scoped rules.
    pub thread: Option<String>,
    pub session: SessionApprovals,
    pub exec_rules: ExecRules,
    pub network_rules: NetworkRules,
}

impl Grants {
    /// Empty grants with no thread: only unscoped rules will apply.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn for_thread(thread: impl Into<String>) -> Self {
        Self {
            thread: Some(thread.into()),
            ..Self::default()
        }
    }

    pub fn approve_command_for_session(&mut self, argv: impl Into<Vec<String>>) {
        self.session.approve_command(argv.into());
    }

    pub fn approve_root_for_session(&mut self, root: impl Into<PathBuf>) {
        self.session.approve_root(root);
    }

    pub fn approve_host_for_session(&mut self, host: &str) {
        self.session.approve_host(host);
    }

    pub fn add_exec_rule(&mut self, rule: ExecRule) {
        self.exec_rules.add(rule);
    }

    pub fn add_network_rule(&mut self, rule: NetworkRule) {
        self.network_rules.add(rule);
    }

    pub fn add_rule(&mut self, rule: Rule) {
        match rule {
            Rule::Exec(r) => self.add_exec_rule(r),
            Rule::Network(r) => self.add_network_rule(r),
        }
    }

    /// Adds every rule (all threads' too: scoping is checked when matching,
    /// against [`Grants::thread`]).
    pub fn add_rules(&mut self, rules: impl IntoIterator<Item = Rule>) {
        rules.into_iter().for_each(|r| self.add_rule(r));
    }

    pub(super) fn exec_rule_for(&self, argv: &[String]) -> Option<&ExecRule> {
        self.exec_rules.evaluate(argv, self.thread.as_deref())
    }

    /// The rule that decides network access to `host`, if any.
    pub fn network_rule_for(&self, host: &str) -> Option<&NetworkRule> {
        self.network_rules.evaluate(host, self.thread.as_deref())
    }
}

/// Whether `path` lies at or under `root`, compared lexically after removing
/// `.` and resolving `..`. Relative paths are never within anything: the
/// caller promised absolute, resolved paths, and guessing a base would turn a
/// bug into a permission. Symlinks are the caller's to resolve.
pub(super) fn path_within(path: &Path, root: &Path) -> bool {
    match (normalize(path), normalize(root)) {
        (Some(path), Some(root)) => path.starts_with(root),
        _ => false,
    }
}

fn normalize(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component);
            }
            Component::CurDir => {}
            // At the root, `..` stays at the root (as the OS does).
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::path_within;
    use std::path::Path;

    #[test]
    fn within_is_lexical_and_component_wise() {
        let root = Path::new("/work/repo");
        assert!(path_within(Path::new("/work/repo/src/a.rs"), root));
        assert!(path_within(Path::new("/work/repo"), root));
        assert!(!path_within(Path::new("/work/repo2/a.rs"), root));
        assert!(!path_within(Path::new("/work/repo/../etc/passwd"), root));
        assert!(path_within(Path::new("/work/repo/./src/../b"), root));
        assert!(!path_within(Path::new("src/a.rs"), root));
        assert!(!path_within(Path::new("/../../etc"), root));
    }
}
