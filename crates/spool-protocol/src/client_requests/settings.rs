//! Settings that `thread/start`, `thread/resume`, `thread/fork` and
//! `turn/start` share: who reviews approvals, the full sandbox policy, and
//! the tools a client declares for itself.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Who approval requests are routed to (Codex `ApprovalsReviewer`).
///
/// Surprising in Codex: the automatic reviewer is *written* with its legacy
/// name `guardian_subagent`, while `auto_review` is accepted too. Both are
/// snake_case, unlike almost everything else in v2.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ApprovalsReviewer {
    #[default]
    #[serde(rename = "user")]
    User,
    /// A reviewer subagent decides instead of a person.
    #[serde(rename = "guardian_subagent", alias = "auto_review")]
    AutoReview,
}

/// Whether an externally sandboxed process may use the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NetworkAccess {
    #[default]
    Restricted,
    Enabled,
}

/// The full sandbox policy (Codex v2 `SandboxPolicy`), as `turn/start`'s
/// `sandboxPolicy` takes it and the `thread/*` responses report it.
/// `thread/*` requests take the coarser [`crate::SandboxMode`] instead.
///
/// Every field is written (no `skip_serializing_if`); every field may be
/// omitted when read. Codex rejects the removed `readOnly.access` /
/// `workspaceWrite.readOnlyAccess` = `restricted`; spool ignores them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SandboxPolicy {
    DangerFullAccess,
    #[serde(rename_all = "camelCase")]
    ReadOnly {
        #[serde(default)]
        network_access: bool,
    },
    /// The process is already sandboxed by something outside spool.
    #[serde(rename_all = "camelCase")]
    ExternalSandbox {
        #[serde(default)]
        network_access: NetworkAccess,
    },
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        /// Absolute paths writable besides the working directory.
        #[serde(default)]
        writable_roots: Vec<String>,
        #[serde(default)]
        network_access: bool,
        #[serde(default)]
        exclude_tmpdir_env_var: bool,
        #[serde(default)]
        exclude_slash_tmp: bool,
    },
}

impl SandboxPolicy {
    /// The coarse mode this policy falls under.
    pub fn mode(&self) -> crate::SandboxMode {
        match self {
            SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => {
                crate::SandboxMode::DangerFullAccess
            }
            SandboxPolicy::ReadOnly { .. } => crate::SandboxMode::ReadOnly,
            SandboxPolicy::WorkspaceWrite { .. } => crate::SandboxMode::WorkspaceWrite,
        }
    }

    /// The default policy of a coarse mode (no extra roots, no network).
    pub fn from_mode(mode: crate::SandboxMode) -> Self {
        match mode {
            crate::SandboxMode::ReadOnly => SandboxPolicy::ReadOnly {
                network_access: false,
            },
            crate::SandboxMode::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
                writable_roots: Vec::new(),
                network_access: false,
                exclude_tmpdir_env_var: false,
                exclude_slash_tmp: false,
            },
            crate::SandboxMode::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        }
    }
}

/// Why `thread/start` was sent (Codex `ThreadStartSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadStartSource {
    Startup,
    /// The user cleared the conversation and started over.
    Clear,
}

/// A tool the client runs itself, declared on `thread/start` and called
/// through the `item/tool/call` server request (Codex `DynamicToolSpec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DynamicToolSpec {
    Function(DynamicToolFunctionSpec),
    Namespace(DynamicToolNamespaceSpec),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolFunctionSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// Keep the tool out of the model's tool list until it is searched for.
    #[serde(default, skip_serializing_if = "super::serde_helpers::is_false")]
    pub defer_loading: bool,
}

/// Tools grouped under one name; the model calls them as `namespace.tool`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolNamespaceSpec {
    pub name: String,
    pub description: String,
    pub tools: Vec<DynamicToolNamespaceTool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DynamicToolNamespaceTool {
    Function(DynamicToolFunctionSpec),
}

/// Codex's older flat spelling: `{namespace?, name, description,
/// inputSchema, deferLoading?, exposeToContext?}` with no `type`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyDynamicToolSpec {
    #[serde(default)]
    namespace: Option<String>,
    name: String,
    description: String,
    input_schema: Value,
    #[serde(default)]
    defer_loading: Option<bool>,
    #[serde(default)]
    expose_to_context: Option<bool>,
}

/// Reads `dynamicTools` as Codex does: either every entry is tagged with
/// `type` (the current shape), or none is (the older flat shape, grouped
/// here into namespaces in first-seen order). A mix is an error.
pub(crate) fn deserialize_dynamic_tools<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<DynamicToolSpec>>, D::Error> {
    let Some(values) = Option::<Vec<Value>>::deserialize(deserializer)? else {
        return Ok(None);
    };
    normalize_dynamic_tools(values)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn normalize_dynamic_tools(values: Vec<Value>) -> Result<Vec<DynamicToolSpec>, String> {
    let is_legacy = |v: &Value| {
        v.get("type").is_none()
            || v.get("namespace").is_some()
            || v.get("exposeToContext").is_some()
    };
    let legacy = values.iter().any(|v| {
        is_legacy(v)
            || v.get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| tools.iter().any(is_legacy))
    });
    let canonical = values.iter().any(|v| v.get("type").is_some());
    if legacy && canonical {
        return Err(
            "dynamic tools must use either canonical or legacy format consistently".to_owned(),
        );
    }
    if !legacy {
        return values
            .into_iter()
            .map(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
            .collect();
    }
    let mut out: Vec<DynamicToolSpec> = Vec::with_capacity(values.len());
    let mut namespaces: HashMap<String, usize> = HashMap::new();
    for value in values {
        let tool: LegacyDynamicToolSpec =
            serde_json::from_value(value).map_err(|e| e.to_string())?;
        let function = DynamicToolFunctionSpec {
            name: tool.name,
            description: tool.description,
            input_schema: tool.input_schema,
            defer_loading: tool
                .defer_loading
                .unwrap_or_else(|| tool.expose_to_context.is_some_and(|visible| !visible)),
        };
        let Some(namespace) = tool.namespace else {
            out.push(DynamicToolSpec::Function(function));
            continue;
        };
        let index = match namespaces.get(&namespace) {
            Some(&index) => index,
            None => {
                namespaces.insert(namespace.clone(), out.len());
                out.push(DynamicToolSpec::Namespace(DynamicToolNamespaceSpec {
                    name: namespace,
                    description: String::new(),
                    tools: Vec::new(),
                }));
                out.len() - 1
            }
        };
        if let Some(DynamicToolSpec::Namespace(ns)) = out.get_mut(index) {
            ns.tools.push(DynamicToolNamespaceTool::Function(function));
        }
    }
    Ok(out)
}
