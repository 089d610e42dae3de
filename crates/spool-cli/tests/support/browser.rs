//! A real headless Chromium for the trace viewer's tests, driven over
//! WebDriver (Debian's `chromium` and `chromium-driver`; `.ci/run` and
//! `scripts/test.sh` install them through `scripts/browser.sh`).
//!
//! Each [`Browser`] is its own chromedriver on a free port with its own
//! empty profile; dropping it kills chromedriver and the browser it
//! started (one process group).

#![allow(dead_code)] // each test binary uses a part

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(20);

fn program(env: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(env).map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(
        path.exists(),
        "{} is missing: the trace viewer's tests need Debian's chromium and chromium-driver \
         (`bash scripts/browser.sh` installs them; {env} names another)",
        path.display()
    );
    path
}

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A fresh browser with a 1280×800 window.
    pub async fn start() -> Browser {
        Browser::start_sized(1280, 800).await
    }

    pub async fn start_sized(width: u32, height: u32) -> Browser {
        let chromium = program("SPOOL_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = program("SPOOL_CHROMEDRIVER", "/usr/bin/chromedriver");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let profile = tempfile::tempdir().expect("a profile directory");
        // Chromium's own temporary directories (`org.chromium.*`) go under
        // the profile's directory, which is removed with the browser: in the
        // system's they outlived a browser killed with its test.
        let tmp = profile.path().join("tmp");
        std::fs::create_dir(&tmp).expect("a temporary directory in the profile's");
        let mut command = Command::new(chromedriver);
        command
            .arg(format!("--port={port}"))
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let driver = command.spawn().expect("chromedriver starts");
        // As root (CI), Chromium's own sandbox cannot start; the flags that
        // stop background connections keep it from knocking on a closed
        // network.
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-extensions".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        });
        let capabilities = capabilities.as_object().unwrap().clone();
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            let attempt = ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await;
            match attempt {
                Ok(client) => break client,
                Err(error) if started.elapsed() > WAIT => {
                    panic!("no WebDriver session from chromedriver at {url}: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("the page loads");
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Waits until `script` returns something truthy, and returns it.
    pub async fn until(&self, what: &str, script: &str, args: Vec<Value>) -> Value {
        let started = Instant::now();
        loop {
            let value = self.js(script, args.clone()).await;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if started.elapsed() > WAIT {
                let body = self.js("return document.body.innerText", vec![]).await;
                panic!("waited {WAIT:?} for {what}; the page says:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element matching `css`, once there is one. The
    /// page redraws its lists (an element found may be replaced before the
    /// click reaches it), so a click that fails is tried again, on the
    /// element found anew.
    pub async fn click(&self, css: &str) {
        let started = Instant::now();
        loop {
            let attempt = async {
                let element = self.client.find(Locator::Css(css)).await?;
                element.click().await
            };
            match attempt.await {
                Ok(()) => return,
                Err(error) if started.elapsed() > WAIT => panic!("cannot click {css}: {error}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Accepts the page's `confirm()` dialog, once it is open.
    pub async fn accept_dialog(&self) {
        let started = Instant::now();
        while let Err(error) = self.client.accept_alert().await {
            assert!(started.elapsed() < WAIT, "no dialog to accept: {error}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The page as a PNG under `dir`, for a person to look at.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("the screenshot is written");
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// Ends the WebDriver session (the browser quits), then chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.start_kill();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver and the Chromium it started share its process group.
        if let Some(pid) = self.driver.id() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
