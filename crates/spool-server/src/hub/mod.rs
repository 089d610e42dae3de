//! The thread manager: which connections watch which threads, the turn
//! each thread is running, and the server → client requests its runs wait
//! on.
//!
//! Every event of a thread reaches its subscribers in seq order, once:
//! a subscriber joins the live stream first and then reads the log up to
//! where the live stream starts, so nothing falls between the two (see
//! `subscribe`). One turn runs per thread at a time; threads run in
//! parallel.
//!
//! A run asks its questions through [`HubClient`]: the request goes to every
//! connection watching the thread, the first answer wins, and with nobody
//! watching (or once the last watcher leaves) the run pauses — the request
//! is durable in the store, and a client that resumes the thread gets it
//! again; answering it resumes the run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use spool_model::ModelProvider;
use spool_protocol::*;
use spool_runtime::{Agent, Review, RunStatus, Runner};
use spool_store::{AnyStore, Appended, PendingRequest, Store, StoreError};
use tokio::sync::{mpsc, watch};

use crate::ceilings::{CeilingError, Ceilings, Fields};
use crate::outbox::Room;

mod questions;

use questions::{HubClient, Waiting};

/// What a connection receives about the threads it watches.
#[derive(Debug, Clone)]
pub enum Delivery {
    Event(Appended),
    /// A server → client request to forward (and answer with
    /// [`Hub::answer`]).
    Request(PendingRequest),
}

pub type ConnectionId = u64;

/// Builds the agent a thread runs with (model, tools, policy).
pub type AgentFactory = Arc<dyn Fn(&ThreadSettings) -> Agent + Send + Sync>;

/// Per-thread settings given at `thread/start` (defaults from the server).
#[derive(Debug, Clone, Default)]
pub struct ThreadSettings {
    pub model: Option<String>,
    pub cwd: Option<String>,
    pub approval_policy: Option<AskForApproval>,
    /// A mode (`thread/start`'s `sandbox`, as its default policy) or the
    /// full policy of `turn/start`'s `sandboxPolicy` (extra writable roots,
    /// the network).
    pub sandbox: Option<SandboxPolicy>,
    pub instructions: Option<String>,
    /// Tools the client runs (`thread/start`'s `dynamicTools`), called
    /// through `item/tool/call`.
    pub dynamic_tools: Vec<DynamicToolSpec>,
}

/// What `thread/unsubscribe` did.
pub struct Unsubscribed {
    pub status: ThreadUnsubscribeStatus,
    /// The thread is no longer loaded: the leaver gets `thread/closed`.
    pub closed: bool,
}

impl Unsubscribed {
    fn status(status: ThreadUnsubscribeStatus) -> Unsubscribed {
        Unsubscribed {
            status,
            closed: false,
        }
    }
}

/// How a hub runs its threads.
pub struct HubOptions {
    /// The provider's name, recorded on threads and reported to clients.
    pub provider_name: String,
    pub defaults: ThreadSettings,
    pub agent_for: AgentFactory,
    /// Where accepted "always allow" rules are written.
    pub rules_file: Option<std::path::PathBuf>,
    /// When threads are compacted before a turn; `None`: only on
    /// `thread/compact/start`.
    pub compaction: Option<spool_runtime::CompactionPolicy>,
    /// What clients may ask for; `defaults` must lie within them.
    pub ceilings: Ceilings,
    /// What `account/read` and `config/read` report.
    pub facts: ServerFacts,
    /// The most text characters one `turn/start` or `turn/steer` may
    /// carry (Codex refuses over 1,048,576).
    pub max_input_chars: usize,
}

/// Codex's limit on the text of one user input.
pub const DEFAULT_MAX_INPUT_CHARS: usize = 1 << 20;

/// How the server was configured, as clients may read it.
#[derive(Debug, Clone, Default)]
pub struct ServerFacts {
    /// The provider is called with an API key from the configuration.
    pub uses_api_key: bool,
    /// Setting (Codex's config.toml key: `model`, `approval_policy`, …) →
    /// the layer that set it; settings spool chose itself are absent.
    pub origins: std::collections::BTreeMap<String, ConfigLayerMetadata>,
}

pub struct Hub {
    pub(crate) store: AnyStore,
    provider: Arc<dyn ModelProvider>,
    provider_name: String,
    /// Settings of threads that do not set their own.
    defaults: ThreadSettings,
    rules_file: Option<std::path::PathBuf>,
    compaction: Option<spool_runtime::CompactionPolicy>,
    agent_for: AgentFactory,
    ceilings: Ceilings,
    facts: ServerFacts,
    max_input_chars: usize,
    threads: Mutex<HashMap<String, ThreadSlot>>,
    /// Other processes write the store: watched threads follow their
    /// commits (`tail.rs`).
    pub(crate) follows_remote: std::sync::atomic::AtomicBool,
    /// Answers awaited for server → client requests, by request id.
    waiting: Mutex<HashMap<String, Waiting>>,
}

