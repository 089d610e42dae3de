//! `spool sandbox-exec`: the sandbox helper. spool runs every sandboxed
//! command as `spool sandbox-exec POLICY -- ARGV`; this process confines
//! itself while it is still single-threaded, then becomes the command
//! (`exec`), which inherits the confinement and cannot lift it.

use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use spool_tools::sandbox::{self, SandboxPolicy};

use crate::cli::SandboxExecArgs;

pub fn run(args: SandboxExecArgs) -> ExitCode {
    let policy = SandboxPolicy {
        writable: args.writable,
        protected: args.protect,
        network: args.network,
    };
    if let Err(error) = sandbox::enter(&policy) {
        eprintln!("{}: {error}", sandbox::SETUP_FAILED);
        return ExitCode::from(sandbox::SETUP_FAILED_CODE);
    }
    let Some((program, rest)) = args.argv.split_first() else {
        eprintln!("{}: no command to run", sandbox::SETUP_FAILED);
        return ExitCode::from(sandbox::SETUP_FAILED_CODE);
    };
    // Only returns on failure.
    let error = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "spool sandbox-exec: cannot run {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}
