//! Wire spellings (Codex app-server v2) and what each answer does to grants.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use spool_tools::policy::{
    ApprovalDecision, ApprovalPolicy, DecisionEffect, ExecRule, Grants, NetworkPolicyAmendment,
    NetworkRule, Rule, RuleDecision, SandboxMode, ToolRequest, Verdict, decide,
};

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn round_trip<T>(value: &T, wire: Value)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    assert_eq!(serde_json::to_value(value).unwrap(), wire);
    assert_eq!(&serde_json::from_value::<T>(wire).unwrap(), value);
}

#[test]
fn decision_wire_spellings() {
    round_trip(&ApprovalDecision::Accept, json!("accept"));
    round_trip(
        &ApprovalDecision::AcceptForSession,
        json!("acceptForSession"),
    );
    round_trip(&ApprovalDecision::Decline, json!("decline"));
    round_trip(&ApprovalDecision::Cancel, json!("cancel"));
    round_trip(
        &ApprovalDecision::AcceptWithExecpolicyAmendment {
            execpolicy_amendment: argv(&["cargo", "test"]),
        },
        json!({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["cargo", "test"]}}),
    );
    round_trip(
        &ApprovalDecision::ApplyNetworkPolicyAmendment {
            network_policy_amendment: NetworkPolicyAmendment {
                host: "pypi.org".into(),
                action: RuleDecision::Deny,
            },
        },
        json!({"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "pypi.org", "action": "deny"}}}),
    );
    assert!(serde_json::from_value::<ApprovalDecision>(json!("approve")).is_err());
}

#[test]
fn mode_wire_spellings_and_defaults() {
    for (p, s) in [
        (ApprovalPolicy::Untrusted, "untrusted"),
        (ApprovalPolicy::OnFailure, "on-failure"),
        (ApprovalPolicy::OnRequest, "on-request"),
        (ApprovalPolicy::Never, "never"),
    ] {
        round_trip(&p, json!(s));
        assert_eq!(s.parse::<ApprovalPolicy>().unwrap(), p);
        assert_eq!(p.to_string(), s);
    }
    for (m, s) in [
        (SandboxMode::ReadOnly, "read-only"),
        (SandboxMode::WorkspaceWrite, "workspace-write"),
        (SandboxMode::DangerFullAccess, "danger-full-access"),
    ] {
        round_trip(&m, json!(s));
        assert_eq!(s.parse::<SandboxMode>().unwrap(), m);
        assert_eq!(m.to_string(), s);
    }
    assert_eq!(ApprovalPolicy::default(), ApprovalPolicy::OnRequest);
    assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);

    assert_eq!(
        "on_request"
            .parse::<ApprovalPolicy>()
            .unwrap_err()
            .to_string(),
        r#"invalid approval policy "on_request"; expected one of: untrusted, on-failure, on-request, never"#
    );
    assert_eq!(
        "full".parse::<SandboxMode>().unwrap_err().to_string(),
        r#"invalid sandbox mode "full"; expected one of: read-only, workspace-write, danger-full-access"#
    );
}

const ROOT: &str = "/work/repo";

fn shell(argv: &[String]) -> ToolRequest<'_> {
    ToolRequest::Shell {
        argv,
        cwd: Path::new(ROOT),
        escalation_requested: false,
    }
}

/// on-request / workspace-write with nothing known safe: every call asks
/// until a grant covers it.
fn check(request: ToolRequest<'_>, grants: &Grants) -> Verdict {
    decide(
        ApprovalPolicy::OnRequest,
        SandboxMode::WorkspaceWrite,
        Path::new(ROOT),
        request,
        grants,
        |_| false,
    )
}

fn effect(run: bool, interrupt_turn: bool, new_rule: Option<Rule>) -> DecisionEffect {
    DecisionEffect {
        run,
        interrupt_turn,
        new_rule,
    }
}

