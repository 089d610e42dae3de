//! A JSON-RPC client on a `spool serve` child process over stdio, as a
//! Codex app-server client talks to it. Everything it receives is checked
//! against Codex's schema (see `schema.rs`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::Home;
use super::peer::Peer;
use super::schema::Conformance;

/// A JSON-RPC client on a `spool serve` child process.
pub struct Client {
    pub child: Child,
    pub stdin: ChildStdin,
    pub lines: Lines<BufReader<ChildStdout>>,
    /// Everything received that was not a reply we waited for.
    pub seen: Vec<Value>,
    pub conformance: Conformance,
}

impl Client {
    pub fn start(home: &Home, model_url: &str, extra: &[&str]) -> Client {
        Client::start_with_env(home, model_url, extra, &[])
    }

    /// As [`Client::start`], with extra environment for the server.
    pub fn start_with_env(
        home: &Home,
        model_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Client {
        Client::spawn(home, home.path(), model_url, &["serve"], extra, env)
    }

    /// `spool app-server EXTRA`, as tools that launch `codex app-server`
    /// start it.
    pub fn app_server(home: &Home, model_url: &str, extra: &[&str]) -> Client {
        Client::spawn(home, home.path(), model_url, &["app-server"], extra, &[])
    }

    /// As [`Client::start`], with the server running in `dir` (its default
    /// `cwd` for threads) instead of the home.
    pub fn start_in(home: &Home, dir: &Path, model_url: &str, extra: &[&str]) -> Client {
        Client::spawn(home, dir, model_url, &["serve"], extra, &[])
    }

    fn spawn(
        home: &Home,
        dir: &Path,
        model_url: &str,
        command: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_spool"))
            .args(command)
            .args(extra)
            .current_dir(dir)
            .env("SPOOL_HOME", home.path())
            .env("SPOOL_LOCAL_MODEL_URL", model_url)
            .env_remove("OPENAI_API_KEY")
            .env_remove("SPOOL_STORE")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spool serve starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Client {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            conformance: Conformance::default(),
        }
    }

    pub async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    pub async fn send_raw(&mut self, line: &str) {
        if let Ok(message) = serde_json::from_str::<Value>(line) {
            self.conformance.sent(&message);
        }
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("the server answers within 30 s")
            .unwrap()
            .expect("the server is still there");
        let message =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        self.conformance.received(&message);
        message
    }

    /// Initializes and starts a thread (request id 1) whose shell commands
    /// need this client's approval; returns its id.
    pub async fn approval_thread(&mut self) -> String {
        self.initialize(json!({})).await;
        let started = self
            .call(1, "thread/start", super::approval_settings())
            .await;
        thread_id_of(&started)
    }

    pub async fn close(mut self) {
        drop(self.stdin);
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server exits when its input ends")
            .unwrap();
        assert!(status.success(), "{status}");
    }
}

pub fn method_of(message: &Value) -> &str {
    message["method"].as_str().unwrap_or("")
}

/// The thread id of a `thread/start` (or `thread/fork`) reply.
pub fn thread_id_of(started: &Value) -> String {
    started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no thread: {started}"))
        .to_owned()
}

impl Peer for Client {
    async fn send_message(&mut self, message: Value) {
        self.send(message).await;
    }

    async fn next_message(&mut self) -> Value {
        self.next().await
    }

    fn seen(&mut self) -> &mut Vec<Value> {
        &mut self.seen
    }
}
