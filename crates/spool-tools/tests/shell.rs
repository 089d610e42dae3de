//! `run_command` against real child processes.

use std::future::pending;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use spool_tools::shell::{
    DEFAULT_OUTPUT_CAP, OutputStream, ShellCommand, ShellEnd, ShellError, ShellOutcome, run_command,
};
use tokio::sync::oneshot;

fn sh(script: &str) -> ShellCommand {
    ShellCommand::new(
        vec!["sh".into(), "-c".into(), script.into()],
        std::env::temp_dir(),
    )
}

/// Runs without cancellation, collecting what `on_output` saw.
async fn run(cmd: &ShellCommand) -> (ShellOutcome, Vec<(OutputStream, Vec<u8>)>) {
    let mut chunks = Vec::new();
    let outcome = run_command(cmd, |s, b: &[u8]| chunks.push((s, b.to_vec())), pending())
        .await
        .expect("command runs");
    (outcome, chunks)
}

fn stream_text(chunks: &[(OutputStream, Vec<u8>)], stream: OutputStream) -> String {
    let bytes: Vec<u8> = chunks
        .iter()
        .filter(|(s, _)| *s == stream)
        .flat_map(|(_, b)| b.clone())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// The pid the script printed on its first line.
fn first_pid(output: &str) -> Pid {
    let line = output.lines().next().expect("the script printed a pid");
    Pid::from_raw(line.trim().parse().expect("a pid"))
}

/// Whether `pid` has died. Reaping an orphan is up to init and happens on
/// its own schedule (or never, for an init that does not reap), so a zombie
/// counts as dead and the check is retried for a bounded time.
async fn is_dead(pid: Pid) -> bool {
    for _ in 0..250 {
        if kill(pid, None) == Err(Errno::ESRCH) {
            return true;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn stdout_and_stderr_both_arrive() {
    let (outcome, chunks) = run(&sh("echo out; echo err >&2")).await;
    assert_eq!(outcome.end, ShellEnd::Exited { code: 0 });
    assert_eq!(outcome.exit_code, Some(0));
    assert!(outcome.success());
    assert_eq!(outcome.failure_reason(), None);
    assert_eq!(stream_text(&chunks, OutputStream::Stdout), "out\n");
    assert_eq!(stream_text(&chunks, OutputStream::Stderr), "err\n");
    assert!(outcome.aggregated_output.contains("out\n"));
    assert!(outcome.aggregated_output.contains("err\n"));
    assert_eq!(outcome.aggregated_output.len(), 8);
}

#[tokio::test]
async fn output_of_one_stream_keeps_its_order() {
    let (outcome, chunks) = run(&sh("seq 1 20000")).await;
    let expected: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert_eq!(stream_text(&chunks, OutputStream::Stdout), expected);
    assert_eq!(outcome.aggregated_output, expected);
}

#[tokio::test]
async fn aggregated_output_is_the_chunks_in_arrival_order() {
    let (outcome, chunks) = run(&sh(
        "for i in $(seq 1 300); do echo out$i; echo err$i >&2; done",
    ))
    .await;
    assert!(chunks.iter().any(|(s, _)| *s == OutputStream::Stderr));
    let all: Vec<u8> = chunks.iter().flat_map(|(_, b)| b.clone()).collect();
    assert_eq!(outcome.aggregated_output.as_bytes(), &all[..]);
    assert_eq!(outcome.aggregated_output.lines().count(), 600);
}

#[tokio::test]
async fn nonzero_exit_is_reported() {
    let (outcome, _) = run(&sh("exit 3")).await;
    assert_eq!(outcome.end, ShellEnd::Exited { code: 3 });
    assert_eq!(outcome.exit_code, Some(3));
    assert_eq!(
        outcome.failure_reason().as_deref(),
        Some("exited with code 3")
    );
}

#[tokio::test]
async fn death_by_signal_is_reported() {
    let (outcome, _) = run(&sh("kill -9 $$")).await;
    assert_eq!(outcome.end, ShellEnd::Signaled { signal: 9 });
    assert_eq!(outcome.exit_code, None);
    assert_eq!(
        outcome.failure_reason().as_deref(),
        Some("killed by signal 9 (SIGKILL)")
    );
}

#[tokio::test]
async fn cwd_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = ShellCommand::new(vec!["pwd".into(), "-P".into()], dir.path());
    let (outcome, _) = run(&cmd).await;
    assert_eq!(
        outcome.aggregated_output.trim_end(),
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
}

#[tokio::test]
async fn env_is_added_to_the_inherited_one() {
    let cmd = sh(r#"printf '%s %s' "$SPOOL_SHELL_TEST" "${PATH:+has-path}""#)
        .env("SPOOL_SHELL_TEST", "hello world");
    let (outcome, _) = run(&cmd).await;
    assert_eq!(outcome.aggregated_output, "hello world has-path");
}

#[tokio::test]
async fn stdin_is_null() {
    // `cat` with no file reads stdin; with a null stdin it ends at once.
    let cmd = ShellCommand::new(vec!["cat".into()], std::env::temp_dir());
    let (outcome, chunks) = run(&cmd).await;
    assert_eq!(outcome.end, ShellEnd::Exited { code: 0 });
    assert!(chunks.is_empty());
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let err = |cmd: ShellCommand| async move {
        run_command(&cmd, |_, _: &[u8]| {}, pending())
            .await
            .expect_err("should not run")
    };

    let e = err(ShellCommand::new(vec![], std::env::temp_dir())).await;
    assert!(matches!(e, ShellError::EmptyCommand), "{e}");

    let program = "spool-no-such-program-4242";
    let e = err(ShellCommand::new(
        vec![program.into()],
        std::env::temp_dir(),
    ))
    .await;
    assert!(
        matches!(&e, ShellError::Spawn { program: p, .. } if p == program),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!("failed to start \"{program}\": no such program on PATH")
    );

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("gone");
    let e = err(ShellCommand::new(vec!["ls".into()], &missing)).await;
    assert!(
        matches!(&e, ShellError::CwdMissing { path } if *path == missing),
        "{e}"
    );
    assert!(e.to_string().contains(missing.to_str().unwrap()), "{e}");

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = err(ShellCommand::new(vec!["ls".into()], &file)).await;
    assert!(
        matches!(&e, ShellError::CwdNotDirectory { path } if *path == file),
        "{e}"
    );
}

#[tokio::test]
async fn a_hanging_command_times_out() {
    let cmd = ShellCommand::new(vec!["sleep".into(), "30".into()], std::env::temp_dir())
        .timeout(Duration::from_millis(300));
    let started = Instant::now();
    let (outcome, _) = run(&cmd).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        outcome.end,
        ShellEnd::TimedOut {
            timeout: Duration::from_millis(300)
        }
    );
    assert_eq!(outcome.exit_code, None);
    assert_eq!(
        outcome.failure_reason().as_deref(),
        Some("timed out after 300ms; process group killed")
    );
}

#[tokio::test]
async fn a_timeout_kills_grandchildren_too() {
    // The background sleep inherits the pipes: if it survived, reading
    // would not end until it exits.
    // The timeout leaves the script ample time to print the pid first.
    let cmd = sh("sleep 30 & echo $!; sleep 30").timeout(Duration::from_secs(1));
    let started = Instant::now();
    let (outcome, _) = run(&cmd).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(outcome.end, ShellEnd::TimedOut { .. }));
    let grandchild = first_pid(&outcome.aggregated_output);
    assert!(
        is_dead(grandchild).await,
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn cancelling_kills_the_group() {
    let (tx, rx) = oneshot::channel::<()>();
    let mut tx = Some(tx);
    let cmd = sh("sleep 30 & echo $!; sleep 30");
    let started = Instant::now();
    // Cancel once the grandchild's pid has been printed.
    let on_output = |_, bytes: &[u8]| {
        if bytes.contains(&b'\n')
            && let Some(tx) = tx.take()
        {
            let _ = tx.send(());
        }
    };
    let outcome = run_command(&cmd, on_output, async {
        let _ = rx.await;
    })
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.end, ShellEnd::Cancelled);
    assert_eq!(
        outcome.failure_reason().as_deref(),
        Some("cancelled; process group killed")
    );
    let grandchild = first_pid(&outcome.aggregated_output);
    assert!(
        is_dead(grandchild).await,
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn a_process_that_escaped_the_group_cannot_hang_the_call() {
    // `setsid` puts the sleep in a new session, out of reach of the group
    // kill, still holding the pipes.
    let cmd = sh("setsid sleep 30 & echo $!; sleep 30").timeout(Duration::from_secs(1));
    let started = Instant::now();
    let (outcome, _) = run(&cmd).await;
    let escaped = first_pid(&outcome.aggregated_output);
    let _ = kill(escaped, Signal::SIGKILL);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(outcome.end, ShellEnd::TimedOut { .. }));
}

#[tokio::test]
async fn a_background_job_does_not_hold_up_a_finished_command() {
    let cmd = sh("sleep 30 & echo $!; echo done");
    let started = Instant::now();
    let (outcome, _) = run(&cmd).await;
    let background = first_pid(&outcome.aggregated_output);
    let _ = kill(background, Signal::SIGKILL);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.end, ShellEnd::Exited { code: 0 });
    assert!(outcome.aggregated_output.ends_with("done\n"));
}

#[tokio::test]
async fn huge_output_keeps_head_and_tail() {
    let cmd = sh("echo START; seq 1 100000; echo END").output_cap(1000);
    let (outcome, chunks) = run(&cmd).await;
    let streamed: usize = chunks.iter().map(|(_, b)| b.len()).sum();
    let text = &outcome.aggregated_output;
    assert!(streamed > 500_000, "on_output sees everything: {streamed}");
    assert!(text.starts_with("START\n1\n2\n"), "{text}");
    assert!(text.ends_with("99999\n100000\nEND\n"), "{text}");
    let elided = streamed - 1000;
    assert!(
        text.contains(&format!("[… {elided} bytes elided …]")),
        "{text}"
    );
    assert!(text.len() < 1100, "{}", text.len());
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let (tx, rx) = oneshot::channel::<String>();
    let mut tx = Some(tx);
    let cmd = sh("sleep 30 & echo $!; sleep 30");
    let run = run_command(
        &cmd,
        |_, bytes: &[u8]| {
            if let Some(tx) = tx.take() {
                let _ = tx.send(String::from_utf8_lossy(bytes).into_owned());
            }
        },
        pending(),
    );
    // Drive the call until the grandchild's pid is out, then drop it.
    let printed = tokio::select! {
        printed = rx => printed.unwrap(),
        _ = run => panic!("the command cannot finish on its own"),
    };
    let grandchild = first_pid(&printed);
    assert!(
        is_dead(grandchild).await,
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn endless_output_still_times_out() {
    let cmd = ShellCommand::new(vec!["yes".into()], std::env::temp_dir())
        .timeout(Duration::from_millis(300));
    let mut streamed = 0usize;
    let started = Instant::now();
    let outcome = run_command(&cmd, |_, b: &[u8]| streamed += b.len(), pending())
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(outcome.end, ShellEnd::TimedOut { .. }));
    assert!(streamed > 0);
    assert!(outcome.aggregated_output.len() < DEFAULT_OUTPUT_CAP + 100);
}

#[test]
fn the_call_is_send() {
    fn assert_send<T: Send>(_: T) {}
    let cmd = sh("true");
    assert_send(run_command(&cmd, |_, _: &[u8]| {}, pending()));
}
