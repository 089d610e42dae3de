pub mod approve;
pub mod run;
pub mod sandbox_exec;
pub mod serve;
pub mod threads;
