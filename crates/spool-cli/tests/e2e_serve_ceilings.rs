//! `spool serve`'s ceilings: `--max-approval-policy`, `--max-sandbox`,
//! `--allowed-root` (or `[requirements]` in spool.toml) bound what every
//! client may ask for. A request above them is -32602 naming the ceiling
//! and starts nothing; the server refuses to start with defaults above
//! them; `configRequirements/read` states them in Codex's shape.

mod serve_net;
mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use serve_net::{Server, http};
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

/// No model is called: every turn here is refused before it starts.
const NO_MODEL: &str = "http://127.0.0.1:9/v1";

/// A home holding `work/` (the allowed root, where the server runs) with
/// `work/sub/`, `work/escape` (a symlink to `outside/`) and `outside/`.
struct Tree {
    home: Home,
    work: PathBuf,
    outside: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let home = Home::new();
        let base = std::fs::canonicalize(home.path()).unwrap();
        let work = base.join("work");
        let outside = base.join("outside");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("escape")).unwrap();
        Tree {
            home,
            work,
            outside,
        }
    }

    fn flags(&self) -> Vec<String> {
        [
            "--max-approval-policy",
            "on-request",
            "--max-sandbox",
            "workspace-write",
            "--allowed-root",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([s(&self.work)])
        .collect()
    }

    fn serve(&self, extra: &[String]) -> Client {
        let args: Vec<&str> = extra.iter().map(String::as_str).collect();
        Client::start_in(&self.home, &self.work, NO_MODEL, &args)
    }
}

fn s(path: &Path) -> String {
    path.display().to_string()
}

/// The error of a reply that must be -32602; returns its message.
fn refused(reply: &Value) -> String {
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(reply.get("result").is_none(), "{reply}");
    reply["error"]["message"].as_str().unwrap().to_owned()
}

async fn thread_count(client: &mut Client, id: i64) -> usize {
    let list = client.call(id, "thread/list", json!({})).await;
    list["result"]["data"].as_array().unwrap().len()
}

/// The reply checked against Codex 0.163.0's schema, whatever the client
/// opted into (the client checks only what a plain Codex client gets).
fn assert_codex_valid(result: &Value) {
    let path = support::schema::schema_dir().join("v2/ConfigRequirementsReadResponse.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(result)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{result} is not Codex's: {errors:?}");
}

/// Every way `thread/start` can ask above the ceilings is refused, and
/// nothing is created.
async fn thread_start_refusals(client: &mut Client, tree: &Tree, set_by: &str) {
    let cases = [
        (
            json!({"approvalPolicy": "never"}),
            format!(
                "approvalPolicy \"never\" is above this server's ceiling \"on-request\" (set by {set_by})"
            ),
        ),
        (
            json!({"sandbox": "danger-full-access"}),
            "sandbox \"danger-full-access\" is above this server's ceiling \"workspace-write\""
                .to_owned(),
        ),
        (
            json!({"cwd": "/"}),
            "cwd \"/\" is outside this server's allowed roots".to_owned(),
        ),
        (
            json!({"cwd": s(&tree.work.join("escape"))}),
            format!("(resolved: {:?}) is outside", s(&tree.outside)),
        ),
        (
            json!({"cwd": s(&tree.work.join("sub/../.."))}),
            "is outside this server's allowed roots".to_owned(),
        ),
        (
            json!({"cwd": s(&tree.work.join("missing"))}),
            format!("cwd {:?} does not exist", s(&tree.work.join("missing"))),
        ),
    ];
    for (n, (params, expected)) in cases.into_iter().enumerate() {
        let reply = client.call(10 + n as i64, "thread/start", params).await;
        let message = refused(&reply);
        assert!(message.contains(&expected), "{message}");
        assert_eq!(thread_count(client, 30 + n as i64).await, 0, "{message}");
    }
    assert!(
        !client.seen.iter().any(|m| method_of(m) == "thread/started"),
        "{:?}",
        client.seen
    );
}

