//! Origins (`scheme://host[:port]`) and hosts (`host[:port]`) as the
//! guard compares them: scheme and name lowercased, IP addresses parsed
//! (so `[0:0::1]` is `[::1]`), the default port of http/ws (80) and
//! https/wss (443) filled in. Anything that does not parse is refused by
//! the caller, never guessed at.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A host as a URL or `Host` header names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum HostName {
    Ip(IpAddr),
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            HostName::Ip(ip) => write!(f, "{ip}"),
            HostName::Name(name) => f.write_str(name),
        }
    }
}

/// `host[:port]`: a `Host` header, a request's authority, an allowed host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority {
    pub host: HostName,
    pub port: Option<u16>,
}

impl Authority {
    pub fn parse(text: &str) -> Result<Authority, &'static str> {
        if text.is_empty() {
            return Err("no host");
        }
        if text.contains('@') {
            return Err("user info is not allowed");
        }
        if let Some(rest) = text.strip_prefix('[') {
            let (ip, after) = rest.split_once(']').ok_or("an unclosed [")?;
            let ip: Ipv6Addr = ip.parse().map_err(|_| "not an IPv6 address inside [ ]")?;
            let port = match after {
                "" => None,
                _ => Some(parse_port(
                    after.strip_prefix(':').ok_or("text after the ]")?,
                )?),
            };
            return Ok(Authority {
                host: HostName::Ip(IpAddr::V6(ip)),
                port,
            });
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(parse_port(port)?)),
            None => (text, None),
        };
        if host.contains(':') {
            return Err("an IPv6 address must be written inside [ ]");
        }
        Ok(Authority {
            host: parse_host(host)?,
            port,
        })
    }
}

fn parse_port(text: &str) -> Result<u16, &'static str> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the port is not a number");
    }
    text.parse().map_err(|_| "the port is not from 0 to 65535")
}

fn parse_host(text: &str) -> Result<HostName, &'static str> {
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Ok(HostName::Ip(IpAddr::V4(ip)));
    }
    // `localhost.` and `localhost` are the same name to a resolver.
    let name = text.strip_suffix('.').unwrap_or(text);
    if name.is_empty() {
        return Err("no host");
    }
    // Browsers send international names as punycode, so plain ASCII is
    // all a real name needs.
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err("the host has characters a host name cannot have");
    }
    Ok(HostName::Name(name.to_ascii_lowercase()))
}

/// A web origin, as browsers send it in `Origin` and as `--allow-origin`
/// gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: HostName,
    /// The explicit port, else the scheme's default; `None` only for a
    /// scheme without one.
    port: Option<u16>,
}

impl Origin {
    /// The origin of a page served over plain HTTP by the host the client
    /// addressed (`Host`): the listener's own origin.
    pub(crate) fn http(authority: &Authority) -> Origin {
        Origin {
            scheme: "http".to_owned(),
            host: authority.host.clone(),
            port: Some(authority.port.unwrap_or(80)),
        }
    }

    pub(crate) fn host(&self) -> &HostName {
        &self.host
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

/// Why a text is not an origin or a host (the caller says which text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessRuleError {
    #[error(
        "invalid origin {given:?}: {reason} (expected scheme://host[:port] with nothing after, \
         e.g. http://app.example:8080)"
    )]
    BadOrigin { given: String, reason: &'static str },
    #[error("invalid host {given:?}: {reason} (expected NAME[:PORT], e.g. spool.internal:4501)")]
    BadHost { given: String, reason: &'static str },
}

impl FromStr for Origin {
    type Err = AccessRuleError;

    fn from_str(text: &str) -> Result<Origin, AccessRuleError> {
        // `a, b` in SPOOL_ALLOW_ORIGIN.
        let text = text.trim();
        let bad = |reason| AccessRuleError::BadOrigin {
            given: text.to_owned(),
            reason,
        };
        if text == "null" {
            // Sandboxed frames, file:// pages and redirects send `null`:
            // every one of them would be let in by allowing it.
            return Err(bad(
                "null is the origin of pages with no origin; it cannot be allowed",
            ));
        }
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme://"))?;
        let mut letters = scheme.bytes();
        let scheme_ok = letters.next().is_some_and(|b| b.is_ascii_alphabetic())
            && letters.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        if !scheme_ok {
            return Err(bad("the scheme is not a URL scheme"));
        }
        // A pasted URL's final slash is harmless; a path is not an origin.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(bad("an origin has no path, query or fragment"));
        }
        let authority = Authority::parse(rest).map_err(bad)?;
        let scheme = scheme.to_ascii_lowercase();
        let port = authority.port.or_else(|| default_port(&scheme));
        Ok(Origin {
            scheme,
            host: authority.host,
            port,
        })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) if Some(port) != default_port(&self.scheme) => write!(f, ":{port}"),
            _ => Ok(()),
        }
    }
}