#[derive(Default)]
struct ThreadSlot {
    watchers: HashMap<ConnectionId, mpsc::UnboundedSender<Delivery>>,
    settings: ThreadSettings,
    /// Stops the running turn.
    running: Option<(String, watch::Sender<bool>)>,
    /// Counts input added to the running turn (`turn/steer`); the run
    /// watches it to answer that input in the same turn.
    input: Option<watch::Sender<u64>>,
    /// Started `ephemeral`: deleted once unloaded (no watcher, no turn).
    ephemeral: bool,
    /// The seq up to which this server passed the thread's log on to its
    /// watchers from other servers' commits (`tail.rs`).
    tail: Option<u64>,
}

/// Why a hub call failed, as the JSON-RPC layer reports it.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("thread {0} already has a turn in progress")]
    Busy(String),
    #[error("thread {0} has no turn in progress")]
    NotRunning(String),
    #[error("turn {asked} is not running on thread {thread_id}; the running turn is {running}")]
    OtherTurnRunning {
        thread_id: String,
        asked: String,
        running: String,
    },
    #[error("{0}")]
    Invalid(String),
    /// Settings above the operator's ceilings (or a working directory
    /// that is not one).
    #[error(transparent)]
    Ceiling(#[from] CeilingError),
}

impl Hub {
    pub fn new(
        store: impl Into<AnyStore>,
        provider: Arc<dyn ModelProvider>,
        options: HubOptions,
    ) -> Arc<Hub> {
        Arc::new(Hub {
            store: store.into(),
            provider,
            provider_name: options.provider_name,
            defaults: options.defaults,
            agent_for: options.agent_for,
            rules_file: options.rules_file,
            compaction: options.compaction,
            ceilings: options.ceilings,
            facts: options.facts,
            max_input_chars: options.max_input_chars,
            threads: Mutex::new(HashMap::new()),
            follows_remote: std::sync::atomic::AtomicBool::new(false),
            waiting: Mutex::new(HashMap::new()),
        })
    }