#[tokio::test]
async fn thread_start_above_the_ceilings_is_refused_and_starts_nothing() {
    let tree = Tree::new();
    let mut client = tree.serve(&tree.flags());
    client.initialize(json!({})).await;
    thread_start_refusals(&mut client, &tree, "--max-approval-policy").await;

    // Within the ceilings: the thread runs in the resolved directory.
    let sub = tree.work.join("sub");
    let started = client
        .call(
            50,
            "thread/start",
            json!({"approvalPolicy": "on-request", "sandbox": "workspace-write",
                   "cwd": s(&sub.join("../sub"))}),
        )
        .await;
    assert_eq!(
        started["result"]["approvalPolicy"], "on-request",
        "{started}"
    );
    assert_eq!(started["result"]["cwd"], s(&sub), "{started}");
    // Nothing asked: the server's defaults, within the ceilings.
    let plain = client.call(51, "thread/start", json!({})).await;
    assert_eq!(plain["result"]["cwd"], s(&tree.work), "{plain}");
    assert_eq!(thread_count(&mut client, 52).await, 2);
    client.close().await;
}

#[tokio::test]
async fn turn_resume_and_fork_overrides_above_the_ceilings_start_nothing() {
    let tree = Tree::new();
    let mut client = tree.serve(&tree.flags());
    client.initialize(json!({})).await;
    let thread_id = thread_id_of(&client.call(1, "thread/start", json!({})).await);
    let input = json!([{"type": "text", "text": "hi"}]);
    let overrides = [
        (
            json!({"approvalPolicy": "never"}),
            "approvalPolicy \"never\"",
        ),
        (
            json!({"sandboxPolicy": {"type": "dangerFullAccess"}}),
            "sandboxPolicy dangerFullAccess counts as \"danger-full-access\"",
        ),
        (
            json!({"sandboxPolicy": {"type": "externalSandbox"}}),
            "sandboxPolicy externalSandbox counts as \"danger-full-access\"",
        ),
        (
            json!({"sandboxPolicy": {"type": "workspaceWrite", "networkAccess": true}}),
            "sandboxPolicy workspaceWrite with networkAccess counts as \"danger-full-access\"",
        ),
        (
            json!({"sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/"]}}),
            "sandboxPolicy.writableRoots \"/\" is outside",
        ),
        (json!({"cwd": "/"}), "cwd \"/\" is outside"),
        (json!({"cwd": s(&tree.work.join("escape"))}), "is outside"),
    ];
    for (n, (mut params, expected)) in overrides.into_iter().enumerate() {
        params["threadId"] = json!(thread_id);
        params["input"] = input.clone();
        let message = refused(&client.call(10 + n as i64, "turn/start", params).await);
        assert!(message.contains(expected), "{message}");
    }
    // No turn started: none in the thread, no `turn/started` sent.
    let read = client
        .call(
            30,
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    assert_eq!(read["result"]["thread"]["turns"], json!([]), "{read}");
    assert!(
        !client.seen.iter().any(|m| method_of(m) == "turn/started"),
        "{:?}",
        client.seen
    );

    // `thread/resume` and `thread/fork` take the same overrides.
    let resume = client
        .call(
            40,
            "thread/resume",
            json!({"threadId": thread_id, "approvalPolicy": "never"}),
        )
        .await;
    assert!(refused(&resume).contains("approvalPolicy \"never\""));
    let fork = client
        .call(
            41,
            "thread/fork",
            json!({"threadId": thread_id, "sandbox": "danger-full-access"}),
        )
        .await;
    assert!(refused(&fork).contains("sandbox \"danger-full-access\""));
    let fork = client
        .call(
            42,
            "thread/fork",
            json!({"threadId": thread_id, "cwd": "/"}),
        )
        .await;
    assert!(refused(&fork).contains("cwd \"/\" is outside"));
    assert_eq!(thread_count(&mut client, 43).await, 1);
    let resumed = client
        .call(
            44,
            "thread/resume",
            json!({"threadId": thread_id, "approvalPolicy": "untrusted"}),
        )
        .await;
    assert_eq!(
        resumed["result"]["approvalPolicy"], "untrusted",
        "{resumed}"
    );
    client.close().await;
}

