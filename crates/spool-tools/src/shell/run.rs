//! Running one command as a child process in its own process group.

use std::future::Future;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::{Instant, sleep_until};

use super::error::ShellError;
use super::output::{CappedOutput, OutputStream};

/// How long a command may run when the caller has no better idea.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How much output [`ShellOutcome::aggregated_output`] keeps by default.
pub const DEFAULT_OUTPUT_CAP: usize = 1024 * 1024;

/// After the child exits on its own, how long to keep reading pipes that a
/// background process it started still holds open. The child's own output is
/// already in the pipe by then, so this only bounds the wait for stragglers.
const EXIT_DRAIN: Duration = Duration::from_millis(500);

/// After killing the group, how long to wait for the child to be reaped and
/// the pipes to close. SIGKILL is normally immediate; this covers a process
/// stuck in uninterruptible sleep or one that left the group (setsid) while
/// holding our pipes.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// A command to run: the program and its arguments, exactly as the program
/// will receive them (no shell is involved unless `argv` names one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Set on top of the inherited environment; later entries win.
    pub env: Vec<(String, String)>,
    /// Removed from the inherited environment (before `env` is applied).
    pub env_remove: Vec<String>,
    pub timeout: Duration,
    /// Bytes of output kept in [`ShellOutcome::aggregated_output`]; the
    /// stream given to `on_output` is never capped.
    pub output_cap: usize,
}

impl ShellCommand {
    pub fn new(argv: Vec<String>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            argv,
            cwd: cwd.into(),
            env: Vec::new(),
            env_remove: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }
}

/// How a command's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEnd {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    /// The timeout passed; the process group was killed.
    TimedOut {
        timeout: Duration,
    },
    /// The cancel future resolved; the process group was killed.
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    pub end: ShellEnd,
    /// Set only when the process exited on its own.
    pub exit_code: Option<i32>,
    /// Stdout and stderr interleaved in the order they were read, lossy
    /// UTF-8, capped at the command's `output_cap` (head and tail kept).
    pub aggregated_output: String,
    pub duration: Duration,
}

impl ShellOutcome {
    pub fn success(&self) -> bool {
        self.end == ShellEnd::Exited { code: 0 }
    }

    /// Why the command did not succeed, as a sentence for a person or a
    /// model; `None` when it exited with code 0.
    pub fn failure_reason(&self) -> Option<String> {
        match self.end {
            ShellEnd::Exited { code: 0 } => None,
            ShellEnd::Exited { code } => Some(format!("exited with code {code}")),
            ShellEnd::Signaled { signal } => Some(match Signal::try_from(signal) {
                Ok(name) => format!("killed by signal {signal} ({name})"),
                Err(_) => format!("killed by signal {signal}"),
            }),
            ShellEnd::TimedOut { timeout } => Some(format!(
                "timed out after {}; process group killed",
                format_duration(timeout)
            )),
            ShellEnd::Cancelled => Some("cancelled; process group killed".to_owned()),
        }
    }
}

/// "300ms", "2s", "1.5s".
fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        let secs = format!("{:.3}", d.as_secs_f64());
        format!("{}s", secs.trim_end_matches('0'))
    }
}

/// Kills the process group if the run is abandoned before the child was
/// reaped: an early error return, or the caller dropping the future.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // ESRCH means everyone is already gone, which is the goal.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    /// Once the leader is reaped its pid may be reused, so the id must not be
    /// signalled any more.
    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `cmd` to completion, timeout or cancellation.
///
/// Every chunk read from the child's stdout or stderr goes to `on_output`
/// as it arrives. When the timeout passes or `cancel` resolves, the whole
/// process group is killed with SIGKILL (so grandchildren die too) and the
/// outcome says why. If the child exits on its own, processes it left
/// running in the background are not killed, but the call stops waiting for
/// them to close the pipes shortly after the exit.
pub async fn run_command(
    cmd: &ShellCommand,
    on_output: impl FnMut(OutputStream, &[u8]) + Send,
    cancel: impl Future<Output = ()> + Send,
) -> Result<ShellOutcome, ShellError> {
    run_command_with(cmd, |_| {}, on_output, cancel).await
}

