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
use spool_runtime::Agent;
use spool_store::{AnyStore, Appended, PendingRequest, Store, StoreError};
use tokio::sync::{mpsc, watch};

use crate::ceilings::{CeilingError, Ceilings, Fields};
use crate::outbox::Room;

mod questions;
mod turns;

use questions::Waiting;

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
    /// The process's MCP servers, for the MCP methods (`None`: none).
    pub mcp: Option<Arc<dyn crate::McpAdmin>>,
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
    mcp: Option<Arc<dyn crate::McpAdmin>>,
    threads: Mutex<HashMap<String, ThreadSlot>>,
    /// Other processes write the store: watched threads follow their
    /// commits (`tail.rs`).
    pub(crate) follows_remote: std::sync::atomic::AtomicBool,
    /// Answers awaited for server → client requests, by request id.
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Notifications about the server rather than a thread (an MCP
    /// server's start), for every initialized connection: (method, line).
    notices: tokio::sync::broadcast::Sender<(&'static str, Arc<str>)>,
    /// Woken when a thread's turn ends and the thread is free again.
    turn_ended: tokio::sync::Notify,
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
            mcp: options.mcp,
            threads: Mutex::new(HashMap::new()),
            follows_remote: std::sync::atomic::AtomicBool::new(false),
            waiting: Mutex::new(HashMap::new()),
            notices: tokio::sync::broadcast::channel(256).0,
            turn_ended: tokio::sync::Notify::new(),
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

    /// Sends a notification about the server (not about a thread) to
    /// every initialized connection that did not opt out of `method`. Not
    /// logged: a client that connects later asks for the state instead.
    pub fn notice(&self, method: &'static str, params: &impl serde::Serialize) {
        let message = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
        let _ = self.notices.send((method, Arc::from(message.to_string())));
    }

    pub(crate) fn subscribe_notices(
        &self,
    ) -> tokio::sync::broadcast::Receiver<(&'static str, Arc<str>)> {
        self.notices.subscribe()
    }

    /// The process's MCP servers, if it has any.
    pub fn mcp(&self) -> Option<&Arc<dyn crate::McpAdmin>> {
        self.mcp.as_ref()
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

    /// The watched threads not running here, with where their tail is:
    /// what other servers may be writing that watchers here wait for.
    /// `behind`: only those of its threads whose tail is before the seq it
    /// gives (what a notice said their log reaches), if given.
    pub(crate) fn remote_watched(
        &self,
        behind: Option<&HashMap<String, u64>>,
    ) -> Vec<(String, u64)> {
        self.threads()
            .iter()
            .filter(|(_, slot)| !slot.watchers.is_empty() && slot.running.is_none())
            .filter_map(|(id, slot)| Some((id, slot.tail?)))
            .filter(|&(id, tail)| {
                behind.is_none_or(|behind| behind.get(id).is_some_and(|&end| tail < end))
            })
            .map(|(id, tail)| (id.clone(), tail))
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
