pub mod run;
pub mod threads;
