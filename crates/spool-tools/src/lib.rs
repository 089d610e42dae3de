//! The tools an agent can call: shell commands, file patches, in-process
//! function tools, and the approval rules that decide which calls need a
//! person. Each tool is a library with no knowledge of the store or the
//! turn loop; the runtime turns what they report into items.

pub mod apply_patch;
pub mod function;
pub mod policy;
pub mod review;
pub mod sandbox;
pub mod shell;