#[test]
fn accept_decline_cancel_grant_nothing() {
    let cmd = argv(&["make"]);
    for (decision, want) in [
        (ApprovalDecision::Accept, effect(true, false, None)),
        (ApprovalDecision::Decline, effect(false, false, None)),
        (ApprovalDecision::Cancel, effect(false, true, None)),
    ] {
        let mut grants = Grants::new();
        assert_eq!(decision.apply_to(&mut grants, shell(&cmd)), want);
        assert_eq!(grants, Grants::new());
    }
}

#[test]
fn accept_for_session_approves_exactly_what_was_asked() {
    let mut grants = Grants::new();
    let cmd = argv(&["make", "install"]);
    assert!(matches!(check(shell(&cmd), &grants), Verdict::Ask { .. }));
    let e = ApprovalDecision::AcceptForSession.apply_to(&mut grants, shell(&cmd));
    assert_eq!(e, effect(true, false, None));
    assert_eq!(check(shell(&cmd), &grants), Verdict::Run);
    let other = argv(&["make", "uninstall"]);
    assert!(matches!(check(shell(&other), &grants), Verdict::Ask { .. }));

    let paths = vec![PathBuf::from("/etc/hosts")];
    let patch = ToolRequest::Patch {
        paths: &paths,
        extra_roots: &[],
    };
    ApprovalDecision::AcceptForSession.apply_to(&mut grants, patch);
    assert_eq!(check(patch, &grants), Verdict::Run);
    let sibling = vec![PathBuf::from("/etc/passwd")];
    assert!(matches!(
        check(
            ToolRequest::Patch {
                paths: &sibling,
                extra_roots: &[]
            },
            &grants
        ),
        Verdict::Ask { .. }
    ));

    let net = ToolRequest::Network { host: "pypi.org" };
    ApprovalDecision::AcceptForSession.apply_to(&mut grants, net);
    assert_eq!(check(net, &grants), Verdict::Run);
}

#[test]
fn amendments_add_rules_to_persist() {
    let mut grants = Grants::new();
    let cmd = argv(&["cargo", "test", "-p", "x"]);
    let e = ApprovalDecision::AcceptWithExecpolicyAmendment {
        execpolicy_amendment: argv(&["cargo", "test"]),
    }
    .apply_to(&mut grants, shell(&cmd));
    let rule = ExecRule::new(argv(&["cargo", "test"]), RuleDecision::Allow);
    assert_eq!(e, effect(true, false, Some(Rule::Exec(rule))));
    assert_eq!(
        check(shell(&argv(&["cargo", "test"])), &grants),
        Verdict::Run
    );

    // An empty prefix would allow everything: the call runs, no rule is added.
    let e = ApprovalDecision::AcceptWithExecpolicyAmendment {
        execpolicy_amendment: vec![],
    }
    .apply_to(&mut grants, shell(&cmd));
    assert_eq!(e, effect(true, false, None));
    assert_eq!(grants.exec_rules.rules().len(), 1);

    let net = ToolRequest::Network { host: "pypi.org" };
    let deny = ApprovalDecision::ApplyNetworkPolicyAmendment {
        network_policy_amendment: NetworkPolicyAmendment {
            host: "pypi.org".into(),
            action: RuleDecision::Deny,
        },
    };
    let e = deny.apply_to(&mut grants, net);
    let rule = NetworkRule::new("pypi.org", RuleDecision::Deny);
    assert_eq!(e, effect(false, false, Some(Rule::Network(rule))));
    assert!(matches!(check(net, &grants), Verdict::Refuse { .. }));

    let allow = ApprovalDecision::ApplyNetworkPolicyAmendment {
        network_policy_amendment: NetworkPolicyAmendment {
            host: "crates.io".into(),
            action: RuleDecision::Allow,
        },
    };
    let crates = ToolRequest::Network { host: "crates.io" };
    assert!(allow.apply_to(&mut grants, crates).run);
    assert_eq!(check(crates, &grants), Verdict::Run);
}
