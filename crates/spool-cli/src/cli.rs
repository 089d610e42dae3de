//! The command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::provider_choice::ProviderArgs;

/// spool: a durable runtime for AI agents.
#[derive(Debug, Parser)]
#[command(name = "spool", version, about)]
pub struct Cli {
    /// The store: a SQLite file (default: $SPOOL_HOME/spool.db, with
    /// SPOOL_HOME defaulting to ~/.spool), or a PostgreSQL database,
    /// `postgres://user[:password]@host[:port]/db` (several servers may
    /// share one; see "Running several servers" in the README).
    // The value is never shown in help: a URL may hold a password.
    #[arg(long, global = true, env = "SPOOL_STORE", hide_env_values = true)]
    pub store: Option<PathBuf>,
    /// Open a store that lost committed data (its -wal file deleted or
    /// damaged, the file truncated) instead of refusing it.
    #[arg(long, global = true)]
    pub accept_data_loss: bool,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// A Codex config override for `serve`/`app-server`, `key=value` with a
    /// TOML value, repeatable, before or after the subcommand (as `codex
    /// -c … app-server`): `model`, `model_provider`, `approval_policy`,
    /// `sandbox_mode`, `model_providers.NAME.base_url` and `…wire_api`
    /// apply; other keys are ignored with a warning.
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE", global = true)]
    pub config_overrides: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one turn: send the prompt, stream the reply, persist every item.
    Run(RunArgs),
    /// Resume a thread's run paused on an approval (asking again on the
    /// terminal).
    Resume(ResumeArgs),
    /// Serve Codex app-server v2 JSON-RPC (stdio, WebSocket) and the HTTP API.
    /// Also `spool app-server`, as tools that launch `codex app-server`
    /// spell it.
    #[command(alias = "app-server")]
    Serve(ServeArgs),
    /// Open the trace viewer: serve the HTTP API and its web page on a free
    /// loopback port with a fresh bearer token, and print the page's URL
    /// (holding the token) on stdout. Runs until SIGINT or SIGTERM.
    Trace(TraceArgs),
    /// Inspect stored threads.
    #[command(subcommand)]
    Threads(ThreadsCommand),
    /// MCP servers configured in `$SPOOL_HOME/spool.toml`.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Benchmarks (JSON on stdout).
    #[command(subcommand)]
    Bench(spool_bench::BenchCommand),
    /// Internal: confine this process (Landlock, seccomp, read-only
    /// mounts) and run a command in it. spool starts itself this way for
    /// every sandboxed command.
    #[command(hide = true)]
    SandboxExec(SandboxExecArgs),
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start each configured server, and print its state and its tools;
    /// exits with 1 when a server marked `required` cannot start.
    List {
        /// JSON Lines, one server per line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct SandboxExecArgs {
    /// A directory the command may write beneath (none: read-only).
    #[arg(long)]
    pub writable: Vec<PathBuf>,
    /// A path beneath a writable root that stays read-only.
    #[arg(long)]
    pub protect: Vec<PathBuf>,
    /// Allow network sockets.
    #[arg(long)]
    pub network: bool,
    /// Do not confine the command (a command a person let out of the
    /// sandbox): it still dies with the process that started it.
    #[arg(long, conflicts_with_all = ["writable", "protect", "network"])]
    pub unconfined: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub argv: Vec<std::ffi::OsString>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What to ask.
    pub prompt: String,
    /// Continue this thread (its history goes to the model) instead of
    /// starting a new one.
    #[arg(long)]
    pub thread: Option<String>,
    /// System instructions for the model.
    #[arg(long)]
    pub instructions: Option<String>,
    /// Token budget of the history sent to the model.
    #[arg(long)]
    pub history_tokens: Option<usize>,
    /// Cap on the tokens the model may write in its reply.
    #[arg(long)]
    pub max_output_tokens: Option<u32>,
    /// Print the time to the first token and the total time to stderr.
    #[arg(long)]
    pub timings: bool,
    /// Who owns the conversation history of a new thread: `replay` (spool
    /// sends its history each time), `previous-response-id` or
    /// `conversation-id` (the Responses API keeps it; each request carries
    /// only what it lacks). Fixed for the thread's life.
    #[arg(long, value_enum)]
    pub history_mode: Option<HistoryModeArg>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistoryModeArg {
    Replay,
    PreviousResponseId,
    ConversationId,
}

impl HistoryModeArg {
    pub fn mode(self) -> spool_protocol::HistoryMode {
        match self {
            HistoryModeArg::Replay => spool_protocol::HistoryMode::Replay,
            HistoryModeArg::PreviousResponseId => spool_protocol::HistoryMode::PreviousResponseId,
            HistoryModeArg::ConversationId => spool_protocol::HistoryMode::ConversationId,
        }
    }
}

/// What the agent may do, and what needs a person first.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Tools the agent may call, comma-separated, or `none` (default:
    /// none for `run` and `resume`; shell, apply_patch and update_plan for
    /// `serve`, as Codex offers).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub tools: Vec<ToolArg>,
    /// When to ask before a tool runs: untrusted, on-failure, on-request, never.
    #[arg(long, default_value = "on-request")]
    pub approval_policy: spool_protocol::AskForApproval,
    /// What tools may do unasked: read-only, workspace-write, danger-full-access.
    #[arg(long, default_value = "workspace-write")]
    pub sandbox: spool_protocol::SandboxMode,
    /// Most model calls in one turn.
    #[arg(long, default_value_t = 10)]
    pub max_turns: u32,
    /// What to do when the kernel cannot sandbox commands (no Landlock):
    /// `refuse` to start (the default), or `classify` commands as spool
    /// did without a sandbox (only known read-only commands run unasked).
    #[arg(long, value_enum, default_value = "refuse")]
    pub sandbox_fallback: SandboxFallbackArg,
    /// An environment variable commands get although its name looks like
    /// a secret (`*_KEY`, `*_TOKEN`, `AWS_*`, …); repeatable.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxFallbackArg {
    Refuse,
    Classify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolArg {
    Shell,
    /// Spelled as the model calls it.
    #[value(name = "apply_patch")]
    ApplyPatch,
    #[value(name = "update_plan")]
    UpdatePlan,
    #[value(name = "view_image")]
    ViewImage,
    /// No tools at all.
    None,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Where to listen, once or more: `stdio://` (one JSON-RPC message per
    /// line), `ws://HOST:PORT` (one per WebSocket text frame; `/healthz`,
    /// `/readyz`), `http://HOST:PORT` (the HTTP API + SSE, WebSocket on
    /// `/ws`). Port 0 picks a free port; the bound addresses are printed on
    /// stderr.
    #[arg(long, default_value = "stdio://")]
    pub listen: Vec<String>,
    /// A file holding the bearer token WebSocket and HTTP clients must send
    /// (`Authorization: Bearer …`); required to listen on a non-loopback
    /// address. Else SPOOL_AUTH_TOKEN.
    #[arg(long)]
    pub auth_token_file: Option<std::path::PathBuf>,
    /// A web origin (`scheme://host[:port]`) whose pages may use the
    /// WebSocket and HTTP listeners. A request carrying `Origin` (browsers
    /// send it on WebSockets and every write) is refused (403) unless it is
    /// the listener's own or given here. Repeatable; else
    /// SPOOL_ALLOW_ORIGIN, comma-separated.
    #[arg(
        long,
        value_name = "URL",
        env = "SPOOL_ALLOW_ORIGIN",
        value_delimiter = ','
    )]
    pub allow_origin: Vec<spool_server::Origin>,
    /// A host name clients may address the listeners by (`Host`), on any
    /// port or only PORT, besides each listener's own address (and
    /// localhost on loopback); others are refused (421). The hosts of
    /// --allow-origin are allowed too. Repeatable; else SPOOL_ALLOW_HOST,
    /// comma-separated.
    #[arg(
        long,
        value_name = "NAME[:PORT]",
        env = "SPOOL_ALLOW_HOST",
        value_delimiter = ','
    )]
    pub allow_host: Vec<spool_server::AllowedHost>,
    /// The most permissive approval policy a client may ask for (untrusted
    /// < on-failure < on-request < never), on every listener. Else
    /// `[requirements] max_approval_policy` in spool.toml; unset: no limit.
    #[arg(long, value_name = "POLICY")]
    pub max_approval_policy: Option<spool_protocol::AskForApproval>,
    /// The most permissive sandbox a client may ask for (read-only <
    /// workspace-write < danger-full-access). Else `[requirements]
    /// max_sandbox`; unset: no limit.
    #[arg(long, value_name = "MODE")]
    pub max_sandbox: Option<spool_protocol::SandboxMode>,
    /// A directory a client's `cwd` must lie within (after resolving `..`
    /// and symlinks); repeatable. Else `[requirements] allowed_roots`;
    /// unset: any directory.
    #[arg(long = "allowed-root", value_name = "PATH")]
    pub allowed_roots: Vec<PathBuf>,
    /// The most text characters one turn's input (or one steer) may carry;
    /// more is refused with -32602 (HTTP 400). Codex's limit by default.
    #[arg(long, value_name = "N", default_value_t = spool_server::DEFAULT_MAX_INPUT_CHARS)]
    pub max_input_chars: usize,
    /// Open connections each network listener allows (WebSocket sessions
    /// included); one more is answered 503 and closed. Lowered, with a
    /// warning, if the process's file descriptors cannot hold them all.
    #[arg(long, value_name = "N", default_value_t = spool_server::accept::DEFAULT_MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Seconds a request's header may take to arrive whole, and a
    /// kept-alive HTTP connection may stay idle between requests.
    #[arg(long, value_name = "SECS", default_value_t = spool_server::accept::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Defaults for threads that do not set their own; they must lie within
    /// the ceilings above.
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// The thread the page opens on (it must exist in the store).
    pub thread: Option<String>,
    /// Open the URL in a browser too (`xdg-open`).
    #[arg(long)]
    pub open: bool,
    /// No bearer token: any local user can reach a loopback port, so
    /// without one they can read every thread while this runs.
    #[arg(long)]
    pub no_token: bool,
    /// Defaults for threads the page starts (forks), as `serve` has them.
    #[command(flatten)]
    pub agent: AgentArgs,
}

