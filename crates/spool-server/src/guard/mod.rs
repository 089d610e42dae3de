//! Who may connect: the checks every request to a network listener passes
//! before routing, the bearer token and any handler (health probes
//! excepted), with or without a token.
//!
//! A listener on loopback needs no token, so without these checks any web
//! page the user visits could drive it: a page's script may open a
//! WebSocket to `ws://127.0.0.1:PORT` (no CORS applies to WebSockets) or
//! send a "simple" cross-site POST (`Content-Type: text/plain`, no
//! preflight), and DNS rebinding (a name of the attacker's that later
//! resolves to 127.0.0.1) makes even same-origin requests reach it.
//! Browsers always say where a request comes from and whom it addresses,
//! so:
//!
//! 1. **Host** (421 Misdirected Request): the authority the client
//!    addressed (`Host`, and the request target's authority when it has
//!    one) must be this listener: its bound `ip:port`; on a loopback
//!    listener also `localhost:PORT` and the loopback IP of its family; on
//!    a wildcard listener (0.0.0.0, ::) any IP literal and `localhost`,
//!    with its port. Plus the names the operator allows (`--allow-host`,
//!    and the hosts of `--allow-origin` URLs). An IP literal or
//!    `localhost` cannot be rebound; an unknown name can. A request
//!    without a host is refused.
//! 2. **Origin** (403): a request that carries `Origin` (a browser's) is
//!    refused unless the origin is the listener's own (`http://` + the
//!    host it addressed, already checked) or given with `--allow-origin`.
//!    `null` never matches. Requests without `Origin` (curl, SDKs, the
//!    Codex TUI) are not browsers' and pass.
//! 3. **JSON only for state changes** (415): a request with any method but
//!    GET, HEAD, OPTIONS and TRACE must say `Content-Type:
//!    application/json`, which a browser cannot send cross-site without a
//!    CORS preflight, and no CORS header is ever sent, so a preflight fails.
//!
//! Refusals are logged at `warn` with the refused value (never a header
//! that could carry the token).

mod names;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
pub use names::{AccessRuleError, AllowedHost, Origin};
use names::{Authority, HostName};

/// What the operator lets in besides each listener's own address and
/// origin.
#[derive(Debug, Clone, Default)]
pub struct AccessRules {
    origins: Vec<Origin>,
    hosts: Vec<AllowedHost>,
}

impl AccessRules {
    /// Every host of `origins` is an allowed host too (on any port): a page
    /// of an allowed origin is served through a proxy that may keep its
    /// `Host`.
    pub fn new(origins: Vec<Origin>, mut hosts: Vec<AllowedHost>) -> AccessRules {
        hosts.extend(origins.iter().map(|origin| AllowedHost {
            host: origin.host().clone(),
            port: None,
        }));
        AccessRules { origins, hosts }
    }
}

/// The rules as one listener applies them.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    rules: Arc<AccessRules>,
    listener: SocketAddr,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The `Host` (or request target) as given; `None` when absent.
    Host(Option<String>),
    /// The `Origin` as given.
    Origin(String),
    /// The `Content-Type` as given; `None` when absent.
    MediaType(Option<String>),
}

/// A header value as text for messages and logs: lossy, and cut short so
/// a huge header does not flood the log.
fn shown(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.into_owned(),
    }
}

impl Guard {
    pub(crate) fn new(rules: Arc<AccessRules>, listener: SocketAddr) -> Guard {
        Guard { rules, listener }
    }

