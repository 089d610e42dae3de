//! A server as a child process speaking MCP on its stdin and stdout: its
//! environment, its process group, and its stderr.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use spool_tools::sandbox::Launcher;

use super::McpError;
use crate::config::McpServerConfig;

/// What a server gets of spool's environment: what a program needs to run
/// (as Codex passes on), never the rest, which holds API keys and tokens a
/// third-party server has no business seeing. Its section's `env` adds to
/// it.
const PASSED_ON: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];

/// How long a failure waits for the child's last words: what it wrote
/// before its stderr closed, or within this moment.
const LAST_WORDS: Duration = Duration::from_millis(200);

fn passed_on() -> impl Iterator<Item = (&'static str, std::ffi::OsString)> {
    PASSED_ON
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
}

/// A started child: its transport, its group, its stderr.
pub(super) struct Child {
    pub transport: TokioChildProcess,
    pub group: Group,
    pub stderr: StderrTail,
}

/// Starts `command` of `config` (under `launcher` when there is one).
pub(super) fn spawn(
    name: &str,
    command: &str,
    config: &McpServerConfig,
    launcher: Option<&Launcher>,
) -> Result<Child, McpError> {
    let argv: Vec<String> = std::iter::once(command.to_owned())
        .chain(config.args.iter().cloned())
        .collect();
    let argv = match launcher {
        Some(launcher) => launcher.wrap_unconfined(&argv),
        None => argv,
    };
    let mut child = tokio::process::Command::new(&argv[0]);
    child
        .args(&argv[1..])
        .env_clear()
        .envs(passed_on())
        .envs(&config.env)
        .kill_on_drop(true)
        .process_group(0);
    if let Some(cwd) = &config.cwd {
        child.current_dir(cwd);
    }
    let (transport, stderr) = TokioChildProcess::builder(child)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| McpError::Spawn {
            name: name.to_owned(),
            command: command.to_owned(),
            source,
        })?;
    // From here on, dropping `group` kills the server's whole group.
    let group = Group(transport.id());
    Ok(Child {
        transport,
        group,
        stderr: StderrTail::read(name, stderr),
    })
}

/// What the server writes on stderr goes to the log; its last line
/// explains a failure.
pub(super) struct StderrTail {
    last: Arc<Mutex<Option<String>>>,
    /// Turns true when stderr closed (or was never there).
    done: watch::Receiver<bool>,
}

impl StderrTail {
    fn read(name: &str, stderr: Option<tokio::process::ChildStderr>) -> StderrTail {
        let last = Arc::new(Mutex::new(None::<String>));
        let (done_tx, done) = watch::channel(false);
        match stderr {
            Some(stderr) => {
                let (server, last) = (name.to_owned(), last.clone());
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(server = %server, "{line}");
                        if !line.trim().is_empty() {
                            *last.lock().unwrap_or_else(PoisonError::into_inner) = Some(line);
                        }
                    }
                    let _ = done_tx.send(true);
                });
            }
            None => {
                let _ = done_tx.send(true);
            }
        }
        StderrTail { last, done }
    }

    /// The last line the child wrote, once its stderr closed or a moment
    /// passed: a child that exits has usually said why just before, and
    /// that line can still be on its way when its stdout is seen closed.
    pub async fn last_words(&self) -> Option<String> {
        let mut done = self.done.clone();
        let _ = tokio::time::timeout(LAST_WORDS, done.wait_for(|done| *done)).await;
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The process group of a server (its leader's pid): killed, whole, when
/// dropped. Killing only the leader would leave what the server started
/// (`npx` starts `node`), and under the helper, the server itself. (A
/// group whose every process ended long before could in principle see
/// its id reused by a new group; sessions end promptly on close, which is
/// when this runs in practice.)
pub(super) struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        let Some(pid) = self.0.and_then(|pid| i32::try_from(pid).ok()) else {
            return;
        };
        // Gone already (it exited, and was reaped) is fine.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
