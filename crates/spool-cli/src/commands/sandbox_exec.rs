//! `spool sandbox-exec`: the command helper. spool runs every command as
//! `spool sandbox-exec POLICY -- ARGV` (or `--unconfined -- ARGV` when a
//! person let it out of the sandbox). The helper
//!
//! 1. confines itself while it is still single-threaded (unless
//!    unconfined); what it starts inherits the confinement and cannot lift
//!    it;
//! 2. asks the kernel for SIGTERM when the process that started it dies
//!    (`PR_SET_PDEATHSIG`), and checks that it has not died already;
//! 3. runs the command as its child, in its own process group (spool made
//!    the helper a group leader), and waits for it. On SIGTERM — the
//!    server is gone, however it died, `kill -9` included — it kills the
//!    whole group with SIGKILL, the command's background children too. So
//!    no command outlives the server that started it, and crash recovery's
//!    "stopped before it finished; not run again" stays true.
//!
//! Its exit status is the command's (128 + N when a signal N ended it).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitCode;

use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::{Pid, getpgrp, getppid};
use spool_tools::sandbox::{self, SandboxPolicy};

use crate::cli::SandboxExecArgs;

pub fn run(args: SandboxExecArgs) -> ExitCode {
    let parent = getppid();
    if !args.unconfined {
        let policy = SandboxPolicy {
            writable: args.writable,
            protected: args.protect,
            network: args.network,
        };
        if let Err(error) = sandbox::enter(&policy) {
            eprintln!("{}: {error}", sandbox::SETUP_FAILED);
            return ExitCode::from(sandbox::SETUP_FAILED_CODE);
        }
    }
    let Some((program, rest)) = args.argv.split_first() else {
        eprintln!("{}: no command to run", sandbox::SETUP_FAILED);
        return ExitCode::from(sandbox::SETUP_FAILED_CODE);
    };
    // SIGTERM and SIGCHLD are taken with sigwait below; blocked first so
    // none is lost in between. The child starts with an empty mask (std
    // resets it before exec).
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGCHLD);
    if let Err(error) = signals.thread_block() {
        eprintln!("{}: cannot block signals: {error}", sandbox::SETUP_FAILED);
        return ExitCode::from(sandbox::SETUP_FAILED_CODE);
    }
    if let Err(error) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        eprintln!(
            "{}: cannot ask for the parent's death: {error}",
            sandbox::SETUP_FAILED
        );
        return ExitCode::from(sandbox::SETUP_FAILED_CODE);
    }
    if getppid() != parent {
        // The server died before the request above took effect.
        return ExitCode::from(sandbox::SETUP_FAILED_CODE);
    }
    let mut child = match std::process::Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "spool sandbox-exec: cannot run {}: {error}",
                program.to_string_lossy()
            );
            let code = match error.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            return ExitCode::from(code);
        }
    };
    loop {
        match signals.wait() {
            Ok(Signal::SIGTERM) => {
                // The server is gone: take the command's whole group down
                // (this helper included).
                let _ = killpg(getpgrp(), Signal::SIGKILL);
                return ExitCode::from(137);
            }
            Ok(_) | Err(_) => match child.try_wait() {
                Ok(Some(status)) => return exit_code(status),
                Ok(None) => continue,
                Err(error) => {
                    eprintln!("spool sandbox-exec: waiting for the command failed: {error}");
                    let _ = killpg(Pid::from_raw(0), Signal::SIGKILL);
                    return ExitCode::from(126);
                }
            },
        }
    }
}

/// The command's status as this helper's exit code.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1));
    }
    let signal = status.signal().unwrap_or(0);
    ExitCode::from(u8::try_from(128 + (signal & 0x7f)).unwrap_or(255))
}