#[tokio::test]
async fn a_thread_from_before_the_roots_does_not_escape_them() {
    let tree = Tree::new();
    let mut open = tree.serve(&[]);
    open.initialize(json!({})).await;
    let started = open
        .call(1, "thread/start", json!({"cwd": s(&tree.outside)}))
        .await;
    let thread_id = thread_id_of(&started);
    open.close().await;

    let mut client = tree.serve(&tree.flags());
    client.initialize(json!({})).await;
    let resume = client
        .call(1, "thread/resume", json!({"threadId": thread_id}))
        .await;
    let message = refused(&resume);
    assert!(
        message.starts_with(&format!(
            "the thread's cwd {:?} is outside this server's allowed roots",
            s(&tree.outside)
        )),
        "{message}"
    );
    let fork = client
        .call(2, "thread/fork", json!({"threadId": thread_id}))
        .await;
    assert!(refused(&fork).starts_with("the thread's cwd"));
    assert_eq!(thread_count(&mut client, 3).await, 1);
    // Given a directory within the roots, it runs there.
    let sub = s(&tree.work.join("sub"));
    let resumed = client
        .call(
            4,
            "thread/resume",
            json!({"threadId": thread_id, "cwd": sub}),
        )
        .await;
    assert_eq!(resumed["result"]["cwd"], sub, "{resumed}");
    client.close().await;
}

#[tokio::test]
async fn requirements_in_spool_toml_bind_the_same_and_flags_win() {
    let tree = Tree::new();
    // A relative root is relative to the file's directory.
    let config = tree.home.path().join("spool.toml");
    std::fs::write(
        &config,
        "[requirements]\nmax_approval_policy = \"on-request\"\nmax_sandbox = \"workspace-write\"\nallowed_roots = [\"work\"]\n",
    )
    .unwrap();
    let mut client = tree.serve(&[]);
    client.initialize(json!({})).await;
    let set_by = format!("max_approval_policy in {}", s(&config));
    thread_start_refusals(&mut client, &tree, &set_by).await;
    client.close().await;

    // A flag wins over the file.
    let mut client = tree.serve(&["--max-approval-policy".into(), "never".into()]);
    client.initialize(json!({})).await;
    let started = client
        .call(1, "thread/start", json!({"approvalPolicy": "never"}))
        .await;
    assert_eq!(started["result"]["approvalPolicy"], "never", "{started}");
    let still = client
        .call(2, "thread/start", json!({"sandbox": "danger-full-access"}))
        .await;
    assert!(refused(&still).contains(&format!("(set by max_sandbox in {})", s(&config))));
    client.close().await;
}

#[tokio::test]
async fn the_server_does_not_start_with_defaults_above_its_ceilings() {
    let home = Home::new();
    let out = home
        .spool(
            NO_MODEL,
            &[
                "serve",
                "--approval-policy",
                "never",
                "--max-approval-policy",
                "on-request",
            ],
        )
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "the server's defaults are above its ceilings: --approval-policy \"never\" is above \
             this server's ceiling \"on-request\" (set by --max-approval-policy)"
        ),
        "{stderr}"
    );

    // The default sandbox (workspace-write) above a file's ceiling.
    std::fs::write(
        home.path().join("spool.toml"),
        "[requirements]\nmax_sandbox = \"read-only\"\n",
    )
    .unwrap();
    let out = home.spool(NO_MODEL, &["serve"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--sandbox \"workspace-write\" is above this server's ceiling \"read-only\" (set by max_sandbox in"),
        "{stderr}"
    );
    std::fs::remove_file(home.path().join("spool.toml")).unwrap();

    // Its own directory outside the roots; a root that does not exist.
    let elsewhere = tempfile::tempdir().unwrap();
    let root = s(elsewhere.path());
    let out = home
        .spool(NO_MODEL, &["serve", "--allowed-root", &root])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the server's working directory") && stderr.contains("is outside"),
        "{stderr}"
    );
    let missing = s(&elsewhere.path().join("missing"));
    let out = home
        .spool(NO_MODEL, &["serve", "--allowed-root", &missing])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "allowed root {missing} (set by --allowed-root) cannot be used"
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn config_requirements_read_states_the_ceilings_in_codex_shape() {
    let tree = Tree::new();
    // No ceiling: null.
    let mut client = tree.serve(&[]);
    client.initialize(json!({})).await;
    let none = client.call(1, "configRequirements/read", json!(null)).await;
    assert_eq!(none["result"], json!({"requirements": null}), "{none}");
    assert_codex_valid(&none["result"]);
    client.close().await;

    // A Codex client: no `on-failure` (Codex no longer has it), no roots.
    let mut client = tree.serve(&tree.flags());
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "configRequirements/read"}))
        .await;
    let codex = client.reply_to(json!(2)).await;
    assert_eq!(
        codex["result"],
        json!({"requirements": {
            "allowedApprovalPolicies": ["untrusted", "on-request"],
            "allowedSandboxModes": ["read-only", "workspace-write"],
        }}),
        "{codex}"
    );
    assert_codex_valid(&codex["result"]);
    client.close().await;

    // A client that opted in to spool's additions gets them.
    let mut client = tree.serve(&tree.flags());
    client.initialize(json!({"spool": {"seq": true}})).await;
    let spool = client.call(3, "configRequirements/read", json!({})).await;
    assert_eq!(
        spool["result"]["requirements"]["allowedApprovalPolicies"],
        json!(["untrusted", "on-failure", "on-request"]),
        "{spool}"
    );
    assert_eq!(
        spool["result"]["requirements"]["allowedRoots"],
        json!([s(&tree.work)]),
        "{spool}"
    );
    client.close().await;
}

