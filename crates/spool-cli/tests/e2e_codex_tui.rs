//! The Codex TUI (npm `@openai/codex` 0.163.0) drives `spool serve` over
//! WebSocket (`codex --remote ws://…`) in a detached tmux session of a fixed
//! size, and the test reads the screen as a user would (`tmux
//! capture-pane`): the prompt appears, a typed request gets the scripted
//! model's reply, a command the model asks to run outside the sandbox shows
//! the approval prompt, `y` accepts it, the command runs exactly once and the
//! final reply appears; after spool restarts on the same home, `/resume`
//! shows that thread's earlier turns.
//!
//! The TUI comes from `scripts/codex-peers.sh codex` when that script exists,
//! else from `~/.cache/spool/peers/npm` (`npm install --prefix
//! ~/.cache/spool/peers/npm @openai/codex@0.163.0`). Without it (or tmux) the
//! test fails, unless SPOOL_SKIP_PEERS=1. The TUI gets a throwaway HOME and
//! CODEX_HOME, and talks only to spool: spool's model is a ScriptedServer.

mod serve_net;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use serve_net::Server;
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::{calls_response, message_response};
use support::Home;
use tokio::process::Command;

/// The version whose behaviour this test encodes (see the notes on each
/// screen text below); another version fails at once instead of oddly.
const CODEX_VERSION: &str = "codex-cli 0.163.0";
const WIDTH: &str = "120";
const HEIGHT: &str = "40";
/// Generous: the first start of the TUI and a debug spool on a busy
/// 2-core CI machine.
const WAIT: Duration = Duration::from_secs(60);
/// The model name spool reports; the TUI's footer shows it once
/// `thread/start` has answered, which is when the TUI is ready for input
/// (its composer is drawn earlier, and what is typed before is only kept
/// as a draft).
const MODEL: &str = "scripted-model";

const FIRST_PROMPT: &str = "Say hello to spool";
const FIRST_REPLY: &str = "Scripted reply: hello back.";
const SECOND_PROMPT: &str = "Append a line to the marks file";
const FINAL_REPLY: &str = "The line is appended.";
/// The title the model gives when the TUI asks for one (see `model`).
const TITLE: &str = "Greet spool";
/// How the TUI's title request starts (the main turns' requests carry the
/// TUI's tool descriptions, which mention "task titles" too).
const TITLE_REQUEST: &str = "Generate a concise, single-line task title";

#[tokio::test]
async fn the_codex_tui_runs_turns_asks_approval_and_resumes_after_a_restart() {
    let codex_home = codex_home();
    let Some(codex) = peers(codex_home.path()) else {
        return;
    };
    let workspace = tempfile::tempdir().unwrap();
    let marks = workspace.path().join("marks.txt");
    let model = model(&marks).await;
    let home = Home::new();
    let serve_args = [
        "--listen",
        "ws://127.0.0.1:0",
        "--tools",
        "shell",
        "--model",
        MODEL,
    ];

    let mut server = Server::start(&home, &model.url(), &serve_args, 1).await;
    let mut tui = Tmux::new();
    tui.start_codex(
        &codex,
        codex_home.path(),
        workspace.path(),
        &server.addr("ws"),
    )
    .await;
    tui.wait_ready().await;

    // A plain turn: the reply is on the screen and the turn has ended
    // (typing during a turn would steer it instead of starting the next).
    tui.submit(FIRST_PROMPT).await;
    tui.wait_for("the first reply", |s| s.contains(FIRST_REPLY) && idle(s))
        .await;

    // A turn whose command needs approval: the model asks to run it outside
    // the sandbox, so under on-request the TUI is asked.
    tui.submit(SECOND_PROMPT).await;
    tui.wait_for("the approval prompt", |s| {
        s.contains("Would you like to run the following command?") && s.contains("Yes, proceed (y)")
    })
    .await;
    assert!(!marks.exists(), "the command ran before it was approved");
    tui.keys(&["y"]).await;
    let screen = tui
        .wait_for("the final reply", |s| s.contains(FINAL_REPLY) && idle(s))
        .await;
    // Kept in the test's output (`--no-capture` shows it): what a person
    // sees after approving.
    eprintln!("--- the TUI after the approved command ---\n{screen}\n---");
    let lines = marks_lines(&marks);
    tui.check(
        lines == 1,
        &format!("the command ran {lines} times, not once"),
    );

    // Leave, stop spool, start it again on the same home, and resume.
    tui.quit().await;
    let status = server.terminate().await;
    assert!(status.success(), "spool serve exits cleanly: {status}");
    let server = Server::start(&home, &model.url(), &serve_args, 1).await;
    tui.start_codex(
        &codex,
        codex_home.path(),
        workspace.path(),
        &server.addr("ws"),
    )
    .await;
    tui.wait_ready().await;
    tui.submit("/resume").await;
    tui.wait_for("the resume picker", |s| {
        s.contains("Resume a previous session") && (s.contains(FIRST_PROMPT) || s.contains(TITLE))
    })
    .await;
    // Not the TUI's own title threads, if the server lists them.
    tui.select_in_picker(|row| {
        (row.contains(FIRST_PROMPT) || row.contains(TITLE)) && !row.contains("Generate a concise")
    })
    .await;
    tui.wait_for("the resumed thread's earlier turns", |s| {
        [FIRST_PROMPT, FIRST_REPLY, SECOND_PROMPT, FINAL_REPLY]
            .iter()
            .all(|text| s.contains(text))
            && !s.contains("Resume a previous session")
    })
    .await;
    let lines = marks_lines(&marks);
    tui.check(
        lines == 1,
        &format!("after resuming, the command ran {lines} times"),
    );
    tui.check(
        model.remaining() == 0,
        &format!(
            "{} scripted model responses were never asked for",
            model.remaining()
        ),
    );
}

