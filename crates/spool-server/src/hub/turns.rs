//! Running turns on threads: claiming a thread for one run, launching it
//! (a user's turn, a review, a compaction), forwarding its events to the
//! thread's watchers, freeing the thread when it ends, and interrupting
//! it.

use std::sync::Arc;

use spool_protocol::*;
use spool_runtime::{Agent, Review, RunStatus, Runner};
use spool_store::{AnyStore, Appended};
use tokio::sync::{mpsc, watch};

use super::questions::HubClient;
use super::{Delivery, Hub, HubError};

impl Hub {
    /// Marks the thread running (`None` if it already is) and builds the
    /// agent its settings call for.
    pub(super) fn claim(self: &Arc<Self>, thread_id: &str) -> Option<Launch> {
        let (stop_tx, stop) = watch::channel(false);
        let settings = {
            let mut threads = self.threads();
            let slot = threads.entry(thread_id.to_owned()).or_default();
            if slot.running.is_some() {
                return None;
            }
            slot.running = Some((String::new(), stop_tx));
            slot.settings.clone()
        };
        Some(Launch {
            hub: self.clone(),
            agent: Arc::new((self.agent_for)(&settings)),
            stop,
        })
    }

    /// Starts a turn on the thread; answers with the started turn once
    /// `turn/started` is logged.
    pub async fn start_turn(
        self: &Arc<Self>,
        thread_id: &str,
        input: Vec<UserInput>,
    ) -> Result<Turn, HubError> {
        self.launch_turn(thread_id, TurnOpening::User(input)).await
    }

    /// Starts a review turn on the thread (see `spool_runtime::Review`),
    /// run by the reviewer of the thread's agent.
    pub async fn start_review(
        self: &Arc<Self>,
        thread_id: &str,
        review: Review,
    ) -> Result<Turn, HubError> {
        self.launch_turn(thread_id, TurnOpening::Review(review))
            .await
    }

    /// Compacts the thread's history now, as a turn of its own (see
    /// `spool_runtime::Runner::compact_streamed`).
    pub async fn start_compaction(self: &Arc<Self>, thread_id: &str) -> Result<Turn, HubError> {
        self.launch_turn(thread_id, TurnOpening::Compact).await
    }

    /// Calls an MCP tool for a client, as a turn of its own on the thread
    /// (see `Runner::mcp_call_streamed`); answers the completed item.
    pub async fn call_mcp_tool(
        self: &Arc<Self>,
        thread_id: &str,
        call: (String, String, serde_json::Value),
    ) -> Result<ThreadItem, HubError> {
        let (reply, item) = tokio::sync::oneshot::channel();
        let turn = self
            .launch_turn(thread_id, TurnOpening::Mcp(call, reply))
            .await?;
        let item = item.await.map_err(|_| {
            HubError::Invalid("the call ended before its item completed (see the log)".into())
        })?;
        // Answered once the thread is free: a client's next request on it
        // must not find it busy with this call.
        loop {
            let ended = self.turn_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.running_turn(thread_id).as_deref() != Some(turn.id.as_str()) {
                return Ok(item);
            }
            ended.await;
        }
    }

