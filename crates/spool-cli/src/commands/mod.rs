pub mod approve;
pub mod mcp;
pub mod run;
pub mod sandbox_exec;
pub mod serve;
pub mod threads;
