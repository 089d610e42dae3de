//! The decision table: every policy × sandbox for each kind of call.

use std::path::{Path, PathBuf};

use spool_tools::policy::{
    ApprovalPolicy, ExecRule, Grants, NetworkRule, RuleDecision, SandboxMode, ToolRequest, Verdict,
    decide,
};

const ROOT: &str = "/work/repo";
const POLICIES: [ApprovalPolicy; 4] = [
    ApprovalPolicy::Never,
    ApprovalPolicy::Untrusted,
    ApprovalPolicy::OnRequest,
    ApprovalPolicy::OnFailure,
];
const SANDBOXES: [SandboxMode; 3] = [
    SandboxMode::ReadOnly,
    SandboxMode::WorkspaceWrite,
    SandboxMode::DangerFullAccess,
];

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The test's stand-in for the shell module's list.
fn known_safe(argv: &[String]) -> bool {
    matches!(argv.first().map(String::as_str), Some("ls" | "cat" | "git"))
        && argv.get(1).map(String::as_str) != Some("push")
}

/// R = run, A = ask, X = refuse.
fn letter(v: &Verdict) -> char {
    match v {
        Verdict::Run => 'R',
        Verdict::Ask { .. } => 'A',
        Verdict::Refuse { .. } => 'X',
    }
}