/// A host name (or IP) clients may address a listener by besides its own
/// address: `NAME` on any port, `NAME:PORT` on that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    pub(crate) host: HostName,
    pub(crate) port: Option<u16>,
}

impl AllowedHost {
    pub(crate) fn matches(&self, authority: &Authority) -> bool {
        self.host == authority.host
            && self
                .port
                .is_none_or(|port| port == authority.port.unwrap_or(80))
    }
}

impl FromStr for AllowedHost {
    type Err = AccessRuleError;

    fn from_str(text: &str) -> Result<AllowedHost, AccessRuleError> {
        let text = text.trim();
        let bad = |reason| AccessRuleError::BadHost {
            given: text.to_owned(),
            reason,
        };
        if text.contains(['/', '?', '#']) {
            return Err(bad("a host has no scheme or path"));
        }
        let Authority { host, port } = Authority::parse(text).map_err(bad)?;
        Ok(AllowedHost { host, port })
    }
}

impl fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(text: &str) -> Origin {
        text.parse()
            .unwrap_or_else(|e| panic!("{text} should parse: {e}"))
    }

    #[test]
    fn origins_compare_after_normalising_case_and_default_ports() {
        assert_eq!(
            origin("HTTP://App.Example"),
            origin("http://app.example:80")
        );
        assert_eq!(
            origin("https://app.example"),
            origin("https://app.example:443")
        );
        assert_eq!(
            origin("http://app.example:8080/"),
            origin("http://app.example:8080")
        );
        assert_eq!(origin("http://[0:0::1]:9"), origin("http://[::1]:9"));
        assert_ne!(
            origin("http://app.example:8080"),
            origin("http://app.example:8081")
        );
        assert_ne!(
            origin("http://app.example:8080"),
            origin("https://app.example:8080")
        );
        assert_ne!(
            origin("http://app.example"),
            origin("http://app.example.evil")
        );
        assert_eq!(
            origin("HTTPS://App.Example:443").to_string(),
            "https://app.example"
        );
        assert_eq!(origin("http://[::1]:8080").to_string(), "http://[::1]:8080");
        assert_eq!(origin("http://127.0.0.1").to_string(), "http://127.0.0.1");
    }

    #[test]
    fn malformed_origins_are_refused_with_the_reason() {
        for (text, says) in [
            ("null", "null"),
            ("app.example", "no scheme"),
            ("http://app.example/path", "no path"),
            ("http://app.example?q", "no path"),
            ("http://", "no host"),
            ("http://app.example:", "not a number"),
            ("http://app.example:99999", "65535"),
            ("http://app.example:+80", "not a number"),
            ("http://user@app.example", "user info"),
            ("http://::1", "inside [ ]"),
            ("http://[::1", "unclosed"),
            ("http://[nope]", "IPv6"),
            ("http://app example", "characters"),
            ("1http://app.example", "scheme"),
        ] {
            let error = text.parse::<Origin>().unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.contains("scheme://host[:port]"), "{error}");
        }
    }

    #[test]
    fn hosts_parse_with_and_without_a_port() {
        let a = Authority::parse("LocalHost.:4501").unwrap();
        assert_eq!(a.host, HostName::Name("localhost".to_owned()));
        assert_eq!(a.port, Some(4501));
        let a = Authority::parse("[::1]").unwrap();
        assert_eq!(a.host, HostName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!(a.port, None);
        assert_eq!(
            Authority::parse("127.0.0.1:80").unwrap().host,
            HostName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        for bad in ["", ":80", "a:b", "[::1]x", "a b", "a/b:1", "x@y"] {
            assert!(Authority::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_allowed_host_without_a_port_matches_any_port() {
        let any: AllowedHost = "Spool.Internal".parse().unwrap();
        let one: AllowedHost = "spool.internal:4501".parse().unwrap();
        let at = |text| Authority::parse(text).unwrap();
        assert!(any.matches(&at("spool.internal:1")));
        assert!(any.matches(&at("spool.internal")));
        assert!(one.matches(&at("spool.internal:4501")));
        assert!(!one.matches(&at("spool.internal:4502")));
        assert!(!one.matches(&at("spool.internal")));
        assert!(!any.matches(&at("other.internal:4501")));
        assert_eq!(one.to_string(), "spool.internal:4501");
        let error = "http://spool.internal".parse::<AllowedHost>().unwrap_err();
        assert!(error.to_string().contains("NAME[:PORT]"), "{error}");
    }
}
