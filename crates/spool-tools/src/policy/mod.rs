//! Approval policy: which tool calls run, which need a person, which are
//! refused.
//!
//! spool has no OS-level sandbox. The sandbox mode is enforced by
//! classifying each call before it runs: a call is *within the sandbox* when
//!
//! | sandbox              | shell command  | patch                                  |
//! |----------------------|----------------|----------------------------------------|
//! | `read-only`          | known-safe     | never                                  |
//! | `workspace-write`    | known-safe     | every path inside the workspace root   |
//! | `danger-full-access` | always         | always                                 |
//!
//! A call is *granted* by an allow rule whose argv prefix matches, a session
//! approval of the exact same argv, or (patches) session-approved roots that
//! cover every path. A matching deny rule refuses the call under any policy.
//! Then:
//!
//! | policy                     | runs without asking                                   | otherwise |
//! |----------------------------|-------------------------------------------------------|-----------|
//! | `never`                    | within the sandbox, or granted                        | refuse    |
//! | `untrusted`                | known-safe commands, or granted                       | ask       |
//! | `on-request`, `on-failure` | within the sandbox (unless escalating), or granted    | ask       |
//!
//! Under `untrusted` every patch asks unless granted. An escalation request
//! (the model asking to run outside the sandbox) asks under `on-request` and
//! `on-failure` unless the command is granted or the mode is
//! `danger-full-access` (there is no sandbox to leave). Network access: deny
//! rule refuses, allow rule or session approval runs, `danger-full-access`
//! runs, otherwise ask (refuse under `never`).
//!
//! **`on-failure` behaves like `on-request`.** In Codex, `on-failure` runs a
//! command inside the OS sandbox first and asks to re-run it unsandboxed
//! only if it fails. Without an OS sandbox there is no confined first
//! attempt: running an unclassified command "to see if it fails" would run it
//! with full access, which is exactly what the approval exists to prevent.
//! And a failure could never be attributed to the sandbox, so re-asking after
//! one would only prompt for every failing build. So spool asks up front for
//! what is outside the sandbox, and a failed command never re-asks.
//!
//! Deciding is a pure function ([`decide`]); recording a person's answer is
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
