//! The app server under test, as a child process, and the client that
//! drives it over stdio or a WebSocket: every message it receives is
//! parsed as JSON, as a real client would.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::ws_client::Client;

/// How long the client waits for any one message.
const WAIT: Duration = Duration::from_secs(120);

/// Which app server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Spool,
    Codex,
    /// The relay floor (`relay.rs`), stdio only.
    Relay,
    /// The relay floor with every delta kept in a synced file
    /// (`relay.rs`), stdio only.
    DurableRelay,
    /// The relay floor with every delta kept as a row of spool's log in a
    /// store file (`store_relay.rs`), stdio only.
    StoreRelay,
}

impl Target {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Target::Spool => "spool",
            Target::Codex => "codex",
            Target::Relay => "relay",
            Target::DurableRelay => "durable-relay",
            Target::StoreRelay => "store-relay",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Stdio,
    WebSocket,
}

impl Transport {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::WebSocket => "websocket",
        }
    }
}

enum Wire {
    Stdio {
        input: ChildStdin,
        output: BufReader<ChildStdout>,
        line: String,
    },
    Ws(Box<Client>),
}

/// A running app server and a client connected to it.
pub(crate) struct Peer {
    child: Child,
    wire: Wire,
    next_id: u64,
}

impl Peer {
    /// Starts `program` (spool, Codex or the relay) in `home` (its
    /// configuration already written there) against the model at
    /// `model_url`; spool on the store `store` (`SPOOL_STORE`), else on
    /// the default store of its home.
    pub(crate) async fn start(
        target: Target,
        program: &Path,
        transport: Transport,
        home: &Path,
        model_url: &str,
        store: Option<&str>,
    ) -> anyhow::Result<Peer> {
        let port = match transport {
            Transport::Stdio => None,
            Transport::WebSocket => Some(free_port()?),
        };
        let listen = match port {
            None => "stdio://".to_owned(),
            Some(port) => format!("ws://127.0.0.1:{port}"),
        };
        let mut command = Command::new(program);
        match target {
            Target::Spool => {
                command
                    .args(["serve", "--listen", &listen])
                    .env("SPOOL_HOME", home)
                    .env_remove("SPOOL_STORE");
                if let Some(store) = store {
                    command.env("SPOOL_STORE", store);
                }
            }
            Target::Codex => {
                command
                    .args(["app-server", "--listen", &listen])
                    .env("CODEX_HOME", home);
            }
            Target::Relay | Target::DurableRelay | Target::StoreRelay => {
                anyhow::ensure!(port.is_none(), "the relay floors run over stdio only");
                command.args(["bench", "relay", "--model-url", model_url]);
                match target {
                    Target::DurableRelay => {
                        command.arg("--log").arg(home.join("deltas.log"));
                    }
                    Target::StoreRelay => {
                        command.arg("--store").arg(super::store_relay::path(home));
                    }
                    _ => {}
                }
            }
        }
        let log = std::fs::File::create(home.join("server.log"))?;
        command
            .current_dir(home)
            .env_remove("OPENAI_API_KEY")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let wire = match port {
            None => Wire::Stdio {
                input: child.stdin.take().context("no stdin")?,
                output: BufReader::with_capacity(
                    1 << 20,
                    child.stdout.take().context("no stdout")?,
                ),
                line: String::new(),
            },
            Some(port) => Wire::Ws(Box::new(connect(port).await?)),
        };
        Ok(Peer {
            child,
            wire,
            next_id: 1,
        })
    }

    /// The child's process id (for its CPU time).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub(crate) async fn send(&mut self, message: Value) -> anyhow::Result<()> {
        match &mut self.wire {
            Wire::Stdio { input, .. } => {
                let mut line = message.to_string();
                line.push('\n');
                input.write_all(line.as_bytes()).await?;
                input.flush().await?;
            }
            Wire::Ws(client) => client.send(message).await?,
        }
        Ok(())
    }

    /// Sends a request; returns its id.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// The next message, parsed, and when it arrived (before parsing).
    /// A request from the server is refused at once and skipped.
    pub(crate) async fn next(&mut self) -> anyhow::Result<(Value, Instant)> {
        loop {
            let text = tokio::time::timeout(WAIT, self.read())
                .await
                .context("no message from the server in time")??;
            let at = Instant::now();
            let message: Value = serde_json::from_str(&text).with_context(|| {
                format!("not JSON: {}", text.chars().take(200).collect::<String>())
            })?;
            if message.get("method").is_some() && message.get("id").is_some() {
                let refusal = json!({"jsonrpc": "2.0", "id": message["id"],
                    "error": {"code": -32601, "message": "the bench answers no requests"}});
                self.send(refusal).await?;
                continue;
            }
            return Ok((message, at));
        }
    }

    async fn read(&mut self) -> anyhow::Result<String> {
        match &mut self.wire {
            Wire::Stdio { output, line, .. } => {
                line.clear();
                if output.read_line(line).await? == 0 {
                    bail!("the server closed its stdout");
                }
                Ok(line.trim_end().to_owned())
            }
            Wire::Ws(client) => client.read_frame().await,
        }
    }

    /// A request and its result (notifications before the reply are
    /// dropped).
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.request(method, params).await?;
        loop {
            let (message, _) = self.next().await?;
            if message.get("method").is_none() && message["id"] == json!(id) {
                if let Some(error) = message.get("error") {
                    bail!("{method} failed: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
    }

    /// `initialize` and `initialized`.
    pub(crate) async fn initialize(&mut self) -> anyhow::Result<()> {
        self.call(
            "initialize",
            json!({"clientInfo": {"name": "spool-bench", "title": null, "version": "0.1.0"}}),
        )
        .await?;
        self.send(json!({"jsonrpc": "2.0", "method": "initialized"}))
            .await
    }

    /// `thread/start`; the thread's id.
    pub(crate) async fn start_thread(&mut self) -> anyhow::Result<String> {
        let result = self.call("thread/start", json!({})).await?;
        result["thread"]["id"]
            .as_str()
            .map(str::to_owned)
            .context("thread/start returned no thread id")
    }

    /// Kills the server with `SIGKILL`, as a crash would, and reaps it.
    pub(crate) async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    pub(crate) async fn stop(mut self) {
        // Closing stdin (or the socket) asks the server to stop; then it is
        // killed if it lingers.
        drop(self.wire);
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// CPU time (user + system) the process has used so far, all its threads
/// (`/proc/PID/stat`, clock ticks of 10 ms on Linux).
pub(crate) fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces: count fields after its `)`.
    let rest = stat.rsplit_once(')').context("a bad /proc stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |n: usize| -> anyhow::Result<u64> {
        Ok(fields.get(n).context("a short /proc stat")?.parse()?)
    };
    // Fields 14 and 15 of the whole line: 12 and 13 after the name.
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 10))
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Connects once the server listens (it was just started).
async fn connect(port: u16) -> anyhow::Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr = format!("127.0.0.1:{port}");
    loop {
        match Client::connect(&addr).await {
            Ok(client) => return Ok(client),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => return Err(error).context("the server never listened"),
        }
    }
}