/// [`run_command`], telling `on_spawn` the pid of the started process
/// (the leader of the command's process group).
pub async fn run_command_with(
    cmd: &ShellCommand,
    on_spawn: impl FnOnce(u32) + Send,
    mut on_output: impl FnMut(OutputStream, &[u8]) + Send,
    cancel: impl Future<Output = ()> + Send,
) -> Result<ShellOutcome, ShellError> {
    let program = cmd.argv.first().ok_or(ShellError::EmptyCommand)?;
    check_cwd(cmd)?;

    let started = Instant::now();
    let deadline = started.checked_add(cmd.timeout);
    let mut command = Command::new(program);
    for name in &cmd.env_remove {
        command.env_remove(name);
    }
    let mut child = command
        .args(&cmd.argv[1..])
        .current_dir(&cmd.cwd)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ShellError::Spawn {
            program: program.clone(),
            source,
        })?;
    if let Some(id) = child.id() {
        on_spawn(id);
    }
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut guard = GroupGuard { pgid };

    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut out_buf = vec![0u8; 8192];
    let mut err_buf = vec![0u8; 8192];
    let mut output = CappedOutput::new(cmd.output_cap);
    let mut chunk = |stream, bytes: &[u8]| {
        on_output(stream, bytes);
        output.push(bytes);
    };

    let mut status: Option<ExitStatus> = None;
    let mut killed: Option<ShellEnd> = None;
    // Once set, the loop ends at this instant even if a pipe is still open.
    let mut stop_at: Option<Instant> = None;
    tokio::pin!(cancel);
    let mut cancel_done = false;

    while stdout.is_some() || stderr.is_some() || status.is_none() {
        // Unbiased on purpose: a command that never stops writing must not
        // starve the timeout, the cancel or the other pipe.
        tokio::select! {
            read = read_some(&mut stdout, &mut out_buf), if stdout.is_some() => {
                match read.map_err(ShellError::Io)? {
                    0 => stdout = None,
                    n => chunk(OutputStream::Stdout, &out_buf[..n]),
                }
            }
            read = read_some(&mut stderr, &mut err_buf), if stderr.is_some() => {
                match read.map_err(ShellError::Io)? {
                    0 => stderr = None,
                    n => chunk(OutputStream::Stderr, &err_buf[..n]),
                }
            }
            exit = child.wait(), if status.is_none() => {
                status = Some(exit.map_err(ShellError::Io)?);
                guard.disarm();
                if killed.is_none() {
                    let drain_end = Instant::now() + EXIT_DRAIN;
                    stop_at = Some(deadline.map_or(drain_end, |d| d.min(drain_end)));
                }
            }
            _ = sleep_until(stop_at.unwrap_or(started)), if stop_at.is_some() => break,
            _ = sleep_until(deadline.unwrap_or(started)), if deadline.is_some() && status.is_none() && killed.is_none() => {
                killed = Some(ShellEnd::TimedOut { timeout: cmd.timeout });
                guard.kill();
                stop_at = Some(Instant::now() + KILL_GRACE);
            }
            () = &mut cancel, if !cancel_done => {
                cancel_done = true;
                if status.is_some() {
                    // Already exited; only the drain is left, and the caller
                    // no longer wants to wait for it.
                    break;
                }
                if killed.is_none() {
                    killed = Some(ShellEnd::Cancelled);
                    guard.kill();
                    stop_at = Some(Instant::now() + KILL_GRACE);
                }
            }
        }
    }

    let (end, exit_code) = match (killed, status) {
        (Some(end), _) => (end, None),
        (None, Some(status)) => exit_end(status),
        // The loop only ends without a status after a kill.
        (None, None) => unreachable!("command loop ended before the child exited"),
    };
    Ok(ShellOutcome {
        end,
        exit_code,
        aggregated_output: output.into_string(),
        duration: started.elapsed(),
    })
}

fn check_cwd(cmd: &ShellCommand) -> Result<(), ShellError> {
    let path = cmd.cwd.clone();
    match std::fs::metadata(&cmd.cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ShellError::CwdNotDirectory { path }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ShellError::CwdMissing { path }),
        Err(source) => Err(ShellError::CwdInaccessible { path, source }),
    }
}

fn exit_end(status: ExitStatus) -> (ShellEnd, Option<i32>) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (ShellEnd::Exited { code }, Some(code)),
        (None, Some(signal)) => (ShellEnd::Signaled { signal }, None),
        // Neither code nor signal: not produced by waitpid for a process that
        // ended, but report something rather than panic.
        (None, None) => (ShellEnd::Signaled { signal: 0 }, None),
    }
}

async fn read_some<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buf).await,
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(end: ShellEnd) -> ShellOutcome {
        ShellOutcome {
            end,
            exit_code: None,
            aggregated_output: String::new(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn failure_reasons_read_as_sentences() {
        let reason = |end| outcome(end).failure_reason();
        assert_eq!(reason(ShellEnd::Exited { code: 0 }), None);
        assert_eq!(
            reason(ShellEnd::Exited { code: 3 }).as_deref(),
            Some("exited with code 3")
        );
        assert_eq!(
            reason(ShellEnd::Signaled { signal: 9 }).as_deref(),
            Some("killed by signal 9 (SIGKILL)")
        );
        assert_eq!(
            reason(ShellEnd::TimedOut {
                timeout: Duration::from_secs(2)
            })
            .as_deref(),
            Some("timed out after 2s; process group killed")
        );
        assert_eq!(
            reason(ShellEnd::Cancelled).as_deref(),
            Some("cancelled; process group killed")
        );
    }

    #[test]
    fn durations_are_short_and_exact() {
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(61_250)), "61.25s");
    }
}
