//! Resume across processes: a run paused on an approval survives SIGKILL
//! of its process; another process answers the request and a third
//! resumes the run to its end, and the tool runs exactly once (counted by
//! its side effect on disk). A process killed while a resumed tool runs
//! leaves a call the next resume reports and never runs again.
//!
//! The children are this test binary run again with `--exact child_main`;
//! the environment turns that test into the child's main.

#![cfg(unix)]

mod runner_support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spool_protocol::*;
use spool_runtime::{Agent, RunStatus, Runner, ShellTool, Tool};
use spool_store::{NewThread, SqliteStore, Store, StoreOptions};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};
use tokio::sync::{mpsc, watch};

const MODE: &str = "SPOOL_RESUME_CHILD";
const DB: &str = "SPOOL_RESUME_DB";
const WORKSPACE: &str = "SPOOL_RESUME_WORKSPACE";
const MODEL_URL: &str = "SPOOL_RESUME_MODEL_URL";
const THREAD: &str = "SPOOL_RESUME_THREAD";

/// Not a test: the child's main when the environment says so.
#[test]
fn child_main() {
    let Ok(mode) = std::env::var(MODE) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(child(&mode));
}

fn agent(workspace: &Path) -> Arc<Agent> {
    Arc::new(
        Agent::new("coder", workspace)
            .with_model("scripted-model")
            .with_tool(Tool::Shell(ShellTool::default()))
            .with_policy(ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite),
    )
}

async fn child(mode: &str) {
    let env = |key: &str| std::env::var(key).unwrap();
    let store = SqliteStore::open(env(DB), StoreOptions::default()).unwrap();
    let provider = spool_model::ResponsesProvider::new(
        spool_model::ProviderConfig::new("scripted", env(MODEL_URL))
            .with_retry(spool_model::RetryPolicy::none()),
    );
    let runner = Runner::new(store.clone(), Arc::new(provider));
    let agent = agent(Path::new(&env(WORKSPACE)));
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    match mode {
        "start" => {
            let thread = store
                .create_thread(NewThread::new("scripted", env(WORKSPACE)))
                .await
                .unwrap();
            let result = runner
                .run(
                    agent,
                    &thread.thread.id,
                    vec![UserInput::text("append a line")],
                )
                .await
                .unwrap();
            assert_eq!(result.status, RunStatus::Paused);
            let request = &result.interruptions()[0].request_id;
            println!("paused {} {request}", thread.thread.id);
            // Wait to be killed, with the store open.
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "resume" => {
            let thread = env(THREAD);
            println!("resuming");
            let result = runner.resume(agent, &thread, &events, interrupt).await;
            match result {
                Ok(result) => println!("ended {:?}", result.status),
                Err(error) => println!("error {error}"),
            }
            store.close().await.unwrap();
        }
        other => panic!("unknown child mode {other}"),
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    db: PathBuf,
    workspace: PathBuf,
    server: ScriptedServer,
}

fn spawn(
    setup: &Setup,
    mode: &str,
    thread: Option<&str>,
) -> (Child, BufReader<std::process::ChildStdout>) {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(exe);
    command
        .args(["--exact", "child_main", "--nocapture", "--quiet"])
        .env(MODE, mode)
        .env(DB, &setup.db)
        .env(WORKSPACE, &setup.workspace)
        .env(MODEL_URL, setup.server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(thread) = thread {
        command.env(THREAD, thread);
    }
    let mut child = command.spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdout)
}

/// The next line the child printed that starts with one of `prefixes`.
fn line_starting(stdout: &mut BufReader<std::process::ChildStdout>, prefixes: &[&str]) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let read = stdout.read_line(&mut line).unwrap();
        assert!(read > 0, "the child ended before printing {prefixes:?}");
        if prefixes.iter().any(|p| line.starts_with(p)) {
            return line.trim().to_owned();
        }
    }
}

async fn setup(command: serde_json::Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let workspace = workspace.canonicalize().unwrap();
    let server = ScriptedServer::with_responses(vec![
        calls_response("r1", &[("call_1", "shell", json!({ "command": command }))]),
        message_response("r2", &["Appended."]),
    ])
    .await
    .unwrap();
    Setup {
        db: dir.path().join("spool.db"),
        _dir: dir,
        workspace,
        server,
    }
}

/// Starts a run in a child, waits for it to pause, and kills it.
fn start_and_kill(setup: &Setup) -> (String, String) {
    let (mut child, mut stdout) = spawn(setup, "start", None);
    let paused = line_starting(&mut stdout, &["paused "]);
    let mut words = paused.split_whitespace().skip(1);
    let (thread, request) = (
        words.next().unwrap().to_owned(),
        words.next().unwrap().to_owned(),
    );
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "the child died of SIGKILL");
    (thread, request)
}