impl TraceArgs {
    /// `spool serve`'s arguments for the trace server: one HTTP listener
    /// on a free loopback port, everything else at serve's defaults.
    pub fn serve_args(&self) -> ServeArgs {
        ServeArgs {
            listen: vec!["http://127.0.0.1:0".to_owned()],
            auth_token_file: None,
            allow_origin: Vec::new(),
            allow_host: Vec::new(),
            max_approval_policy: None,
            max_sandbox: None,
            allowed_roots: Vec::new(),
            max_input_chars: spool_server::DEFAULT_MAX_INPUT_CHARS,
            max_connections: spool_server::accept::DEFAULT_MAX_CONNECTIONS as u32,
            header_timeout: spool_server::accept::DEFAULT_HEADER_TIMEOUT.as_secs(),
            agent: self.agent.clone(),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The thread whose paused run to resume.
    pub thread: String,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// List threads, newest first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// JSON Lines, one thread per line.
        #[arg(long)]
        json: bool,
    },
    /// Show a thread's items in a view.
    Show {
        id: String,
        #[arg(long, value_enum, default_value_t = ViewArg::Client)]
        view: ViewArg,
        /// Token budget of the `llm` view.
        #[arg(long)]
        tokens: Option<usize>,
        /// JSON Lines: one item per line (for `llm`, one model input item per line).
        #[arg(long)]
        json: bool,
    },
    /// Print a thread's event log as JSON Lines (`seq`, `atMs`, `method`, `params`).
    Events {
        id: String,
        /// Only events after this seq.
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ViewArg {
    All,
    Client,
    Llm,
}

impl ViewArg {
    pub fn view(self) -> spool_core::View {
        match self {
            ViewArg::All => spool_core::View::All,
            ViewArg::Client => spool_core::View::Client,
            ViewArg::Llm => spool_core::View::Llm,
        }
    }
}
