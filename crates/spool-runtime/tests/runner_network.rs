//! Network approvals: a command naming a host asks about the host; an
//! `applyNetworkPolicyAmendment` answer records an allow or deny rule that
//! later requests for that host honour without asking.

mod runner_support;

use runner_support::*;
use serde_json::json;
use spool_protocol::*;
use spool_runtime::{RunStatus, ShellTool, Tool};
use spool_testkit::responses_api::{calls_response, message_response};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};

fn amendment(host: &str, action: NetworkPolicyRuleAction) -> ServerRequestAnswer {
    command_answer(
        CommandExecutionApprovalDecision::ApplyNetworkPolicyAmendment {
            network_policy_amendment: NetworkPolicyAmendment {
                host: host.to_owned(),
                action,
            },
        },
    )
}

fn echo(call: &str, url: &str) -> (String, String, serde_json::Value) {
    (
        call.to_owned(),
        "shell".to_owned(),
        json!({"command": ["echo", url]}),
    )
}

#[tokio::test]
async fn network_rules_from_answers_are_honoured_by_later_requests() {
    let calls = [
        echo("c1", "https://pypi.org/simple"),
        echo("c2", "https://pypi.org/other"),
        echo("c3", "https://evil.example/x"),
        echo("c4", "https://evil.example/y"),
    ];
    let mut responses: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(n, (id, name, args))| {
            calls_response(
                &format!("r{n}"),
                &[(id.as_str(), name.as_str(), args.clone())],
            )
        })
        .collect();
    responses.push(message_response("done", &["Done."]));
    let f = Fixture::new(responses).await;
    let rules = f.dir.path().join("rules").join("default.rules");
    let client = ScriptedClient::new([
        amendment("pypi.org", NetworkPolicyRuleAction::Allow),
        amendment("evil.example", NetworkPolicyRuleAction::Deny),
    ]);
    let mut runner = f.runner().with_client(client.clone());
    runner.rules_file = Some(rules.clone());
    let agent = f
        .agent("fetcher")
        .with_tool(Tool::Shell(ShellTool::default()))
        .with_policy(ApprovalPolicy::OnRequest, SandboxMode::WorkspaceWrite);
    let result = f.run(&runner, agent, "fetch things").await;
    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);

    // Asked once per host, about the host.
    let asked = client.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    let hosts: Vec<String> = asked
        .iter()
        .map(|request| match &request.request {
            ServerRequest::CommandExecutionRequestApproval(p) => {
                p.network_approval_context.as_ref().unwrap().host.clone()
            }
            other => panic!("unexpected request {other:?}"),
        })
        .collect();
    assert_eq!(hosts, ["pypi.org", "evil.example"]);

    // What ran: both pypi.org commands; neither evil.example one.
    let bodies = f.request_bodies();
    let output_of = |n: usize, call: &str| {
        outputs(&bodies[n])
            .into_iter()
            .find(|(id, _)| id == call)
            .map(|(_, out)| out)
            .unwrap()
    };
    assert!(output_of(1, "c1").contains("Exit code: 0"));
    assert!(
        output_of(2, "c2").contains("Exit code: 0"),
        "allowed without asking"
    );
    assert!(
        !output_of(3, "c3").contains("Exit code"),
        "declined by the deny amendment"
    );
    let refused = output_of(4, "c4");
    assert!(
        refused.contains("evil.example"),
        "refused by the rule: {refused}"
    );

    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(
        text.contains("network_rule(host=\"pypi.org\", decision=\"allow\"")
            && text.contains("network_rule(host=\"evil.example\", decision=\"deny\""),
        "{text}"
    );
}
