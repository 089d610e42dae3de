//! `--listen` URLs and serving every listener at once: `stdio://` (one
//! JSON-RPC message per line), `ws://HOST:PORT` (one per text frame, with
//! `/healthz` and `/readyz` on the same port) and `http://HOST:PORT` (the
//! HTTP API, WebSocket on `/ws`).

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::accept::{self, Limits};
use crate::auth::AuthToken;
use crate::guard::{AccessRules, Guard};
use crate::http::{self, App};
use crate::hub::Hub;
use crate::shutdown::Shutdown;

/// One `--listen` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenUrl {
    Stdio,
    /// `HOST:PORT`.
    Ws(String),
    Http(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(
        "invalid listen URL {url:?}: {reason} (expected stdio://, ws://HOST:PORT or http://HOST:PORT)"
    )]
    BadUrl { url: String, reason: &'static str },
    #[error("stdio:// is given more than once")]
    StdioTwice,
    #[error("cannot listen on {url}: {source}")]
    Bind {
        url: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to listen on {url}: it is not a loopback address and no auth token is set \
         (--auth-token-file PATH or SPOOL_AUTH_TOKEN)"
    )]
    NeedsToken { url: String },
}

impl FromStr for ListenUrl {
    type Err = ListenError;

    fn from_str(url: &str) -> Result<ListenUrl, ListenError> {
        let bad = |reason| ListenError::BadUrl {
            url: url.to_owned(),
            reason,
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
        match scheme {
            "stdio" if rest.is_empty() => return Ok(ListenUrl::Stdio),
            "stdio" => return Err(bad("stdio:// takes no address")),
            "ws" | "http" => {}
            "wss" | "https" => return Err(bad("TLS is not served; put a proxy in front")),
            _ => return Err(bad("unknown scheme")),
        }
        let address = rest.strip_suffix('/').unwrap_or(rest);
        if address.contains(['/', '?', '#', '@']) {
            return Err(bad("only HOST:PORT may follow the scheme"));
        }
        let (host, port) = address.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if port.parse::<u16>().is_err() {
            return Err(bad("the port is not a number from 0 to 65535"));
        }
        Ok(match scheme {
            "ws" => ListenUrl::Ws(address.to_owned()),
            _ => ListenUrl::Http(address.to_owned()),
        })
    }
}

impl ListenUrl {
    fn scheme(&self) -> &'static str {
        match self {
            ListenUrl::Stdio => "stdio",
            ListenUrl::Ws(_) => "ws",
            ListenUrl::Http(_) => "http",
        }
    }
}

struct Bound {
    url: ListenUrl,
    listener: TcpListener,
    address: SocketAddr,
}

/// Listeners bound and checked, not serving yet.
pub struct Listeners {
    stdio: bool,
    bound: Vec<Bound>,
    token: Option<AuthToken>,
    rules: Arc<AccessRules>,
    limits: Limits,
}

impl Listeners {
    /// Binds every network listener. One on a non-loopback address needs a
    /// token; with a token, every network listener requires it. Whatever
    /// the token, each listener refuses other hosts and origins than its
    /// own and those `rules` allow (see [`crate::guard`]).
    pub async fn bind(
        urls: &[ListenUrl],
        token: Option<AuthToken>,
        rules: AccessRules,
    ) -> Result<Listeners, ListenError> {
        let mut stdio = false;
        let mut bound = Vec::new();
        for url in urls {
            let (ListenUrl::Ws(address) | ListenUrl::Http(address)) = url else {
                if stdio {
                    return Err(ListenError::StdioTwice);
                }
                stdio = true;
                continue;
            };
            let shown = format!("{}://{address}", url.scheme());
            let listener = TcpListener::bind(address.as_str())
                .await
                .map_err(|source| ListenError::Bind {
                    url: shown.clone(),
                    source,
                })?;
            let address = listener.local_addr().map_err(|source| ListenError::Bind {
                url: shown.clone(),
                source,
            })?;
            if !address.ip().is_loopback() && token.is_none() {
                return Err(ListenError::NeedsToken { url: shown });
            }
            bound.push(Bound {
                url: url.clone(),
                listener,
                address,
            });
        }
        Ok(Listeners {
            stdio,
            bound,
            token,
            rules: Arc::new(rules),
            limits: Limits::default(),
        })
    }

    /// Connection cap and timeouts of every network listener (see
    /// [`crate::accept`]).
    pub fn with_limits(mut self, limits: Limits) -> Listeners {
        self.limits = limits;
        self
    }

    /// The bound addresses as URLs (with the real port when 0 was given).
    pub fn addresses(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .bound
            .iter()
            .map(|b| format!("{}://{}", b.url.scheme(), b.address))
            .collect();
        if self.stdio {
            out.insert(0, "stdio://".to_owned());
        }
        out
    }

    /// Starts serving every listener.
    pub fn serve(self, hub: Arc<Hub>, shutdown: Shutdown) -> Running {
        let app = App {
            hub: hub.clone(),
            shutdown: shutdown.clone(),
        };
        let limits = self.limits.fit_descriptors(self.bound.len());
        let servers = self
            .bound
            .into_iter()
            .map(|bound| {
                // The guard knows the address it was bound to, with the
                // real port: that is the host clients must address.
                let guard = Guard::new(self.rules.clone(), bound.address);
                let router = match bound.url {
                    ListenUrl::Http(_) => http::router(app.clone(), self.token.clone(), guard),
                    _ => http::ws_router(app.clone(), self.token.clone(), guard),
                };
                let shutdown = shutdown.clone();
                tokio::spawn(accept::serve(bound.listener, router, limits, shutdown))
            })
            .collect::<Vec<_>>();
        let only_stdio = servers.is_empty();
        let stdio = self.stdio.then(|| tokio::spawn(crate::serve_stdio(hub)));
        Running {
            stdio,
            only_stdio,
            servers,
        }
    }
}

/// Listeners being served.
pub struct Running {
    stdio: Option<JoinHandle<()>>,
    only_stdio: bool,
    servers: Vec<JoinHandle<()>>,
}

impl Running {
    /// Resolves when serving ends by itself: standard input ended and stdio
    /// was the only listener. Otherwise only a signal ends a server.
    pub async fn ended(&mut self) {
        match (&mut self.stdio, self.only_stdio) {
            (Some(stdio), true) => {
                let _ = stdio.await;
                self.stdio = None;
            }
            _ => std::future::pending().await,
        }
    }

    /// Waits (at most `patience`) for the network listeners and their
    /// connections to close; call after [`Shutdown::run`].
    pub async fn finish(self, patience: Duration) {
        let all = futures_util::future::join_all(self.servers);
        if tokio::time::timeout(patience, all).await.is_err() {
            tracing::warn!("connections still open at shutdown");
        }
    }
}