    pub fn store(&self) -> &AnyStore {
        &self.store
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<String, ThreadSlot>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn provider_name(&self) -> &str {
        &self.provider_name
    }

    /// What clients may ask for.
    pub fn ceilings(&self) -> &Ceilings {
        &self.ceilings
    }

    pub fn facts(&self) -> &ServerFacts {
        &self.facts
    }

    /// Refuses input whose text is over the server's limit.
    pub fn check_input_size(&self, input: &[UserInput]) -> Result<(), HubError> {
        let chars: usize = input
            .iter()
            .map(|part| match part {
                UserInput::Text { text, .. } => text.chars().count(),
                _ => 0,
            })
            .sum();
        if chars > self.max_input_chars {
            return Err(HubError::Invalid(format!(
                "the input is {chars} characters, over this server's limit of {} \
                 (--max-input-chars)",
                self.max_input_chars
            )));
        }
        Ok(())
    }

    pub fn provider(&self) -> &Arc<dyn ModelProvider> {
        &self.provider
    }

    /// The server's defaults for threads that set nothing.
    pub fn defaults(&self) -> &ThreadSettings {
        &self.defaults
    }

    /// Threads this server holds in memory: running, or watched by a
    /// client (Codex's "loaded" threads).
    pub fn loaded_threads(&self) -> Vec<String> {
        let mut loaded: Vec<String> = self
            .threads()
            .iter()
            .filter(|(_, slot)| slot.running.is_some() || !slot.watchers.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        loaded.sort();
        loaded
    }

    /// `settings` with the server's defaults where it sets nothing, as the
    /// thread would run with them once checked against the ceilings (see
    /// `ceilings.rs`); a client's request is refused, with nothing
    /// started, when they are above them.
    pub fn admit(&self, settings: ThreadSettings) -> Result<ThreadSettings, HubError> {
        Ok(self
            .ceilings
            .check_thread_settings(self.resolve(settings), &Fields::CLIENT)?)
    }

    /// `settings` with the server's defaults where it sets nothing.
    pub fn resolve(&self, settings: ThreadSettings) -> ThreadSettings {
        let d = &self.defaults;
        ThreadSettings {
            model: settings.model.or(d.model.clone()),
            cwd: settings.cwd.or(d.cwd.clone()),
            approval_policy: settings.approval_policy.or(d.approval_policy),
            sandbox: settings.sandbox.or(d.sandbox.clone()),
            instructions: settings.instructions.or(d.instructions.clone()),
            dynamic_tools: settings.dynamic_tools,
        }
    }

    /// The thread's settings in this process (the server's defaults where
    /// it set nothing).
    pub fn thread_settings(&self, thread_id: &str) -> ThreadSettings {
        let own = self
            .threads()
            .get(thread_id)
            .map(|slot| slot.settings.clone())
            .unwrap_or_default();
        self.resolve(own)
    }

    /// The thread's client tools as last declared in this process.
    pub fn dynamic_tools(&self, thread_id: &str) -> Vec<DynamicToolSpec> {
        self.threads()
            .get(thread_id)
            .map(|slot| slot.settings.dynamic_tools.clone())
            .unwrap_or_default()
    }

    pub fn set_settings(&self, thread_id: &str, settings: ThreadSettings) {
        self.threads()
            .entry(thread_id.to_owned())
            .or_default()
            .settings = settings;
    }

    /// Starts delivering the thread's events to `connection`: first every
    /// logged event after `after_seq` (when given), then live ones, each
    /// once and in seq order. Open requests of the thread are delivered
    /// again after the replay.
    pub async fn subscribe(
        &self,
        thread_id: &str,
        connection: ConnectionId,
        after_seq: Option<u64>,
        out: &mpsc::UnboundedSender<Delivery>,
        room: &Room,
    ) -> Result<(), HubError> {
        // Live events are buffered from here on, while the log is read.
        let (live_tx, live_rx) = mpsc::unbounded_channel();
        self.threads()
            .entry(thread_id.to_owned())
            .or_default()
            .watchers
            .insert(connection, live_tx);
        if after_seq.is_some() {
            // Everything acknowledged so far must be readable.
            self.store.flush().await?;
        }
        if self
            .follows_remote
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // What other servers commit from here on reaches the watcher
            // through the tail; what came before, through the replay.
            if let Some(record) = self.store.thread(thread_id).await? {
                self.advance_tail(thread_id, record.last_seq);
            }
        }
        let requests = self.store.open_requests(thread_id).await?;
        // The replay, then the live stream in seq order from where it ended,
        // paced by the client (`room`): a long replay is read from the log
        // page by page as the client takes it, never held whole.
        let store = self.store.clone();
        let thread = thread_id.to_owned();
        let out = out.clone();
        let room = room.clone();
        tokio::spawn(async move {
            let mut live_rx = live_rx;
            let start = match after_seq {
                Some(after) => match replay(&store, &thread, after, &out, &room).await {
                    Some(last) => Some(last),
                    None => return,
                },
                None => None,
            };
            for request in requests {
                let _ = out.send(Delivery::Request(request));
                room.sent();
            }
            crate::ordering::forward_in_order(&store, &thread, start, &mut live_rx, &out, &room)
                .await;
        });
        Ok(())
    }

    /// Stops delivering the thread's events to `connection`. When no one
    /// watches any more, requests only it was asked are given up, as when
    /// a connection closes; `closed` says the thread is no longer loaded
    /// (no watcher, no turn running).
    pub fn unsubscribe(&self, thread_id: &str, connection: ConnectionId) -> Unsubscribed {
        let (orphaned, running) = {
            let mut threads = self.threads();
            let Some(slot) = threads.get_mut(thread_id) else {
                return Unsubscribed::status(ThreadUnsubscribeStatus::NotLoaded);
            };
            if slot.watchers.remove(&connection).is_none() {
                return Unsubscribed::status(ThreadUnsubscribeStatus::NotSubscribed);
            }
            (slot.watchers.is_empty(), slot.running.is_some())
        };
        if orphaned {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.retain(|_, w| w.thread_id != thread_id);
        }
        let closed = orphaned && !running;
        if closed {
            self.drop_if_ephemeral(thread_id);
        }
        Unsubscribed {
            status: ThreadUnsubscribeStatus::Unsubscribed,
            closed,
        }
    }

    /// Marks a thread started `ephemeral`: it is deleted once unloaded.
    pub fn mark_ephemeral(&self, thread_id: &str) {
        self.threads()
            .entry(thread_id.to_owned())
            .or_default()
            .ephemeral = true;
    }

    /// Deletes an ephemeral thread that nobody has loaded any more (in the
    /// background: its unloading does not wait on the store).
    fn drop_if_ephemeral(&self, thread_id: &str) {
        let unloaded = {
            let mut threads = self.threads();
            let idle = threads.get(thread_id).is_some_and(|slot| {
                slot.ephemeral && slot.watchers.is_empty() && slot.running.is_none()
            });
            if idle {
                threads.remove(thread_id);
            }
            idle
        };
        if unloaded {
            let store = self.store.clone();
            let thread_id = thread_id.to_owned();
            tokio::spawn(async move {
                if let Err(error) = store.delete_thread(&thread_id).await {
                    tracing::warn!(%thread_id, %error, "could not delete an ephemeral thread");
                }
            });
        }
    }

    /// Deletes the thread from the store (refused while a turn runs) and
    /// tells its watchers, who then watch nothing.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<(), HubError> {
        if let Some(turn) = self.running_turn(thread_id) {
            return Err(HubError::Invalid(format!(
                "thread {thread_id} has a turn in progress ({turn}); interrupt it first"
            )));
        }
        self.store.delete_thread(thread_id).await?;
        let deleted = ServerNotification::ThreadDeleted(ThreadDeletedNotification {
            thread_id: thread_id.to_owned(),
        });
        self.broadcast(thread_id, Delivery::Event(Appended::Transient(deleted)));
        self.threads().remove(thread_id);
        Ok(())
    }