/// Answers the request from this process (the store reopens alone, so
/// crash recovery runs: the paused turn must survive it).
async fn accept(setup: &Setup, thread: &str, request: &str) {
    let store = SqliteStore::open(&setup.db, StoreOptions::default()).unwrap();
    let turns = store.turns(thread).await.unwrap();
    assert_eq!(
        turns[0].status,
        TurnStatus::InProgress,
        "recovery left the paused turn open"
    );
    let open = store.open_requests(thread).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].request_id, request);
    store
        .resolve_request(thread, request, json!({"decision": "accept"}))
        .await
        .unwrap();
    store.close().await.unwrap();
}

fn resume(setup: &Setup, thread: &str) -> String {
    let (mut child, mut stdout) = spawn(setup, "resume", Some(thread));
    let ended = line_starting(&mut stdout, &["ended ", "error "]);
    assert!(child.wait().unwrap().success());
    ended
}

async fn turn_completions(setup: &Setup, thread: &str) -> (Vec<TurnStatus>, usize) {
    let store = SqliteStore::open(&setup.db, StoreOptions::default()).unwrap();
    let events = store.events_after(thread, 0, 100_000).await.unwrap();
    let completions = events
        .iter()
        .filter_map(|e| match &e.payload {
            ServerNotification::TurnCompleted(n) => Some(n.turn.status),
            _ => None,
        })
        .collect();
    let resolved = events
        .iter()
        .filter(|e| matches!(e.payload, ServerNotification::ServerRequestResolved(_)))
        .count();
    store.close().await.unwrap();
    (completions, resolved)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_kill_approve_elsewhere_resume_runs_the_tool_exactly_once() {
    let setup = setup(json!(["sh", "-c", "echo ran >> ../side_effect.txt"])).await;
    let side_effect = setup.workspace.parent().unwrap().join("side_effect.txt");

    let (thread, request) = start_and_kill(&setup);
    assert!(!side_effect.exists(), "nothing ran before the approval");
    accept(&setup, &thread, &request).await;

    let ended = resume(&setup, &thread);
    assert_eq!(ended, "ended Completed");
    assert_eq!(std::fs::read_to_string(&side_effect).unwrap(), "ran\n");
    // One model call before the pause, one after: the resume added only
    // the call that needed the tool's output.
    assert_eq!(setup.server.requests().len(), 2);
    let body: serde_json::Value =
        serde_json::from_str(&setup.server.requests()[1].body_text()).unwrap();
    let outputs = runner_support::outputs(&body);
    assert_eq!(outputs.len(), 1);
    assert!(outputs[0].1.contains("Exit code: 0"), "{}", outputs[0].1);

    let (completions, resolved) = turn_completions(&setup, &thread).await;
    assert_eq!(completions, vec![TurnStatus::Completed]);
    assert_eq!(resolved, 1);

    // Nothing is left to resume, and trying changes nothing.
    let again = resume(&setup, &thread);
    assert!(again.starts_with("error "), "{again}");
    assert_eq!(std::fs::read_to_string(&side_effect).unwrap(), "ran\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_killed_mid_run_is_reported_and_never_run_again() {
    // The command records its start (and its pid, to clean up), then hangs.
    let setup = setup(json!([
        "sh",
        "-c",
        "echo $$ >> ../started.txt; exec sleep 30"
    ]))
    .await;
    let started = setup.workspace.parent().unwrap().join("started.txt");
    let (thread, request) = start_and_kill(&setup);
    accept(&setup, &thread, &request).await;

    // A resume that dies while the command runs.
    let (mut child, mut stdout) = spawn(&setup, "resume", Some(&thread));
    line_starting(&mut stdout, &["resuming"]);
    let pid = loop {
        if let Ok(text) = std::fs::read_to_string(&started)
            && let Some(pid) = text
                .lines()
                .next()
                .and_then(|l| l.trim().parse::<i32>().ok())
        {
            break pid;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut rest = String::new();
            std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
            panic!("the resume ended ({status}) before the command started: {rest}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();

    // The next resume reports the call and goes on without running it.
    let ended = resume(&setup, &thread);
    assert_eq!(ended, "ended Completed");
    assert_eq!(
        std::fs::read_to_string(&started).unwrap().lines().count(),
        1,
        "the command ran once"
    );
    let body: serde_json::Value =
        serde_json::from_str(&setup.server.requests()[1].body_text()).unwrap();
    let outputs = runner_support::outputs(&body);
    assert!(outputs[0].1.contains("not run again"), "{}", outputs[0].1);
    let (completions, _) = turn_completions(&setup, &thread).await;
    assert_eq!(completions, vec![TurnStatus::Completed]);
}
