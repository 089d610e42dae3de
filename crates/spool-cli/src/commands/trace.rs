//! `spool trace [THREAD] [--open]`: the server `spool serve` runs, on one
//! HTTP listener at a free loopback port, and the URL of its trace viewer
//! printed on stdout as one line:
//! `http://127.0.0.1:PORT/#token=TOKEN&thread=THREAD`.
//!
//! A fresh random bearer token guards the API unless `--no-token`: a
//! loopback port is reachable by every local user, not only this one. The
//! token and the thread ride in the URL's fragment, which a browser never
//! sends to the server (nor in a Referer); the page reads them from there.
//!
//! Runs until SIGINT or SIGTERM, as `spool serve` does (there is no stdio
//! listener, so the end of standard input does not stop it).

use std::io::Write;

use anyhow::Context;
use spool_server::AuthToken;
use spool_store::{AnyStore, Store};

use super::serve::Launch;
use crate::cli::TraceArgs;

/// Bytes of a fresh token (hex on the wire: 64 characters).
const TOKEN_BYTES: usize = 32;

/// Checks the thread exists, makes the token, and says what to do once
/// the listener is bound: print the URL, and open it when asked.
pub async fn prepare(store: &AnyStore, args: &TraceArgs) -> anyhow::Result<Launch> {
    if let Some(thread) = &args.thread
        && store.thread(thread).await?.is_none()
    {
        anyhow::bail!("no thread {thread} in the store (`spool threads list` lists them)");
    }
    let token = if args.no_token {
        None
    } else {
        Some(fresh_token()?)
    };
    let thread = args.thread.clone();
    let open = args.open;
    let secret = token.as_ref().map(|(_, hex)| hex.clone());
    let listening = move |addresses: &[String]| {
        let Some(base) = addresses.iter().find(|a| a.starts_with("http://")) else {
            eprintln!("spool trace: error: no HTTP listener to show the viewer on");
            return;
        };
        let url = viewer_url(base, secret.as_deref(), thread.as_deref());
        let mut stdout = std::io::stdout().lock();
        // A reader waits for this line: it must not sit in a buffer.
        if writeln!(stdout, "{url}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            eprintln!("spool trace: warning: cannot write the URL to stdout");
        }
        if open {
            open_in_browser(url);
        }
    };
    Ok(Launch {
        token: Some(token.map(|(token, _)| token)),
        listening: Some(Box::new(listening)),
    })
}

/// A token from the OS's random source, as the server checks it and as
/// hex text for the URL.
fn fresh_token() -> anyhow::Result<(AuthToken, String)> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot read the OS random source for a token: {e}"))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let token = AuthToken::new(&hex).context("a hex token is a usable token")?;
    Ok((token, hex))
}

/// `BASE/#token=…&thread=…`, each part only when there is one.
fn viewer_url(base: &str, token: Option<&str>, thread: Option<&str>) -> String {
    let mut parts = Vec::new();
    if let Some(token) = token {
        parts.push(format!("token={token}"));
    }
    if let Some(thread) = thread {
        parts.push(format!("thread={}", percent_encoded(thread)));
    }
    let base = base.trim_end_matches('/');
    if parts.is_empty() {
        format!("{base}/")
    } else {
        format!("{base}/#{}", parts.join("&"))
    }
}

/// `text` with every byte but URL-unreserved ones as `%XX`: a thread id
/// chosen by a client may hold `&` or `#`.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `xdg-open URL` in the background; a failure is a warning, the
/// server keeps serving. The URL, token included, is on xdg-open's command
/// line while it runs, which other local users can read; a person who
/// minds opens the printed URL by hand.
fn open_in_browser(url: String) {
    let child = tokio::process::Command::new("xdg-open")
        .arg(&url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            eprintln!("spool trace: warning: cannot run xdg-open ({error}); open the URL yourself");
            return;
        }
    };
    tokio::spawn(async move {
        match child.wait().await {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("spool trace: warning: xdg-open failed ({status}); open the URL yourself")
            }
            Err(error) => {
                eprintln!("spool trace: warning: xdg-open failed ({error}); open the URL yourself")
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_carries_what_there_is_in_its_fragment() {
        let base = "http://127.0.0.1:4000";
        assert_eq!(viewer_url(base, None, None), "http://127.0.0.1:4000/");
        assert_eq!(
            viewer_url(base, Some("ab12"), Some("t-1")),
            "http://127.0.0.1:4000/#token=ab12&thread=t-1"
        );
        assert_eq!(
            viewer_url(base, None, Some("a&b#c")),
            "http://127.0.0.1:4000/#thread=a%26b%23c"
        );
    }

    #[test]
    fn tokens_are_fresh_hex() {
        let (_, first) = fresh_token().unwrap();
        let (_, second) = fresh_token().unwrap();
        assert_eq!(first.len(), 2 * TOKEN_BYTES);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, second);
    }
}
