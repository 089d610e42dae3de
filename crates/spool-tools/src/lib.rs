//! The tools an agent can call: shell commands, file patches, in-process
//! function tools, MCP tools (the interface to them), and the approval
//! rules that decide which calls need a person. Each tool is a library
//! with no knowledge of the store or the turn loop; the runtime turns
//! what they report into items.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod apply_patch;
pub mod function;
pub mod mcp;
pub mod policy;
pub mod review;
pub mod sandbox;
pub mod shell;