/// The scripted model: the reply to the first request, then a shell call
/// that must ask (it requires escalation), then the final reply. The TUI
/// asks the server for a thread title beside the turns (an ephemeral
/// thread whose one turn starts "Generate a concise, single-line task
/// title"), at a time the test does not control, so those requests get a
/// standing answer instead of taking from the queue.
async fn model(marks: &Path) -> ScriptedServer {
    let append = format!("echo ran >> '{}'", marks.display());
    let call = (
        "call_1",
        "shell",
        json!({
            "command": ["sh", "-c", append],
            "sandbox_permissions": "require_escalated",
            "justification": "append a line to the marks file",
        }),
    );
    let model = ScriptedServer::with_responses([
        message_response("r1", &[FIRST_REPLY]),
        calls_response("r2", &[call]),
        message_response("r3", &[FINAL_REPLY]),
    ])
    .await
    .unwrap();
    model.answer_matching(
        |request| request.body_text().contains(TITLE_REQUEST),
        message_response("title", &[&json!({ "title": TITLE }).to_string()]),
    );
    model
}

/// The TUI's home: no login (the server answers for the account), no
/// update check, no analytics or feedback upload, no animation or tooltip
/// to make the screen change between captures, and no paste-burst
/// detection (tmux types faster than a person, and a burst ending in
/// Enter would otherwise become a newline in the draft).
fn codex_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = r#"check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[tui]
animations = false
show_tooltips = false
disable_paste_burst = true
screen_reader_detection_done = true
"#;
    std::fs::create_dir_all(dir.path().join(".codex")).unwrap();
    std::fs::write(dir.path().join(".codex/config.toml"), config).unwrap();
    dir
}

fn marks_lines(marks: &Path) -> usize {
    std::fs::read_to_string(marks)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// No turn is running: the TUI shows "esc to interrupt" while one is.
fn idle(screen: &str) -> bool {
    !screen.contains("esc to interrupt")
}

/// The `codex` launcher and tmux, or `None` to skip when SPOOL_SKIP_PEERS=1.
/// Anything else missing fails the test: CI installs the peers. Even
/// `codex --version` writes helper links under `$HOME/.codex`, so it runs
/// with the test's throwaway `home` too.
fn peers(home: &Path) -> Option<PathBuf> {
    let skip = std::env::var("SPOOL_SKIP_PEERS").is_ok_and(|v| v == "1");
    let codex = codex_launcher();
    let tmux = std::process::Command::new("tmux").arg("-V").output();
    let problem = match (&codex, &tmux) {
        (None, _) => "the Codex TUI is not installed: run `scripts/codex-peers.sh install` or \
                      `npm install --prefix ~/.cache/spool/peers/npm @openai/codex@0.163.0`"
            .to_owned(),
        (_, Err(e)) => format!("tmux does not run: {e}"),
        (Some(codex), Ok(_)) => {
            let version = std::process::Command::new(codex)
                .arg("--version")
                .env("HOME", home)
                .env("CODEX_HOME", home.join(".codex"))
                .output();
            match version {
                Ok(out) if String::from_utf8_lossy(&out.stdout).trim() == CODEX_VERSION => {
                    return codex.clone().into();
                }
                Ok(out) => format!(
                    "{} --version says {:?}, not {CODEX_VERSION:?} (stderr: {})",
                    codex.display(),
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) => format!("{} does not run: {e}", codex.display()),
            }
        }
    };
    if skip {
        eprintln!("skipped (SPOOL_SKIP_PEERS=1): {problem}");
        return None;
    }
    panic!("{problem} (or set SPOOL_SKIP_PEERS=1 to skip this test)");
}

/// `scripts/codex-peers.sh codex` prints the launcher's path when the
/// script exists; else the npm install under ~/.cache/spool/peers.
fn codex_launcher() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join("scripts/codex-peers.sh");
    if script.exists() {
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("codex")
            .current_dir(&repo)
            .output()
            .ok()?;
        let printed = String::from_utf8_lossy(&out.stdout);
        let path = PathBuf::from(printed.lines().last()?.trim());
        return (out.status.success() && path.exists()).then_some(path);
    }
    let home = std::env::var_os("HOME")?;
    let path = Path::new(&home).join(".cache/spool/peers/npm/node_modules/.bin/codex");
    path.exists().then_some(path)
}

