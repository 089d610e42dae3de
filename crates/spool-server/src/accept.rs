//! Accepting network connections with limits, so no client can hold the
//! server's resources forever:
//!
//! - **A cap per listener** ([`Limits::max_connections`]): a connection
//!   beyond it is answered `503 too_many_connections` and closed at once.
//!   Descriptors are what a flood exhausts first, and the store needs them
//!   to open its files: [`Limits::fit_descriptors`] raises the process's
//!   soft descriptor limit toward the hard one and lowers the caps until
//!   every listener's connections fit with room to spare.
//! - **A header timeout that is also the idle timeout**
//!   ([`Limits::header_timeout`]): a request's header must arrive whole
//!   within it, and a kept-alive connection that starts no new request
//!   within it is closed (hyper starts the timer whenever the connection
//!   waits for a request). A half-open connection is gone after it.
//! - **TCP keepalive** on every connection, so a peer that vanished
//!   without a word (a WebSocket client whose machine went away) is
//!   noticed and its connection freed.
//!
//! A connection counts against the cap for as long as its socket lives,
//! WebSocket sessions included: the permit travels with the socket into
//! the upgraded stream.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::shutdown::Shutdown;

/// What each network listener allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections per listener (WebSocket sessions included).
    pub max_connections: usize,
    /// How long a request's header may take to arrive, and how long a
    /// kept-alive connection may wait between requests.
    pub header_timeout: Duration,
}

/// Connections per listener by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1_024;
/// The header (and idle) timeout by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Descriptors kept for everything but connections: the store's files and
/// reader connections, tool processes' pipes, the model's sockets.
const DESCRIPTORS_KEPT: u64 = 256;
/// TCP keepalive: first probe after this much silence.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 6;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

impl Limits {
    /// Makes `listeners` listeners' connections fit in the process's
    /// descriptors: raises the soft limit as far as the hard limit allows,
    /// then, if they still would not fit beside [`DESCRIPTORS_KEPT`], lowers
    /// the cap (with a warning). Returns the limits to use.
    pub fn fit_descriptors(self, listeners: usize) -> Limits {
        if listeners == 0 {
            return self;
        }
        let wanted = (self.max_connections as u64)
            .saturating_mul(listeners as u64)
            .saturating_add(DESCRIPTORS_KEPT);
        let available = raise_descriptor_limit(wanted);
        if available >= wanted {
            return self;
        }
        let fits = available.saturating_sub(DESCRIPTORS_KEPT) / listeners as u64;
        let max_connections = usize::try_from(fits).unwrap_or(usize::MAX).max(1);
        tracing::warn!(
            asked = self.max_connections,
            allowed = max_connections,
            descriptors = available,
            "too few file descriptors for --max-connections: lowered"
        );
        Limits {
            max_connections,
            ..self
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` toward `wanted` (at most the hard
/// limit); answers the soft limit in force afterwards.
fn raise_descriptor_limit(wanted: u64) -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted; // unknown: trust the caller's numbers
    };
    if soft >= wanted {
        return soft;
    }
    let target = wanted.min(hard);
    match setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
        Ok(()) => target,
        Err(error) => {
            tracing::debug!(%error, "cannot raise the descriptor limit");
            soft
        }
    }
}

/// Serves `router` on `listener` until the shutdown drains, within `limits`;
/// then lets open requests finish and returns once their connections are
/// closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: Shutdown,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut connections = tokio::task::JoinSet::new();
    let refusals = Refusals::default();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let draining = shutdown.draining();
    tokio::pin!(draining);
    loop {
        let tcp = tokio::select! {
            _ = &mut draining => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(error) => {
                    // Out of descriptors, say: wait a moment rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refusals.note(limits.max_connections);
            tokio::spawn(refuse(tcp));
            continue;
        };
        tune(&tcp);
        let io = TokioIo::new(Counted {
            tcp,
            _permit: permit,
        });
        let service = TowerToHyperService::new(router.clone());
        let connection = builder.serve_connection(io, service).with_upgrades();
        let shutdown = shutdown.clone();
        while connections.try_join_next().is_some() {}
        connections.spawn(async move {
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = &mut connection => ended,
                _ = shutdown.draining() => {
                    // Finish the request in flight, take no other.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = ended {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.join_all().await;
}

/// Nagle off (each message is written as one frame and must not wait for
/// the ACK of the previous one) and TCP keepalive on.
fn tune(tcp: &TcpStream) {
    if let Err(error) = tcp.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    if let Err(error) = socket2::SockRef::from(tcp).set_tcp_keepalive(&keepalive) {
        tracing::debug!(%error, "cannot set TCP keepalive");
    }
}

const REFUSAL_BODY: &str = r#"{"error":{"code":"too_many_connections","message":"this listener has as many connections open as it allows; retry later"}}"#;

/// Tells a connection beyond the cap why it is closed, without reading it.
async fn refuse(mut tcp: TcpStream) {
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{REFUSAL_BODY}",
        REFUSAL_BODY.len()
    );
    let write = async {
        tcp.write_all(response.as_bytes()).await?;
        tcp.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Logs refusals at most once a second, with how many there were.
#[derive(Default)]
struct Refusals {
    count: AtomicU64,
    last_log: std::sync::Mutex<Option<Instant>>,
}

impl Refusals {
    fn note(&self, cap: usize) {
        let count = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let Ok(mut last) = self.last_log.lock() else {
            return;
        };
        if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            *last = Some(Instant::now());
            tracing::warn!(
                cap,
                refused = count,
                "connection refused: listener at its cap"
            );
        }
    }
}

/// A connection's socket holding its place under the cap until dropped
/// (after an upgrade, the WebSocket owns it).
struct Counted {
    tcp: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}
