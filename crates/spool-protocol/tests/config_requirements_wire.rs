//! `configRequirements/read` on the wire: read as a Codex client sends it
//! (no params at all), answered in the shape of Codex 0.163.0's
//! `ConfigRequirementsReadResponse` (checked against that schema when the
//! shared copy is present).

use std::path::PathBuf;

use serde_json::{Value, json};
use spool_protocol::jsonrpc::JsonRpcRequest;
use spool_protocol::*;

/// Codex's schema, outside this repository (never copied into it).
fn codex_schema() -> Option<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../../../shared/codex-app-server-schema/0.163.0/v2/ConfigRequirementsReadResponse.json",
    );
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).unwrap()),
        Err(_) => {
            println!(
                "note: {} is absent; not checking against Codex's schema",
                path.display()
            );
            None
        }
    }
}

fn assert_codex_valid(response: &Value) {
    let Some(schema) = codex_schema() else {
        return;
    };
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(response)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{response} is not Codex's: {errors:?}");
}

#[test]
fn read_without_params_as_codex_sends_it() {
    let request: JsonRpcRequest =
        serde_json::from_value(json!({"id": 3, "method": "configRequirements/read"})).unwrap();
    let parsed = ClientRequest::from_jsonrpc(&request).unwrap();
    assert_eq!(
        parsed,
        ClientRequest::ConfigRequirementsRead(ConfigRequirementsReadParams {})
    );
    assert_eq!(parsed.thread_id(), None);
}

#[test]
fn no_requirements_is_null() {
    let response = serde_json::to_value(ConfigRequirementsReadResponse::default()).unwrap();
    assert_eq!(response, json!({"requirements": null}));
    assert_codex_valid(&response);
}

#[test]
fn allowed_values_in_codex_field_names() {
    let response = serde_json::to_value(ConfigRequirementsReadResponse {
        requirements: Some(ConfigRequirements {
            allowed_approval_policies: Some(vec![
                AskForApproval::Untrusted,
                AskForApproval::OnRequest,
            ]),
            allowed_sandbox_modes: Some(vec![SandboxMode::ReadOnly]),
            allowed_roots: None,
        }),
    })
    .unwrap();
    assert_eq!(
        response,
        json!({"requirements": {
            "allowedApprovalPolicies": ["untrusted", "on-request"],
            "allowedSandboxModes": ["read-only"],
        }})
    );
    assert_codex_valid(&response);
    // spool's roots are an addition Codex's schema tolerates (no
    // `additionalProperties: false`).
    let with_roots = serde_json::to_value(ConfigRequirementsReadResponse {
        requirements: Some(ConfigRequirements {
            allowed_roots: Some(vec!["/srv/work".into()]),
            ..ConfigRequirements::default()
        }),
    })
    .unwrap();
    assert_eq!(
        with_roots,
        json!({"requirements": {
            "allowedApprovalPolicies": null,
            "allowedSandboxModes": null,
            "allowedRoots": ["/srv/work"],
        }})
    );
    assert_codex_valid(&with_roots);
}

#[test]
fn codex_refuses_on_failure() {
    // Why `on-failure` is left out for Codex clients: 0.163.0 no longer has it.
    let Some(schema) = codex_schema() else {
        return;
    };
    let response = json!({"requirements": {"allowedApprovalPolicies": ["on-failure"]}});
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(!validator.is_valid(&response));
}