    /// Runs the three checks in order: host, origin, media type.
    pub(crate) fn check(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Result<(), Refusal> {
        let addressed = self.check_host(uri, headers)?;
        for origin in headers.get_all(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(|text| text.parse::<Origin>().ok())
                .is_some_and(|origin| {
                    origin == Origin::http(&addressed) || self.rules.origins.contains(&origin)
                });
            if !allowed {
                return Err(Refusal::Origin(shown(origin.as_bytes())));
            }
        }
        let safe = matches!(
            *method,
            Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
        );
        if !safe {
            // Exactly one Content-Type: with two, which one a parser
            // believes is a guess.
            let mut types = headers.get_all(header::CONTENT_TYPE).iter();
            let (Some(given), None) = (types.next(), types.next()) else {
                let first = headers.get(header::CONTENT_TYPE);
                return Err(Refusal::MediaType(first.map(|v| shown(v.as_bytes()))));
            };
            if !is_json(given.as_bytes()) {
                return Err(Refusal::MediaType(Some(shown(given.as_bytes()))));
            }
        }
        Ok(())
    }

    /// The authority the client addressed, once every one the request
    /// names (the target's, `Host`) is this listener's.
    fn check_host(&self, uri: &Uri, headers: &HeaderMap) -> Result<Authority, Refusal> {
        let mut hosts = headers.get_all(header::HOST).iter();
        let host = hosts.next();
        if let Some(second) = hosts.next() {
            return Err(Refusal::Host(Some(shown(second.as_bytes()))));
        }
        let mut addressed = None;
        let named = uri
            .authority()
            .map(|a| a.as_str().as_bytes())
            .into_iter()
            .chain(host.map(|h| h.as_bytes()));
        for given in named {
            let authority = std::str::from_utf8(given)
                .ok()
                .and_then(|text| Authority::parse(text).ok())
                .filter(|authority| self.answers_to(authority))
                .ok_or_else(|| Refusal::Host(Some(shown(given))))?;
            addressed = Some(authority);
        }
        addressed.ok_or(Refusal::Host(None))
    }

    /// Whether `authority` names this listener without trusting DNS, or is
    /// a name the operator allowed.
    fn answers_to(&self, authority: &Authority) -> bool {
        if self.rules.hosts.iter().any(|host| host.matches(authority)) {
            return true;
        }
        if authority.port.unwrap_or(80) != self.listener.port() {
            return false;
        }
        let bound = self.listener.ip();
        match &authority.host {
            // Reached through any interface: whatever address the client
            // used is one of ours (and such a listener needs the token).
            HostName::Ip(_) if bound.is_unspecified() => true,
            HostName::Ip(ip) => *ip == bound || (bound.is_loopback() && *ip == loopback_of(bound)),
            HostName::Name(name) => {
                name == "localhost" && (bound.is_loopback() || bound.is_unspecified())
            }
        }
    }
}

/// The usual loopback address of `ip`'s family (what `localhost` is).
fn loopback_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

/// `application/json`, parameters (`; charset=utf-8`) allowed, any case.
fn is_json(content_type: &[u8]) -> bool {
    let media_type = content_type.split(|&b| b == b';').next().unwrap_or(b"");
    media_type
        .trim_ascii()
        .eq_ignore_ascii_case(b"application/json")
}

impl Refusal {
    fn into_error(self) -> ApiError {
        match self {
            Refusal::Host(given) => {
                let what = match &given {
                    Some(host) => format!("this listener does not answer to host {host:?}"),
                    None => "a request must say which host it addresses (Host)".to_owned(),
                };
                ApiError::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "misdirected_request",
                    format!(
                        "{what}: it answers to its own address (and localhost on loopback); \
                         spool serve --allow-host NAME[:PORT] lets another name in"
                    ),
                )
            }
            Refusal::Origin(origin) => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                format!(
                    "requests from origin {origin:?} are refused: only the listener's own origin \
                     and those given with spool serve --allow-origin URL are let in"
                ),
            ),
            Refusal::MediaType(given) => {
                let got = match &given {
                    Some(media_type) => format!("got {media_type:?}"),
                    None => "got no Content-Type".to_owned(),
                };
                ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    format!(
                        "a request that changes state must send a JSON body with \
                         Content-Type: application/json ({got})"
                    ),
                )
            }
        }
    }

    fn log(&self, listener: SocketAddr, method: &Method, path: &str) {
        // `?` quotes and escapes what the client sent: a header cannot
        // forge a log line.
        match self {
            Refusal::Host(host) => {
                tracing::warn!(?host, %listener, %method, path, "refused a request for another host")
            }
            Refusal::Origin(origin) => {
                tracing::warn!(?origin, %listener, %method, path, "refused a cross-origin request")
            }
            Refusal::MediaType(content_type) => {
                tracing::warn!(?content_type, %listener, %method, path, "refused a request that is not JSON")
            }
        }
    }
}

/// Middleware: the checks above, before anything else looks at the
/// request.
pub(crate) async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match guard.check(request.method(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            refusal.log(guard.listener, request.method(), request.uri().path());
            refusal.into_error().into_response()
        }
    }
}

#[cfg(test)]
mod tests;
