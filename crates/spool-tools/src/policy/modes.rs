//! The two per-thread (or per-turn) settings. They are wire types, so they
//! live in `spool-protocol` (spelled as Codex app-server v2 spells them);
//! the policy code calls the approval policy by its plain name.

pub use spool_protocol::{AskForApproval as ApprovalPolicy, ParseModeError, SandboxMode};