    /// Stops delivering to `connection` (it closed). Requests only it was
    /// asked are given up: their runs pause, durable, until asked again.
    pub fn unsubscribe_all(&self, connection: ConnectionId) {
        let mut orphaned = Vec::new();
        {
            let mut threads = self.threads();
            for (thread_id, slot) in threads.iter_mut() {
                slot.watchers.remove(&connection);
                if slot.watchers.is_empty() {
                    orphaned.push(thread_id.clone());
                }
            }
        }
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.retain(|_, w| !orphaned.contains(&w.thread_id));
        }
        for thread_id in &orphaned {
            self.drop_if_ephemeral(thread_id);
        }
    }

    fn broadcast(&self, thread_id: &str, delivery: Delivery) -> usize {
        let mut threads = self.threads();
        let Some(slot) = threads.get_mut(thread_id) else {
            return 0;
        };
        // What watchers got here need not be read again for them (`tail.rs`).
        if let (Some(tail), Delivery::Event(event)) = (&mut slot.tail, &delivery)
            && let Some(seq) = event.seq()
        {
            *tail = (*tail).max(seq);
        }
        slot.watchers
            .values()
            .filter(|w| w.send(delivery.clone()).is_ok())
            .count()
    }

    /// Marks the thread running (`None` if it already is) and builds the
    /// agent its settings call for.
    fn claim(self: &Arc<Self>, thread_id: &str) -> Option<Launch> {
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
    fn forward(
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
        self.drop_if_ephemeral(thread_id);
    }

    fn runner(self: &Arc<Self>, thread_id: &str) -> Runner<AnyStore> {
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

    /// The watched threads not running here, with where their tail is:
    /// what other servers may be writing that watchers here wait for
    /// (`only`: that thread alone, if so).
    pub(crate) fn remote_watched(&self, only: Option<&str>) -> Vec<(String, u64)> {
        self.threads()
            .iter()
            .filter(|(id, slot)| {
                only.is_none_or(|only| only == id.as_str())
                    && !slot.watchers.is_empty()
                    && slot.running.is_none()
            })
            .filter_map(|(id, slot)| Some((id.clone(), slot.tail?)))
            .collect()
    }

    /// The thread's log was passed on up to `seq`.
    pub(crate) fn advance_tail(&self, thread_id: &str, seq: u64) {
        if let Some(slot) = self.threads().get_mut(thread_id) {
            slot.tail = Some(slot.tail.map_or(seq, |tail| tail.max(seq)));
        }
    }

    /// Streams events logged outside a run (a rename, a revert) to the
    /// thread's watchers.
    pub fn publish(&self, thread_id: &str, events: Vec<spool_protocol::ThreadEvent>) {
        for event in events {
            self.broadcast(thread_id, Delivery::Event(Appended::Logged(event)));
        }
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
}

/// What a graceful shutdown needs to know.
impl Hub {
    /// The turns running now, as (thread id, turn id); the turn id is empty
    /// while a turn is still starting.
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
enum TurnOpening {
    User(Vec<UserInput>),
    Review(Review),
    Compact,
}

/// What a run claimed on a thread starts with.
struct Launch {
    hub: Arc<Hub>,
    agent: Arc<Agent>,
    stop: watch::Receiver<bool>,
}

/// Sends a watcher the logged events after `after`, a page at a time as it
/// has room; answers the last seq sent. If the log cannot be read, the
/// watcher is sent `thread/closed` (it resumes by cursor) and `None`.
async fn replay(
    store: &AnyStore,
    thread_id: &str,
    after: u64,
    out: &mpsc::UnboundedSender<Delivery>,
    room: &Room,
) -> Option<u64> {
    const PAGE: usize = 500;
    let mut cursor = after;
    loop {
        let page = match store.events_after(thread_id, cursor, PAGE).await {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!(%thread_id, %error, after = cursor,
                    "cannot read the log to replay: closing this watcher");
                let _ = out.send(crate::ordering::closed_notice(thread_id));
                return None;
            }
        };
        let Some(end) = page.last().map(|e| e.seq) else {
            return Some(cursor);
        };
        for event in page {
            room.wait().await;
            if out.send(Delivery::Event(Appended::Logged(event))).is_err() {
                return None;
            }
            room.sent();
        }
        cursor = end;
    }
}
