//! `spool mcp list` over real MCP servers: the test server of `spool-mcp`
//! (a child process on stdio), one that exits at start, one disabled, and
//! one declared by a working directory's `spool.toml`, which is ignored.

mod support;

use std::process::Output;

use support::mcp::test_server;
use support::*;

/// `spool mcp list ARGS` with `home` as SPOOL_HOME, run in `cwd`.
async fn mcp_list(home: &Home, cwd: &std::path::Path, args: &[&str]) -> Output {
    let args: Vec<&str> = ["mcp", "list"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    // No model is called: any URL.
    home.spool_in(cwd, "http://127.0.0.1:9/v1", &args).await
}

fn write_config(home: &Home, gone_required: bool) {
    let server = test_server();
    let server = server.display();
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            r#"
[mcp_servers.tools]
command = "{server}"
disabled_tools = ["sleep"]

[mcp_servers.gone]
command = "{server}"
args = ["--exit-at-start"]
required = {gone_required}

[mcp_servers.off]
command = "{server}"
enabled = false
"#
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn each_server_is_listed_with_its_state_and_tools() {
    let home = Home::new();
    write_config(&home, false);
    let out = mcp_list(&home, home.path(), &[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0].starts_with("gone ") && lines[0].contains("failed"),
        "{stdout}"
    );
    assert!(lines[0].contains("exiting at start, as asked"), "{stdout}");
    assert!(
        lines[1].starts_with("off ") && lines[1].contains("disabled"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("tools ") && lines[2].contains("ready"),
        "{stdout}"
    );
    assert!(lines[2].contains("6 tools: "), "{stdout}");
    assert!(
        lines[2].contains("echo") && lines[2].contains("fail"),
        "{stdout}"
    );
    assert!(
        !lines[2].contains("sleep"),
        "a disabled tool is not offered: {stdout}"
    );

    let out = mcp_list(&home, home.path(), &["--json"]).await;
    let servers = json_lines(&String::from_utf8_lossy(&out.stdout));
    let tools = &servers[2];
    assert_eq!(tools["state"], "ready");
    let echo = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(echo["readOnlyHint"], true);
    assert_eq!(echo["inputSchema"]["properties"]["text"]["type"], "string");
    assert_eq!(servers[0]["state"], "failed");
    assert!(
        servers[0]["error"]
            .as_str()
            .unwrap()
            .contains("MCP server gone")
    );
}

#[tokio::test]
async fn a_required_server_that_fails_fails_the_command() {
    let home = Home::new();
    write_config(&home, true);
    let out = mcp_list(&home, home.path(), &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("failed (required)"), "{stdout}");
}

#[tokio::test]
async fn a_working_directorys_spool_toml_cannot_start_commands() {
    let home = Home::new();
    let project = tempfile::tempdir().unwrap();
    let marker = project.path().join("started");
    std::fs::write(
        project.path().join("spool.toml"),
        format!(
            "[mcp_servers.evil]\ncommand = \"touch\"\nargs = [\"{}\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = mcp_list(&home, project.path(), &[]).await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[mcp_servers] ignored"), "{stderr}");
    assert!(stderr.contains("no MCP servers"), "{stderr}");
    assert!(!marker.exists(), "the project's command ran");
}

/// Whether process `pid` still runs (a zombie does not).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to 20 s for `check`; whether it held.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if check() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    check()
}

#[tokio::test]
async fn no_server_outlives_spool_even_when_spool_is_killed() {
    let server = test_server();
    let home = Home::new();
    let (listed, muted) = (
        home.path().join("listed.pid"),
        home.path().join("muted.pid"),
    );
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            r#"
[mcp_servers.listed]
command = "{server}"
args = ["--pid-file", "{listed}"]

[mcp_servers.muted]
command = "{server}"
args = ["--pid-file", "{muted}", "--mute"]
startup_timeout_sec = 600
"#,
            server = server.display(),
            listed = listed.display(),
            muted = muted.display(),
        ),
    )
    .unwrap();
    let mut spool = tokio::process::Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(["mcp", "list"])
        .current_dir(home.path())
        .env("SPOOL_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Both servers started; the muted one keeps `spool mcp list` waiting.
    assert!(eventually(|| listed.exists() && muted.exists()).await);
    let pid = |path: &std::path::Path| std::fs::read_to_string(path).unwrap();
    let (listed_pid, muted_pid) = (pid(&listed), pid(&muted));
    assert!(
        running(&muted_pid),
        "the muted server runs while spool waits"
    );
    assert!(
        eventually(|| !running(&listed_pid)).await,
        "a server spool is done with is ended"
    );

    spool.start_kill().unwrap();
    spool.wait().await.unwrap();
    assert!(
        eventually(|| !running(&muted_pid)).await,
        "the server outlived spool, killed with SIGKILL"
    );
}
