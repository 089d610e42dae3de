pub mod approve;
pub mod bench;
pub mod run;
pub mod serve;
pub mod threads;
