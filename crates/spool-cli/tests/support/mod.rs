//! Shared helpers of the CLI's end-to-end tests: run the real `spool`
//! binary in a temporary SPOOL_HOME and read what it stored.

#![allow(dead_code)]

pub mod mcp;
pub mod peer;
pub mod rpc;
pub mod schema;

#[allow(unused_imports)] // not every test binary drives a server
pub use peer::Peer;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

/// The settings of a thread whose shell commands need the client's
/// approval.
pub fn approval_settings() -> Value {
    serde_json::json!({"approvalPolicy": "on-request", "sandbox": "workspace-write"})
}

/// A scripted model that first calls the shell to `touch file` outside the
/// sandbox (call id `call_1`; an escalation, so the client is asked under
/// `on-request`), then answers `answer`.
pub async fn model_touching(file: &str, answer: &str) -> spool_testkit::ScriptedServer {
    use spool_testkit::responses_api::{calls_response, message_response};
    let call = (
        "call_1",
        "shell",
        serde_json::json!({"command": ["touch", file], "sandbox_permissions": "require_escalated"}),
    );
    spool_testkit::ScriptedServer::with_responses([
        calls_response("r1", &[call]),
        message_response("r2", &[answer]),
    ])
    .await
    .unwrap()
}

/// The local llama-server's base URL. CI starts it (`scripts/test.sh`);
/// without it these tests fail and say how to start it.
pub fn local_model_url() -> String {
    std::env::var("SPOOL_LOCAL_MODEL_URL").unwrap_or_else(|_| {
        panic!(
            "SPOOL_LOCAL_MODEL_URL is not set: run the tests with scripts/test.sh, \
             or start the server with `scripts/local-model.sh start` and export \
             SPOOL_LOCAL_MODEL_URL=http://127.0.0.1:8178/v1"
        )
    })
}

pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Default for Home {
    fn default() -> Self {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl Home {
    pub fn new() -> Home {
        Home::default()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("spool.db")
    }

    /// Runs `spool ARGS` with this home, no OpenAI key, and the given
    /// local model URL.
    pub async fn spool(&self, model_url: &str, args: &[&str]) -> Output {
        self.spool_in(self.path(), model_url, args).await
    }

    /// Like [`Home::spool`], run in `cwd` (another directory than the
    /// home, so its own `spool.toml` is a second layer).
    pub async fn spool_in(&self, cwd: &Path, model_url: &str, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_spool"))
            .args(args)
            .current_dir(cwd)
            .env("SPOOL_HOME", self.path())
            .env("SPOOL_LOCAL_MODEL_URL", model_url)
            .env_remove("OPENAI_API_KEY")
            .env_remove("SPOOL_STORE")
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output()
            .await
            .expect("spool runs")
    }

    /// Like [`Home::spool`], asserting success.
    pub async fn spool_ok(&self, model_url: &str, args: &[&str]) -> (String, String) {
        let out = self.spool(model_url, args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "spool {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
            out.status
        );
        (stdout, stderr)
    }
}

/// The thread id from `spool run`'s closing line (`thread <id> · …`).
pub fn thread_id_from(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("thread "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `thread <id>` line in stderr:\n{stderr}"))
        .to_owned()
}

pub fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Runs `spool` with `args` (a `bench` command), which must succeed and
/// print one JSON report on stdout: the report, and what it wrote on
/// stderr.
pub fn bench_report(args: &[&str]) -> (Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}); stderr: {stderr}"));
    (report, stderr)
}
