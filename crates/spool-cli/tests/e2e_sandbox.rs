//! The kernel sandbox, end to end: `spool run` with a scripted model whose
//! shell calls are real child processes confined by Landlock, seccomp and
//! read-only mounts. Every refusal is proven by its effect (the file not
//! written, the connection not made) and by the item saying why.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use spool_testkit::responses_api::{calls_response, message_response};
use spool_testkit::{ScriptedResponse, ScriptedServer};
use support::*;

/// A folder outside the workspace and outside /tmp (which is writable
/// under workspace-write), standing in for the user's home.
fn outside_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("outside-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn sh(id: &str, script: &str) -> (String, String, Value) {
    (
        id.to_owned(),
        "shell".to_owned(),
        json!({"command": ["sh", "-c", script]}),
    )
}

fn calls(calls: &[(String, String, Value)]) -> ScriptedResponse {
    let borrowed: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), name.as_str(), args.clone()))
        .collect();
    calls_response("r1", &borrowed)
}

/// Runs one turn of `spool run --tools shell ARGS` whose model makes
/// `calls` and then answers; returns the thread's command items by call
/// order.
async fn run_calls(
    home: &Home,
    calls_made: &[(String, String, Value)],
    args: &[&str],
) -> Vec<Value> {
    let server =
        ScriptedServer::with_responses([calls(calls_made), message_response("r2", &["Done."])])
            .await
            .unwrap();
    let mut argv = vec!["run", "--tools", "shell,apply_patch"];
    argv.extend_from_slice(args);
    argv.push("do it");
    let (_, stderr) = home.spool_ok(&server.url(), &argv).await;
    let thread = thread_id_from(&stderr);
    let (shown, _) = home
        .spool_ok(&server.url(), &["threads", "show", &thread, "--json"])
        .await;
    // Each line is a stored record: the item with its envelope.
    json_lines(&shown)
        .into_iter()
        .map(|record| record.get("item").cloned().unwrap_or(record))
        .filter(|item| item["type"] == "commandExecution")
        .collect()
}

fn output(item: &Value) -> &str {
    item["aggregatedOutput"].as_str().unwrap_or_default()
}

