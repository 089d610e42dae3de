//! A runner on a real store file, talking to a scripted Responses API
//! server over a real socket, with a workspace directory for its tools.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use spool_model::{ProviderConfig, ResponsesProvider, RetryPolicy};
use spool_protocol::UserInput;
use spool_runtime::{Agent, RunResult, Runner};
use spool_store::{NewThread, SqliteStore, Store, StoreOptions};
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