enum Call {
    Shell(Vec<String>, bool),
    Patch(Vec<PathBuf>),
    Net(&'static str),
}

fn verdict(policy: ApprovalPolicy, sandbox: SandboxMode, call: &Call, grants: &Grants) -> Verdict {
    let request = match call {
        Call::Shell(argv, esc) => ToolRequest::Shell {
            argv,
            cwd: Path::new(ROOT),
            escalation_requested: *esc,
        },
        Call::Patch(paths) => ToolRequest::Patch {
            paths,
            extra_roots: &[],
        },
        Call::Net(host) => ToolRequest::Network { host },
    };
    decide(
        policy,
        sandbox,
        Path::new(ROOT),
        request,
        grants,
        known_safe,
    )
}

#[test]
fn decision_table() {
    let safe = || Call::Shell(argv(&["ls", "-la"]), false);
    let unsafe_cmd = || Call::Shell(argv(&["rm", "-rf", "build"]), false);
    let inside = || Call::Patch(vec![PathBuf::from("/work/repo/src/a.rs")]);
    let outside = || {
        Call::Patch(vec![
            PathBuf::from("/work/repo/src/a.rs"),
            PathBuf::from("/etc/hosts"),
        ])
    };
    let none = Grants::new();

    let mut session = Grants::new();
    session.approve_command_for_session(argv(&["rm", "-rf", "build"]));
    session.approve_root_for_session("/etc");
    session.approve_root_for_session("/work/repo");

    let mut rules = Grants::new();
    rules.add_exec_rule(ExecRule::new(argv(&["rm"]), RuleDecision::Allow));
    rules.add_exec_rule(ExecRule::new(argv(&["ls"]), RuleDecision::Deny));
    rules.add_network_rule(NetworkRule::new("pypi.org", RuleDecision::Allow));
    rules.add_network_rule(NetworkRule::new("evil.example", RuleDecision::Deny));

    // Rows: never, untrusted, on-request, on-failure.
    // Columns: read-only, workspace-write, danger-full-access.
    let cases: Vec<(&str, Call, &Grants, [&str; 4])> = vec![
        ("safe command", safe(), &none, ["RRR", "RRR", "RRR", "RRR"]),
        (
            "unsafe command",
            unsafe_cmd(),
            &none,
            ["XXR", "AAA", "AAR", "AAR"],
        ),
        (
            "patch in workspace",
            inside(),
            &none,
            ["XRR", "AAA", "ARR", "ARR"],
        ),
        (
            "patch outside",
            outside(),
            &none,
            ["XXR", "AAA", "AAR", "AAR"],
        ),
        (
            "escalation, safe command",
            Call::Shell(argv(&["ls"]), true),
            &none,
            ["RRR", "RRR", "AAR", "AAR"],
        ),
        (
            "escalation, unsafe command",
            Call::Shell(argv(&["rm", "-rf", "build"]), true),
            &none,
            ["XXR", "AAA", "AAR", "AAR"],
        ),
        (
            "session-approved command",
            unsafe_cmd(),
            &session,
            ["RRR"; 4],
        ),
        (
            "session approval is exact",
            Call::Shell(argv(&["rm", "-rf", "/"]), false),
            &session,
            ["XXR", "AAA", "AAR", "AAR"],
        ),
        (
            "session-approved command, escalation",
            Call::Shell(argv(&["rm", "-rf", "build"]), true),
            &session,
            ["RRR"; 4],
        ),
        ("session-approved roots", outside(), &session, ["RRR"; 4]),
        ("prefix rule allows", unsafe_cmd(), &rules, ["RRR"; 4]),
        ("rule denies a safe command", safe(), &rules, ["XXX"; 4]),
        (
            "network allow rule",
            Call::Net("PyPI.org"),
            &rules,
            ["RRR"; 4],
        ),
        (
            "network deny rule",
            Call::Net("evil.example"),
            &rules,
            ["XXX"; 4],
        ),
        (
            "network, no rule",
            Call::Net("example.com"),
            &none,
            ["XXR", "AAR", "AAR", "AAR"],
        ),
    ];

    let mut wrong = Vec::new();
    for (name, call, grants, rows) in &cases {
        for (policy, row) in POLICIES.iter().zip(rows) {
            for (sandbox, want) in SANDBOXES.iter().zip(row.chars()) {
                let got = verdict(*policy, *sandbox, call, grants);
                if letter(&got) != want {
                    wrong.push(format!(
                        "{name} / {policy} / {sandbox}: want {want}, got {got:?}"
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn reasons_say_why() {
    let rm = argv(&["rm", "-rf", "my dir"]);
    let call = Call::Shell(rm, false);
    let v = verdict(
        ApprovalPolicy::Never,
        SandboxMode::WorkspaceWrite,
        &call,
        &Grants::new(),
    );
    assert_eq!(
        v,
        Verdict::Refuse {
            reason: "`rm -rf 'my dir'` is outside the sandbox (workspace-write) and the approval policy is never".into()
        }
    );

    let patch = Call::Patch(vec![PathBuf::from("/etc/hosts")]);
    let v = verdict(
        ApprovalPolicy::OnRequest,
        SandboxMode::WorkspaceWrite,
        &patch,
        &Grants::new(),
    );
    let Verdict::Ask { reason } = v else {
        panic!("{v:?}")
    };
    assert!(
        reason.contains("/etc/hosts outside the workspace /work/repo"),
        "{reason}"
    );

    let esc = Call::Shell(argv(&["ls"]), true);
    let v = verdict(
        ApprovalPolicy::OnRequest,
        SandboxMode::ReadOnly,
        &esc,
        &Grants::new(),
    );
    assert!(
        matches!(&v, Verdict::Ask { reason } if reason.contains("asked to run `ls` outside the sandbox")),
        "{v:?}"
    );
}

#[test]
fn deny_beats_allow_whatever_the_order() {
    let mut grants = Grants::new();
    grants.add_exec_rule(ExecRule::new(argv(&["git"]), RuleDecision::Allow));
    grants.add_exec_rule(ExecRule::new(argv(&["git", "push"]), RuleDecision::Deny));
    grants.approve_command_for_session(argv(&["git", "push", "origin"]));
    let push = Call::Shell(argv(&["git", "push", "origin"]), false);
    let commit = Call::Shell(argv(&["git", "commit", "-m", "x"]), false);
    let v = verdict(
        ApprovalPolicy::OnRequest,
        SandboxMode::DangerFullAccess,
        &push,
        &grants,
    );
    assert!(
        matches!(&v, Verdict::Refuse { reason } if reason.contains("denied by the rule on commands starting with `git push`")),
        "{v:?}"
    );
    let v = verdict(
        ApprovalPolicy::Never,
        SandboxMode::ReadOnly,
        &commit,
        &grants,
    );
    assert_eq!(v, Verdict::Run);
}

#[test]
fn prefix_rules_match_whole_words_only() {
    let mut grants = Grants::new();
    grants.add_exec_rule(ExecRule::new(argv(&["cargo", "test"]), RuleDecision::Allow));
    let run = |words: &[&str]| {
        letter(&verdict(
            ApprovalPolicy::Never,
            SandboxMode::ReadOnly,
            &Call::Shell(argv(words), false),
            &grants,
        ))
    };
    assert_eq!(run(&["cargo", "test", "-p", "x"]), 'R');
    assert_eq!(run(&["cargo", "test"]), 'R');
    assert_eq!(run(&["cargo", "testx"]), 'X');
    assert_eq!(run(&["cargo"]), 'X');
}

#[test]
fn thread_scoped_rules_apply_only_in_their_thread() {
    let rule = ExecRule::new(argv(&["make"]), RuleDecision::Allow).for_thread("t1");
    let net = NetworkRule::new("pypi.org", RuleDecision::Deny).for_thread("t1");
    let make = Call::Shell(argv(&["make"]), false);
    let pypi = Call::Net("pypi.org");
    for (mut grants, want_make, want_net) in [
        (Grants::for_thread("t1"), 'R', 'X'),
        (Grants::for_thread("t2"), 'X', 'X'),
        (Grants::new(), 'X', 'X'),
    ] {
        grants.add_exec_rule(rule.clone());
        grants.add_network_rule(net.clone());
        let p = ApprovalPolicy::Never;
        let s = SandboxMode::WorkspaceWrite;
        assert_eq!(letter(&verdict(p, s, &make, &grants)), want_make);
        assert_eq!(letter(&verdict(p, s, &pypi, &grants)), want_net);
        // Under on-request the unscoped fallback (ask) shows the rule is ignored.
        let v = verdict(ApprovalPolicy::OnRequest, s, &pypi, &grants);
        assert_eq!(letter(&v), if want_make == 'R' { 'X' } else { 'A' });
    }
}

#[test]
fn patch_paths_are_compared_lexically() {
    let sneaky = Call::Patch(vec![PathBuf::from("/work/repo/../repo2/x")]);
    let sibling = Call::Patch(vec![PathBuf::from("/work/repo2/x")]);
    let relative = Call::Patch(vec![PathBuf::from("src/x")]);
    let empty = Call::Patch(vec![]);
    for (call, want) in [
        (&sneaky, 'X'),
        (&sibling, 'X'),
        (&relative, 'X'),
        (&empty, 'R'),
    ] {
        let v = verdict(
            ApprovalPolicy::Never,
            SandboxMode::WorkspaceWrite,
            call,
            &Grants::new(),
        );
        assert_eq!(letter(&v), want, "{v:?}");
    }
}

#[test]
fn a_patch_may_write_in_an_extra_writable_root_but_not_its_git() {
    let workspace = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let grants = Grants::default();
    let verdict = |paths: &[PathBuf], extra_roots: &[PathBuf]| {
        decide(
            ApprovalPolicy::Never,
            SandboxMode::WorkspaceWrite,
            workspace.path(),
            ToolRequest::Patch { paths, extra_roots },
            &grants,
            known_safe,
        )
    };
    let roots = [extra.path().to_path_buf()];
    let in_extra = [extra.path().join("f.txt")];
    assert_eq!(verdict(&in_extra, &roots), Verdict::Run);
    assert!(matches!(verdict(&in_extra, &[]), Verdict::Refuse { .. }));
    let git = [extra.path().join(".git/config")];
    assert!(matches!(verdict(&git, &roots), Verdict::Refuse { .. }));
    let other = [elsewhere.path().join("f.txt")];
    assert!(matches!(verdict(&other, &roots), Verdict::Refuse { .. }));
}