#[tokio::test]
async fn without_ceilings_only_a_missing_cwd_is_refused() {
    let tree = Tree::new();
    let mut client = tree.serve(&[]);
    client.initialize(json!({})).await;
    let missing = s(&tree.work.join("missing"));
    let message = refused(
        &client
            .call(1, "thread/start", json!({"cwd": missing}))
            .await,
    );
    assert_eq!(message, format!("cwd {missing:?} does not exist"));
    assert_eq!(thread_count(&mut client, 2).await, 0);
    let open = client
        .call(
            3,
            "thread/start",
            json!({"approvalPolicy": "never", "sandbox": "danger-full-access", "cwd": "/"}),
        )
        .await;
    assert_eq!(open["result"]["cwd"], "/", "{open}");
    assert_eq!(open["result"]["approvalPolicy"], "never", "{open}");
    client.close().await;
}

#[tokio::test]
async fn the_http_api_answers_400_with_the_same_message() {
    let home = Home::new();
    let root = s(home.path());
    let server = Server::start(
        &home,
        NO_MODEL,
        &[
            "--listen",
            "http://127.0.0.1:0",
            "--max-approval-policy",
            "on-request",
            "--allowed-root",
            &root,
        ],
        1,
    )
    .await;
    let addr = server.addr("http");
    for (params, expected) in [
        (
            json!({"approvalPolicy": "never"}),
            "approvalPolicy \"never\" is above this server's ceiling \"on-request\" (set by --max-approval-policy)",
        ),
        (json!({"cwd": "/"}), "cwd \"/\" is outside"),
    ] {
        let created = http(&addr, "POST", "/v1/threads", &[], Some(&params)).await;
        assert_eq!(created.status, 400, "{}", created.body);
        let error = &created.json()["error"];
        assert_eq!(error["code"], "bad_request");
        assert!(
            error["message"].as_str().unwrap().contains(expected),
            "{error}"
        );
    }
    let list = http(&addr, "GET", "/v1/threads", &[], None).await.json();
    assert_eq!(list["data"], json!([]), "{list}");

    let created = http(&addr, "POST", "/v1/threads", &[], Some(&json!({}))).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let thread_id = created.json()["thread"]["id"].as_str().unwrap().to_owned();
    let turn = http(
        &addr,
        "POST",
        &format!("/v1/threads/{thread_id}/turns"),
        &[],
        Some(&json!({"input": [{"type": "text", "text": "hi"}], "approvalPolicy": "never"})),
    )
    .await;
    assert_eq!(turn.status, 400, "{}", turn.body);
    let read = http(&addr, "GET", &format!("/v1/threads/{thread_id}"), &[], None)
        .await
        .json();
    assert_eq!(read["thread"]["turns"], json!([]), "{read}");
}