/// A tmux server of the test's own (its own socket, so the user's tmux and
/// its environment play no part), one detached session at a time, killed
/// on drop. On a failure the last screen is printed.
struct Tmux {
    /// Holds the socket, so nothing is left in /tmp/tmux-UID.
    dir: tempfile::TempDir,
    session: String,
    /// The last capture, for the failure message.
    screen: String,
    /// Whether a failure message already showed the screen.
    reported: std::cell::Cell<bool>,
    /// Whether the session exists: a later TUI is respawned in its pane.
    started: bool,
}

impl Tmux {
    fn new() -> Tmux {
        Tmux {
            dir: tempfile::tempdir().unwrap(),
            session: "codex".to_owned(),
            screen: String::new(),
            reported: std::cell::Cell::new(false),
            started: false,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("tmux.sock")
    }

    async fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .args(args)
            .output()
            .await
            .expect("tmux runs")
    }

    /// A new session running the TUI against `addr`. The shell around it
    /// prints how the TUI exited and keeps the pane, so a start-up error
    /// (printed after the TUI leaves its screen) can still be captured.
    async fn start_codex(&mut self, codex: &Path, home: &Path, cwd: &Path, addr: &str) {
        let script = format!(
            "{} --remote ws://{addr}; echo \"[codex exited: $?]\"; exec sleep 3600",
            shell_quote(&codex.display().to_string())
        );
        let home_env = format!("HOME={}", home.display());
        let codex_home_env = format!("CODEX_HOME={}", home.join(".codex").display());
        let cwd = cwd.display().to_string();
        let env = ["-c", &cwd, "-e", &home_env, "-e", &codex_home_env];
        // A later TUI replaces the earlier one in the same pane. Killing the
        // only session and creating another would race the tmux server's
        // own exit (it quits when its last session ends), and the new
        // session could reach a server already on its way out.
        let mut args: Vec<&str> = if self.started {
            vec!["respawn-pane", "-k", "-t", &self.session]
        } else {
            let session = ["new-session", "-d", "-s", &self.session];
            let size = ["-x", WIDTH, "-y", HEIGHT];
            session.into_iter().chain(size).collect()
        };
        args.extend(env);
        args.extend(["sh", "-c", &script]);
        let out = self.tmux(&args).await;
        assert!(
            out.status.success(),
            "tmux {}: {}",
            args[0],
            String::from_utf8_lossy(&out.stderr)
        );
        self.started = true;
    }

    async fn capture(&mut self) -> String {
        let out = self
            .tmux(&["capture-pane", "-p", "-t", &self.session])
            .await;
        self.screen = String::from_utf8_lossy(&out.stdout).into_owned();
        self.screen.clone()
    }

    /// Polls the screen until `done` holds; fails with the screen at the
    /// deadline, or at once when the TUI has exited.
    async fn wait_for(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.capture().await;
            if done(&screen) {
                return screen;
            }
            if screen.contains("[codex exited:") {
                self.fail(&format!("the TUI exited while waiting for {what}"));
            }
            if Instant::now() > deadline {
                self.fail(&format!("no {what} within {WAIT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Start-up is over once the footer names the thread's model.
    async fn wait_ready(&mut self) {
        self.wait_for("TUI ready for input", |s| {
            s.contains("OpenAI Codex") && s.contains(MODEL) && s.contains("for shortcuts")
        })
        .await;
    }

    /// Types `text` literally, waits until it is in the composer, then
    /// presses Enter.
    async fn submit(&mut self, text: &str) {
        self.tmux(&["send-keys", "-t", &self.session, "-l", text])
            .await;
        self.wait_for(&format!("the draft {text:?}"), |s| s.contains(text))
            .await;
        self.keys(&["Enter"]).await;
    }

    /// Presses keys by tmux name (`Enter`, `Down`, `y`, …).
    async fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        self.tmux(&args).await;
    }

    /// Moves the picker's cursor (`›`) down to the first row `wanted`
    /// accepts and opens it.
    async fn select_in_picker(&mut self, wanted: impl Fn(&str) -> bool) {
        for _ in 0..20 {
            let screen = self.capture().await;
            let selected = screen.lines().find(|l| l.trim_start().starts_with('›'));
            if selected.is_some_and(&wanted) {
                self.keys(&["Enter"]).await;
                return;
            }
            self.keys(&["Down"]).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.fail("the picker never selected the thread");
    }

    /// `/quit`, then waits for the TUI's exit.
    async fn quit(&mut self) {
        self.submit("/quit").await;
        self.wait_for("the TUI to exit", |s| s.contains("[codex exited: 0]"))
            .await;
    }

    fn check(&self, ok: bool, message: &str) {
        if !ok {
            self.fail(message);
        }
    }

    fn fail(&self, message: &str) -> ! {
        self.reported.set(true);
        panic!(
            "{message}\n--- last screen ---\n{}\n---",
            self.screen.trim_end()
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Another assertion failed: the screen may still explain it.
        if std::thread::panicking() && !self.reported.get() && !self.screen.is_empty() {
            eprintln!("--- last TUI screen ---\n{}\n---", self.screen.trim_end());
        }
        // Killing the server ends the TUI and the shell around it.
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .arg("kill-server")
            .output();
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