    async fn launch_turn(
        self: &Arc<Self>,
        thread_id: &str,
        opening: TurnOpening,
    ) -> Result<Turn, HubError> {
        let Some(launch) = self.claim(thread_id) else {
            return Err(HubError::Busy(thread_id.to_owned()));
        };
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let thread = thread_id.to_owned();
        let run = tokio::spawn(async move {
            let runner = launch.hub.runner(&thread);
            match opening {
                TurnOpening::User(input) => {
                    runner
                        .run_streamed(launch.agent, &thread, input, &events_tx, launch.stop)
                        .await
                }
                TurnOpening::Review(review) => {
                    let reviewer = Arc::new(spool_runtime::reviewer(&launch.agent));
                    runner
                        .review_streamed(reviewer, &thread, review, &events_tx, launch.stop)
                        .await
                }
                TurnOpening::Compact => {
                    runner
                        .compact_streamed(launch.agent, &thread, &events_tx, launch.stop)
                        .await
                }
                TurnOpening::Mcp(call, reply) => {
                    let agent = launch.agent;
                    let called = runner
                        .mcp_call_streamed(agent, &thread, call, &events_tx, launch.stop)
                        .await;
                    called.map(|(result, item)| {
                        let _ = reply.send(item);
                        result
                    })
                }
            }
        });
        // The first event is `turn/started`.
        let first = events_rx.recv().await;
        let turn = match &first {
            Some(Appended::Logged(event)) => match &event.payload {
                ServerNotification::TurnStarted(started) => Some(started.turn.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(turn) = turn else {
            self.finish_running(thread_id);
            let outcome = run.await;
            return Err(HubError::Invalid(format!(
                "the turn did not start: {outcome:?}"
            )));
        };
        if let Some(slot) = self.threads().get_mut(thread_id)
            && let Some((id, _)) = &mut slot.running
        {
            *id = turn.id.clone();
        }
        if let Some(first) = first {
            self.broadcast(thread_id, Delivery::Event(first));
        }
        self.forward(thread_id.to_owned(), events_rx, run, turn.id.clone());
        Ok(turn)
    }

    /// Forwards a run's events to the thread's watchers until it ends.
    pub(super) fn forward(
        self: &Arc<Self>,
        thread_id: String,
        mut events: mpsc::UnboundedReceiver<Appended>,
        run: tokio::task::JoinHandle<Result<spool_runtime::RunResult, spool_runtime::RunError>>,
        turn_id: String,
    ) {
        let hub = self.clone();
        tokio::spawn(async move {
            let mut turn_id = turn_id;
            while let Some(event) = events.recv().await {
                if let ServerNotification::TurnCompleted(n) = event.notification() {
                    // The thread is free for the next turn/start before the
                    // client learns this one completed.
                    hub.finish_turn(&thread_id, &turn_id);
                    turn_id = n.turn.id.clone();
                }
                hub.broadcast(&thread_id, Delivery::Event(event));
            }
            match run.await {
                Ok(Ok(result)) if result.status == RunStatus::Paused => {
                    tracing::info!(%thread_id, "run paused, waiting on a request");
                }
                Ok(Ok(_)) => {}
                Ok(Err(error)) => tracing::error!(%thread_id, %error, "run failed"),
                Err(error) => tracing::error!(%thread_id, %error, "run task panicked"),
            }
            hub.finish_turn(&thread_id, &turn_id);
        });
    }

    fn finish_running(&self, thread_id: &str) {
        if let Some(slot) = self.threads().get_mut(thread_id) {
            slot.running = None;
        }
    }

    /// Frees the thread if `turn_id` is the turn it runs (as recorded when
    /// it started: empty for a resumed run); a turn started since is left
    /// alone — dropping its stop sender would interrupt it.
    fn finish_turn(&self, thread_id: &str, turn_id: &str) {
        if let Some(slot) = self.threads().get_mut(thread_id)
            && slot
                .running
                .as_ref()
                .is_some_and(|(running, _)| running == turn_id)
        {
            slot.running = None;
        }
        self.turn_ended.notify_waiters();
        self.drop_if_ephemeral(thread_id);
    }

    pub(super) fn runner(self: &Arc<Self>, thread_id: &str) -> Runner<AnyStore> {
        let mut runner = Runner::new(self.store.clone(), self.provider.clone()).with_client(
            Arc::new(HubClient {
                hub: self.clone(),
                thread_id: thread_id.to_owned(),
            }),
        );
        runner.rules_file = self.rules_file.clone();
        runner.compaction = self.compaction;
        runner.more_input = Some(
            self.threads()
                .entry(thread_id.to_owned())
                .or_default()
                .input
                .get_or_insert_with(|| watch::channel(0).0)
                .subscribe(),
        );
        // Clients get the events; nobody reads the run's result.
        runner.collect_results = false;
        runner
    }

    /// Tells the thread's run that input was added to its turn (logged
    /// before this is called).
    pub fn input_added(&self, thread_id: &str) {
        if let Some(input) = self
            .threads()
            .get(thread_id)
            .and_then(|slot| slot.input.as_ref())
        {
            input.send_modify(|count| *count += 1);
        }
    }

    /// The id of the turn running on the thread in this process, if any
    /// (empty while it is starting).
    pub fn running_turn(&self, thread_id: &str) -> Option<String> {
        self.threads()
            .get(thread_id)
            .and_then(|slot| slot.running.as_ref())
            .map(|(id, _)| id.clone())
    }

    /// Asks the running turn to stop; its `turn/completed` says
    /// `interrupted`.
    pub fn interrupt(&self, thread_id: &str, turn_id: &str) -> Result<(), HubError> {
        let threads = self.threads();
        match threads
            .get(thread_id)
            .and_then(|slot| slot.running.as_ref())
        {
            Some((running, stop)) if running == turn_id => {
                let _ = stop.send(true);
                Ok(())
            }
            Some((running, _)) if !running.is_empty() => Err(HubError::OtherTurnRunning {
                thread_id: thread_id.to_owned(),
                asked: turn_id.to_owned(),
                running: running.clone(),
            }),
            _ => Err(HubError::NotRunning(thread_id.to_owned())),
        }
    }

    /// The turns running now, as (thread id, turn id); the turn id is
    /// empty while a turn is still starting (what a graceful shutdown
    /// waits for).
    pub fn running_turns(&self) -> Vec<(String, String)> {
        self.threads()
            .iter()
            .filter_map(|(thread, slot)| {
                let (turn, _) = slot.running.as_ref()?;
                Some((thread.clone(), turn.clone()))
            })
            .collect()
    }
}

/// What a new turn opens with.
pub(super) enum TurnOpening {
    User(Vec<UserInput>),
    Review(Review),
    Compact,
    /// A client's MCP call (server, tool, arguments), and where its item
    /// goes once completed.
    Mcp(
        (String, String, serde_json::Value),
        tokio::sync::oneshot::Sender<ThreadItem>,
    ),
}

/// What a run claimed on a thread starts with.
pub(super) struct Launch {
    pub(super) hub: Arc<Hub>,
    pub(super) agent: Arc<Agent>,
    pub(super) stop: watch::Receiver<bool>,
}
