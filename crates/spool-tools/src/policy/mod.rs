//! Approval policy: which tool calls run, which need a person, which are
//! refused.
//!
//! Two enforcements ([`Enforcement`]):
//!
//! - **Kernel** (the `spool` binary on Linux): every command runs confined
//!   by the kernel (see [`crate::sandbox`]), so commands inside the sandbox
//!   run unasked (`untrusted` still asks for what is not known-safe), and
//!   only *leaving* it — an escalation request, a working directory outside
//!   the workspace — asks (refused under `never`, run outside when granted).
//!   Re-running a command the sandbox denied is the runtime's to ask.
//! - **Classify** (the operator's explicit fallback without Landlock, and a
//!   library agent with no sandbox helper): a command is inside the sandbox
//!   only when it is known-safe and runs in the workspace; `never` refuses
//!   the rest, the other policies ask.
//!
//! A call is *granted* by an allow rule whose argv prefix matches, a session
//! approval of the exact same argv, or (patches) session-approved roots that
//! cover every path. A matching deny rule refuses the call under any policy.
//! Patches are judged the same way under both: inside the sandbox when every
//! path, symlinks resolved, is beneath the workspace and not in `.git` or the
//! workspace's `spool.toml` (`read-only`: never; `danger-full-access`:
//! always); `untrusted` asks for every patch. Network access: deny rule
//! refuses, allow rule or session approval runs, `danger-full-access` runs,
//! otherwise ask (refuse under `never`).
//!
//! Deciding is a function of its inputs ([`decide_with`]; patches resolve
//! symlinks on disk); recording a person's answer is
//! [`ApprovalDecision::apply_to`]; persistent rules live in a reviewable text
//! file ([`RulesFile`]).

mod decide;
mod decision;
mod grants;
mod modes;
mod rules_file;

pub use decide::{Enforcement, ToolRequest, Verdict, decide, decide_with, leaves_sandbox};
pub use decision::{ApprovalDecision, DecisionEffect, NetworkPolicyAmendment};
pub use grants::{
    ExecRule, ExecRules, Grants, NetworkRule, NetworkRules, Rule, RuleDecision, SessionApprovals,
};
pub use modes::{ApprovalPolicy, ParseModeError, SandboxMode};
pub use rules_file::{RulesFile, RulesFileError, format_rule};