fn assert_denied(item: &Value) {
    assert_eq!(item["status"], "failed", "{item:#}");
    assert!(
        output(item).contains("[the sandbox (workspace-write) denied this command"),
        "the item says why: {item:#}"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[tokio::test]
async fn workspace_write_lets_workspace_writes_through_and_stops_the_rest_at_the_kernel() {
    let home = Home::new();
    let outside = outside_dir();
    let out = outside.path();
    std::fs::create_dir(home.path().join(".git")).unwrap();
    std::fs::write(home.path().join(".git/config"), "[core]\n").unwrap();
    std::fs::write(home.path().join("keep.txt"), "mine\n").unwrap();
    std::os::unix::fs::symlink(out, home.path().join("link")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let made = [
        sh("c_ok", "echo ok > notes.txt"),
        sh("c_home", &format!("echo x > {}/outside.txt", out.display())),
        sh("c_etc", "echo x > /etc/spool-sandbox-test"),
        sh("c_git", "echo '[core] fsmonitor = evil' >> .git/config"),
        sh("c_link", "echo x > link/through-link.txt"),
        sh("c_mv", &format!("mv keep.txt {}/", out.display())),
        sh(
            "c_net",
            &format!(
                "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
            ),
        ),
    ];
    let items = run_calls(
        &home,
        &made,
        &["--approval-policy", "never", "--sandbox", "workspace-write"],
    )
    .await;
    assert_eq!(items.len(), made.len(), "{items:#?}");

    assert_eq!(items[0]["status"], "completed", "{:#}", items[0]);
    assert_eq!(
        std::fs::read_to_string(home.path().join("notes.txt")).unwrap(),
        "ok\n"
    );
    for item in &items[1..] {
        assert_denied(item);
    }
    assert!(!out.join("outside.txt").exists());
    assert!(!Path::new("/etc/spool-sandbox-test").exists());
    assert_eq!(
        std::fs::read_to_string(home.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!out.join("through-link.txt").exists());
    assert!(!out.join("keep.txt").exists());
    assert!(home.path().join("keep.txt").exists());
    assert!(
        listener.accept().is_err(),
        "no connection reached the listener"
    );
    assert!(
        output(&items[6]).contains("Operation not permitted"),
        "{:#}",
        items[6]
    );
}

#[tokio::test]
async fn read_only_refuses_every_write_and_full_access_allows_them() {
    let home = Home::new();
    let outside = outside_dir();
    let target = outside.path().join("full.txt");
    let items = run_calls(
        &home,
        &[sh("c1", "echo x > inside.txt")],
        &["--approval-policy", "never", "--sandbox", "read-only"],
    )
    .await;
    assert_eq!(items[0]["status"], "failed", "{:#}", items[0]);
    assert!(output(&items[0]).contains("[the sandbox (read-only) denied this command"));
    assert!(!home.path().join("inside.txt").exists());

    let items = run_calls(
        &home,
        &[sh("c1", &format!("echo x > {}", target.display()))],
        &[
            "--approval-policy",
            "never",
            "--sandbox",
            "danger-full-access",
        ],
    )
    .await;
    assert_eq!(items[0]["status"], "completed", "{:#}", items[0]);
    assert!(target.exists());
}

#[tokio::test]
async fn git_runs_none_of_the_programs_a_repository_config_names_in_any_mode() {
    let marker_dir = outside_dir();
    let marker = |name: &str| marker_dir.path().join(name);
    for sandbox in ["read-only", "workspace-write", "danger-full-access"] {
        let home = Home::new();
        let repo = home.path();
        git(repo, &["init", "-q", "."]);
        git(repo, &["config", "user.email", "t@example.invalid"]);
        git(repo, &["config", "user.name", "t"]);
        std::fs::write(repo.join("f.txt"), "one\n").unwrap();
        std::fs::write(repo.join(".gitattributes"), "*.txt diff=evil\n").unwrap();
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-qm", "one"]);
        std::fs::write(repo.join("f.txt"), "one\ntwo\n").unwrap();
        let touch = |name: &str| format!("sh -c 'touch {}' --", marker(name).display());
        git(repo, &["config", "core.fsmonitor", &touch("fsmonitor")]);
        git(repo, &["config", "diff.external", &touch("extdiff")]);
        git(repo, &["config", "diff.evil.textconv", &touch("textconv")]);
        let made = [
            (
                "g1".to_owned(),
                "shell".to_owned(),
                json!({"command": ["git", "status"]}),
            ),
            (
                "g2".to_owned(),
                "shell".to_owned(),
                json!({"command": ["git", "diff"]}),
            ),
            (
                "g3".to_owned(),
                "shell".to_owned(),
                json!({"command": ["git", "log", "-p"]}),
            ),
            (
                "g4".to_owned(),
                "shell".to_owned(),
                json!({"command": ["bash", "-lc", "git status && git diff && git log -p"]}),
            ),
        ];
        let items = run_calls(
            &home,
            &made,
            &["--approval-policy", "never", "--sandbox", sandbox],
        )
        .await;
        for item in &items {
            assert_eq!(item["status"], "completed", "{sandbox}: {item:#}");
        }
        assert!(
            output(&items[1]).contains("+two"),
            "{sandbox}: {:#}",
            items[1]
        );
        for name in ["fsmonitor", "extdiff", "textconv"] {
            assert!(
                !marker(name).exists(),
                "{sandbox}: git ran the {name} program"
            );
        }
    }
}

#[tokio::test]
async fn a_patch_to_git_config_then_git_status_is_stopped_under_the_defaults() {
    let home = Home::new();
    git(home.path(), &["init", "-q", "."]);
    let before = std::fs::read_to_string(home.path().join(".git/config")).unwrap();
    let outside = outside_dir();
    let marker: PathBuf = outside.path().join("fsmonitor-ran");
    let patch = format!(
        "*** Begin Patch\n*** Update File: .git/config\n@@\n [core]\n+\tfsmonitor = touch {}\n*** End Patch\n",
        marker.display()
    );
    let made = [
        (
            "p1".to_owned(),
            "apply_patch".to_owned(),
            json!({"input": patch}),
        ),
        (
            "g1".to_owned(),
            "shell".to_owned(),
            json!({"command": ["git", "status"]}),
        ),
    ];
    // The defaults: on-request, workspace-write; no terminal to ask.
    let server = ScriptedServer::with_responses([calls(&made), message_response("r2", &["Done."])])
        .await
        .unwrap();
    let (_, stderr) = home
        .spool_ok(
            &server.url(),
            &["run", "--tools", "shell,apply_patch", "do it"],
        )
        .await;
    assert!(
        stderr.contains("declined"),
        "the patch needed a person: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join(".git/config")).unwrap(),
        before
    );
    assert!(!marker.exists(), "git status ran no program");
}

#[tokio::test]
async fn secrets_in_the_server_environment_reach_no_command_no_store_and_no_model() {
    const SECRET: &str = "planted-7c1f0e9a-secret-value";
    let home = Home::new();
    let server = ScriptedServer::with_responses([
        calls(&[sh("e1", "env; echo end-of-env")]),
        message_response("r2", &["Done."]),
    ])
    .await
    .unwrap();
    // A provider with no stated window: however long this machine's
    // environment is, the turn is not compacted (the built-in local
    // provider's small window would make that a third request).
    std::fs::write(
        home.path().join("spool.toml"),
        format!(
            "provider = \"plain\"\n[providers.plain]\nbase_url = \"{}\"\nmodel = \"m\"\n",
            server.url()
        ),
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spool"))
        .args([
            "run",
            "--tools",
            "shell",
            "--approval-policy",
            "never",
            "list the environment",
        ])
        .current_dir(home.path())
        .env("SPOOL_HOME", home.path())
        .env("SPOOL_LOCAL_MODEL_URL", server.url())
        .env_remove("OPENAI_API_KEY")
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("SPOOL_AUTH_TOKEN", SECRET)
        .env("MY_SERVICE_API_KEY", SECRET)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(SECRET));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("end-of-env"), "the command ran: {stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
    for request in server.requests() {
        assert!(
            !request.body_text().contains(SECRET),
            "a model request held the secret"
        );
    }
    let second = server.requests()[1].body_text();
    assert!(second.contains("end-of-env"), "the model got the output");
    // The store files (database and its WAL), byte for byte.
    for entry in std::fs::read_dir(home.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            let found = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
            assert!(!found, "{} holds the secret", path.display());
        }
    }
}

#[tokio::test]
async fn a_patch_writing_outside_the_workspace_is_refused_under_never() {
    let home = Home::new();
    let outside = outside_dir();
    std::os::unix::fs::symlink(outside.path(), home.path().join("link")).unwrap();
    let add = |path: &str| {
        json!({"input": format!(
            "*** Begin Patch\n*** Add File: {path}\n+written\n*** End Patch\n"
        )})
    };
    let absolute = outside.path().join("abs.txt").display().to_string();
    let made = [
        ("p1".to_owned(), "apply_patch".to_owned(), add(&absolute)),
        (
            "p2".to_owned(),
            "apply_patch".to_owned(),
            add("link/through.txt"),
        ),
        ("p3".to_owned(), "apply_patch".to_owned(), add("inside.txt")),
    ];
    let server = ScriptedServer::with_responses([calls(&made), message_response("r2", &["Done."])])
        .await
        .unwrap();
    home.spool_ok(
        &server.url(),
        &[
            "run",
            "--tools",
            "apply_patch",
            "--approval-policy",
            "never",
            "--sandbox",
            "workspace-write",
            "do it",
        ],
    )
    .await;
    // What the model was told of each call: two refusals, one success.
    let requests = server.requests();
    let told: Value = serde_json::from_str(&requests[1].body_text()).unwrap();
    let outputs: Vec<(String, String)> = told["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| {
            (
                i["call_id"].as_str().unwrap().to_owned(),
                i["output"].to_string(),
            )
        })
        .collect();
    let output_of = |id: &str| {
        outputs
            .iter()
            .find(|(call, _)| call == id)
            .unwrap_or_else(|| panic!("no output for {id}: {outputs:#?}"))
            .1
            .clone()
    };
    for refused in ["p1", "p2"] {
        let output = output_of(refused);
        assert!(
            output.contains("outside"),
            "{refused} was refused as outside the workspace: {output}"
        );
    }
    assert!(!output_of("p3").contains("outside"), "{}", output_of("p3"));
    assert!(!outside.path().join("abs.txt").exists());
    assert!(!outside.path().join("through.txt").exists());
    assert!(home.path().join("inside.txt").exists());
}
