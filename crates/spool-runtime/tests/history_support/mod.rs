//! A runner on a real store file in each history mode, against a
//! Responses server that keeps what it is sent (and refuses an item twice,
//! an output without its call, an unknown response).

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use spool_model::{ProviderConfig, ResponsesProvider, RetryPolicy};
use spool_protocol::{HistoryMode, UserInput};
use spool_runtime::{Agent, RunResult, RunStatus, Runner, ShellTool, Tool};
use spool_store::{NewThread, SqliteStore, Store, StoreOptions};
use spool_testkit::{Exchange, Reply, StatefulResponses};
use spool_tools::function::FunctionTool;
use spool_tools::policy::{ApprovalPolicy, SandboxMode};

pub struct Setup {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub store: SqliteStore,
    pub thread_id: String,
    pub server: StatefulResponses,
}

pub async fn setup(mode: HistoryMode, replies: Vec<Reply>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let workspace = workspace.canonicalize().unwrap();
    let store = SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
    let mut new = NewThread::new("stateful", workspace.display().to_string());
    new.history_mode = mode;
    let thread = store.create_thread(new).await.unwrap();
    let server = StatefulResponses::start(replies).await.unwrap();
    Setup {
        dir,
        workspace,
        store,
        thread_id: thread.thread.id,
        server,
    }
}

impl Setup {
    pub fn runner(&self, retry: RetryPolicy) -> Runner<SqliteStore> {
        let config = ProviderConfig::new("stateful", self.server.url()).with_retry(retry);
        Runner::new(self.store.clone(), Arc::new(ResponsesProvider::new(config)))
    }

    pub async fn turn(&self, runner: &Runner<SqliteStore>, text: &str) -> RunStatus {
        self.run(runner, agent(), text).await.status
    }

    pub async fn run(
        &self,
        runner: &Runner<SqliteStore>,
        agent: Arc<Agent>,
        text: &str,
    ) -> RunResult {
        runner
            .run(agent, &self.thread_id, vec![UserInput::text(text)])
            .await
            .unwrap()
    }

    /// What a restart does to the store: the file closed and opened again.
    pub fn reopen(&mut self) {
        self.store =
            SqliteStore::open(self.dir.path().join("spool.db"), StoreOptions::default()).unwrap();
    }

    /// An agent that may run shell commands in the workspace, each after
    /// a person approved it.
    pub fn asking_agent(&self) -> Arc<Agent> {
        Arc::new(
            Agent::new("assistant", &self.workspace)
                .with_model("stateful-model")
                .with_tool(Tool::Shell(ShellTool::default()))
                .with_policy(ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite),
        )
    }
}

/// An agent with a `weather` tool that answers at once.
pub fn agent() -> Arc<Agent> {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let weather = FunctionTool::new("weather", "the weather", schema, |args, _| async move {
        Ok(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
    })
    .unwrap();
    Arc::new(
        Agent::new("assistant", "/tmp")
            .with_model("stateful-model")
            .with_tool(Tool::Function(weather)),
    )
}

/// Text of `words` words after a label: a couple of o200k_base tokens a
/// word.
pub fn long(label: &str, words: usize) -> String {
    let mut text = format!("{label}:");
    for n in 0..words {
        text.push_str(&format!(" w{n}"));
    }
    text
}

pub fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": text}]})
}

pub fn output(call_id: &str, text: &str) -> Value {
    json!({"type": "function_call_output", "call_id": call_id, "output": text})
}

pub fn input(exchange: &Exchange) -> Vec<Value> {
    exchange.body["input"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Each item by type and text or call id.
pub fn shapes(context: &[Value]) -> Vec<String> {
    context
        .iter()
        .map(|item| match item["type"].as_str() {
            Some("function_call") => format!("call {}", item["call_id"].as_str().unwrap()),
            Some("function_call_output") => {
                format!("output {}", item["call_id"].as_str().unwrap())
            }
            Some("reasoning") => format!(
                "reasoning {}",
                item.get("id").and_then(Value::as_str).unwrap_or("(no id)")
            ),
            _ => {
                let role = item["role"].as_str().unwrap_or("?");
                let text = item["content"][0]["text"].as_str().unwrap_or("?");
                format!("{role}: {text}")
            }
        })
        .collect()
}

pub fn assert_every_request_accepted(exchanges: &[Exchange]) {
    for (n, exchange) in exchanges.iter().enumerate() {
        assert_eq!(exchange.status, 200, "request {n}: {:?}", exchange.error);
    }
}
