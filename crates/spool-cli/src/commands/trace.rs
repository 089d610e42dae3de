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

/// How long the launcher page outlives `xdg-open`: the browser it starts
/// reads the page after `xdg-open` returns.
const LAUNCHER_KEPT: std::time::Duration = std::time::Duration::from_secs(120);

/// A page that sends the browser on to `url`, for `xdg-open` to open. The
/// URL itself carries the token, and a command line is readable by every
/// local user (`ps`); the page's path is not a secret, and the page sits in
/// a directory only this user can enter (mode 0700), removed again later.
fn launcher(url: &str) -> std::io::Result<(tempfile::TempDir, std::path::PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("spool-trace-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()?;
    let path = dir.path().join("open.html");
    let attribute = url
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    std::fs::write(
        &path,
        format!(
            "<!doctype html><meta charset=\"utf-8\"><title>spool trace</title>\
             <meta http-equiv=\"refresh\" content=\"0;url={attribute}\">\
             <a href=\"{attribute}\">Open spool trace</a>\n"
        ),
    )?;
    Ok((dir, path))
}

/// Opens the viewer with `xdg-open` in the background, through a launcher
/// page so the token is on no command line; a failure is a warning, the
/// server keeps serving.
fn open_in_browser(url: String) {
    let (dir, page) = match launcher(&url) {
        Ok(made) => made,
        Err(error) => {
            eprintln!(
                "spool trace: warning: cannot write the page that opens the viewer ({error}); open the URL yourself"
            );
            return;
        }
    };
    let child = tokio::process::Command::new("xdg-open")
        .arg(&page)
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
        tokio::time::sleep(LAUNCHER_KEPT).await;
        drop(dir);
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
    fn the_launcher_page_is_private_and_leads_to_the_url() {
        use std::os::unix::fs::PermissionsExt;
        let url = "http://127.0.0.1:4000/#token=ab12&thread=t-1";
        let (dir, page) = launcher(url).unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "only its owner may enter: {mode:o}");
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            html.contains("url=http://127.0.0.1:4000/#token=ab12&amp;thread=t-1\""),
            "{html}"
        );
        drop(dir);
        assert!(!page.exists());
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
