//! A runner on a real store file, talking to a scripted Responses API
//! server over a real socket, with a workspace directory for its tools.

#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use spool_model::{ProviderConfig, ResponsesProvider, RetryPolicy};
use spool_protocol::{
    CommandExecutionApprovalDecision, CommandExecutionRequestApprovalResponse,
    FileChangeApprovalDecision, FileChangeRequestApprovalResponse, ServerNotification,
    ServerRequestAnswer, ThreadEvent, ThreadItem, UserInput,
};
use spool_runtime::{Agent, ClientRequests, RunResult, Runner};
use spool_store::{Appended, NewThread, PendingRequest, SqliteStore, Store, StoreOptions};
use spool_testkit::{ScriptedResponse, ScriptedServer};

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub store: SqliteStore,
    pub thread_id: String,
    pub server: ScriptedServer,
}

impl Fixture {
    pub async fn new(responses: Vec<ScriptedResponse>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let workspace = workspace.canonicalize().unwrap();
        let store =
            SqliteStore::open(dir.path().join("spool.db"), StoreOptions::default()).unwrap();
        let thread = store
            .create_thread(NewThread::new("scripted", workspace.display().to_string()))
            .await
            .unwrap();
        let server = ScriptedServer::with_responses(responses).await.unwrap();
        Fixture {
            dir,
            workspace,
            store,
            thread_id: thread.thread.id,
            server,
        }
    }

    pub fn runner(&self) -> Runner<SqliteStore> {
        let provider = ResponsesProvider::new(
            ProviderConfig::new("scripted", self.server.url()).with_retry(RetryPolicy::none()),
        );
        Runner::new(self.store.clone(), Arc::new(provider))
    }

    pub fn agent(&self, name: &str) -> Agent {
        Agent::new(name, &self.workspace).with_model("scripted-model")
    }

    pub async fn run(&self, runner: &Runner<SqliteStore>, agent: Agent, text: &str) -> RunResult {
        runner
            .run(
                Arc::new(agent),
                &self.thread_id,
                vec![UserInput::text(text)],
            )
            .await
            .expect("the run goes through")
    }

    /// The JSON bodies the model server received, in order.
    pub fn request_bodies(&self) -> Vec<Value> {
        self.server
            .requests()
            .iter()
            .map(|r| serde_json::from_str(&r.body_text()).unwrap())
            .collect()
    }
}

/// The `function_call_output` items of a request body, as (call_id, output).
pub fn outputs(body: &Value) -> Vec<(String, String)> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| {
            (
                item["call_id"].as_str().unwrap().to_owned(),
                item["output"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A client that answers requests from a queue (in order) and records
/// every request it was asked; with the queue empty it answers nothing
/// (the run pauses).
#[derive(Default)]
pub struct ScriptedClient {
    answers: std::sync::Mutex<std::collections::VecDeque<ServerRequestAnswer>>,
    asked: std::sync::Mutex<Vec<PendingRequest>>,
}

impl ScriptedClient {
    pub fn new(answers: impl IntoIterator<Item = ServerRequestAnswer>) -> Arc<ScriptedClient> {
        Arc::new(ScriptedClient {
            answers: std::sync::Mutex::new(answers.into_iter().collect()),
            asked: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Every request asked so far, in order.
    pub fn asked(&self) -> Vec<PendingRequest> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientRequests for ScriptedClient {
    fn ask<'a>(
        &'a self,
        request: &'a PendingRequest,
    ) -> Pin<Box<dyn Future<Output = Option<ServerRequestAnswer>> + Send + 'a>> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self.answers.lock().unwrap().pop_front();
        Box::pin(async move { answer })
    }
}

/// A command approval answer.
pub fn command_answer(decision: CommandExecutionApprovalDecision) -> ServerRequestAnswer {
    ServerRequestAnswer::CommandExecution(CommandExecutionRequestApprovalResponse { decision })
}

/// A file change approval answer.
pub fn file_answer(decision: FileChangeApprovalDecision) -> ServerRequestAnswer {
    ServerRequestAnswer::FileChange(FileChangeRequestApprovalResponse { decision })
}

/// The thread's whole log (committed events), in seq order.
pub async fn log(f: &Fixture) -> Vec<ThreadEvent> {
    f.store.flush().await.unwrap();
    f.store.events_after(&f.thread_id, 0, 10_000).await.unwrap()
}

/// How many events of the log have this method.
pub fn count_method(events: &[ThreadEvent], method: &str) -> usize {
    events
        .iter()
        .filter(|e| e.payload.method() == method)
        .count()
}

/// The request ids named by the log's `serverRequest/resolved` events.
pub fn resolved_ids(events: &[ThreadEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            ServerNotification::ServerRequestResolved(n) => Some(n.request_id.to_string()),
            _ => None,
        })
        .collect()
}

/// The first item of the turn matching `pick`.
pub fn find_item<T>(result: &RunResult, pick: impl Fn(&ThreadItem) -> Option<T>) -> T {
    result
        .items()
        .iter()
        .find_map(|r| pick(&r.item))
        .expect("the turn has such an item")
}

/// Runs a turn with `run_streamed`; returns the result and every event
/// streamed (logged or transient), in order.
pub async fn run_streamed(
    f: &Fixture,
    runner: &Runner<SqliteStore>,
    agent: Agent,
    text: &str,
) -> (RunResult, Vec<Appended>) {
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let (_stop, interrupt) = tokio::sync::watch::channel(false);
    let result = runner
        .run_streamed(
            Arc::new(agent),
            &f.thread_id,
            vec![UserInput::text(text)],
            &events,
            interrupt,
        )
        .await
        .expect("the run goes through");
    // The run has finished its appender: everything it streamed is here.
    let mut streamed = Vec::new();
    while let Ok(event) = received.try_recv() {
        streamed.push(event);
    }
    (result, streamed)
}
