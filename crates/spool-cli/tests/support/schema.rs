//! Codex 0.163.0's JSON Schema of its app-server protocol as the oracle
//! for every message a test client receives from `spool serve`.
//!
//! A client that did not opt into spool's additions (`initialize` without
//! `capabilities.spool`) must be able to read everything spool sends it
//! with Codex's own types: each notification and server request validates
//! against `ServerNotification.json` / `ServerRequest.json`, each result
//! against the `…Response` definition of the method it answers, each error
//! against `JSONRPCError.json`. A violation fails the test with the
//! message, the failing value's path and the schema path.
//!
//! The schema comes from `scripts/codex-schema.sh`, which finds it beside
//! the checkout (`../shared`) or generates it from Codex's CLI wheel into
//! a cache outside the clone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::Validator;
use serde_json::{Value, json};

/// The schema's folder, found (or generated) once per test process.
pub fn schema_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/codex-schema.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} could not find or generate Codex 0.163.0's schema",
            script.display()
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

fn read(name: &str) -> Value {
    let path = schema_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn compile(schema: &Value, what: &str) -> Validator {
    jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{what} does not compile: {e}"))
}

/// The compiled schemas; response validators are compiled when first
/// needed (the v2 bundle is large).
pub struct Oracle {
    notifications: Messages,
    requests: Messages,
    error: Validator,
    /// Every v2 definition, for the `…Response` of each method.
    definitions: Value,
    /// Method → the definition its result must satisfy.
    response_of: HashMap<String, String>,
    compiled: Mutex<HashMap<String, Arc<Validator>>>,
}

pub fn oracle() -> &'static Oracle {
    static ORACLE: OnceLock<Oracle> = OnceLock::new();
    ORACLE.get_or_init(Oracle::load)
}

impl Oracle {
    fn load() -> Oracle {
        let bundle = read("codex_app_server_protocol.v2.schemas.json");
        let definitions = bundle["definitions"].clone();
        // Each client request's params are named `XParams`; its result is
        // `XResponse` (`thread/name/set` → `ThreadSetNameResponse`).
        let mut response_of = HashMap::new();
        let client_requests = read("ClientRequest.json");
        for variant in client_requests["oneOf"].as_array().unwrap() {
            let method = variant["properties"]["method"]["enum"][0]
                .as_str()
                .unwrap()
                .to_owned();
            let params = variant["properties"]["params"]["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix("#/definitions/"));
            if let Some(name) = params.and_then(|p| p.strip_suffix("Params")) {
                let response = format!("{name}Response");
                if definitions.get(&response).is_some() {
                    response_of.insert(method, response);
                }
            }
        }
        // Methods without params, named differently.
        for (method, response) in [
            ("configRequirements/read", "ConfigRequirementsReadResponse"),
            ("account/rateLimits/read", "GetAccountRateLimitsResponse"),
            ("account/usage/read", "GetAccountTokenUsageResponse"),
            (
                "windowsSandbox/readiness",
                "WindowsSandboxReadinessResponse",
            ),
        ] {
            response_of.insert(method.to_owned(), response.to_owned());
        }
        // `initialize` is a v1 message; its result has its own file.
        let mut compiled = HashMap::new();
        compiled.insert(
            "initialize".to_owned(),
            Arc::new(compile(
                &read("v1/InitializeResponse.json"),
                "InitializeResponse",
            )),
        );
        Oracle {
            notifications: Messages::new(read("ServerNotification.json")),
            requests: Messages::new(read("ServerRequest.json")),
            error: compile(&read("JSONRPCError.json"), "JSONRPCError"),
            definitions,
            response_of,
            compiled: Mutex::new(compiled),
        }
    }

    /// The validator of `method`'s result; `None` for a method Codex's
    /// schema does not have (spool's own, or one Codex dropped).
    fn response(&self, method: &str) -> Option<Arc<Validator>> {
        let mut compiled = self.compiled.lock().unwrap();
        if let Some(found) = compiled.get(method) {
            return Some(found.clone());
        }
        let name = self.response_of.get(method)?;
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$ref": format!("#/definitions/{name}"),
            "definitions": self.definitions,
        });
        let validator = Arc::new(compile(&schema, name));
        compiled.insert(method.to_owned(), validator.clone());
        Some(validator)
    }

    /// Whether Codex 0.163.0 has a client request of this name.
    pub fn knows_method(&self, method: &str) -> bool {
        self.response_of.contains_key(method) || method == "initialize"
    }
}

/// One direction's messages (`ServerNotification.json`,
/// `ServerRequest.json`): a `oneOf` keyed by `method`, checked through the
/// variant of the message's own method so a failure names its field
/// rather than every variant.
struct Messages {
    file: Value,
    compiled: Mutex<HashMap<String, Arc<Validator>>>,
}

impl Messages {
    fn new(file: Value) -> Messages {
        Messages {
            file,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    fn check(&self, method: &str, message: &Value) -> Vec<String> {
        let validator = {
            let mut compiled = self.compiled.lock().unwrap();
            match compiled.get(method) {
                Some(found) => found.clone(),
                None => {
                    let Some(variant) = self.file["oneOf"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|v| v["properties"]["method"]["enum"][0] == method)
                    else {
                        return vec![format!("Codex has no {method}")];
                    };
                    let mut schema = variant.clone();
                    schema["$schema"] = json!("http://json-schema.org/draft-07/schema#");
                    schema["definitions"] = self.file["definitions"].clone();
                    let validator = Arc::new(compile(&schema, method));
                    compiled.insert(method.to_owned(), validator.clone());
                    validator
                }
            }
        };
        violations(&validator, message)
    }
}

fn violations(validator: &Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| format!("at {} (schema {}): {e}", e.instance_path(), e.schema_path()))
        .collect()
}

/// One client connection's conformance check: what it asked (to know what
/// each reply answers) and whether it opted into spool's additions.
#[derive(Default)]
pub struct Conformance {
    opted_in: bool,
    pending: HashMap<String, String>,
    /// Results of methods Codex's schema does not have, left unchecked.
    pub unchecked: Vec<String>,
}

impl Conformance {
    /// Notes a message the client sends.
    pub fn sent(&mut self, message: &Value) {
        let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
            return;
        };
        if method == "initialize" && !message["params"]["capabilities"]["spool"].is_null() {
            self.opted_in = true;
        }
        self.pending.insert(id.to_string(), method.to_owned());
    }

    /// Checks a message the client received; panics on a violation.
    pub fn received(&mut self, message: &Value) {
        if self.opted_in {
            return;
        }
        let oracle = oracle();
        let method = message["method"].as_str();
        let id = message.get("id");
        let (what, found) = match (method, id) {
            (Some(method), Some(_)) => (
                format!("server request {method}"),
                oracle.requests.check(method, message),
            ),
            (Some(method), None) => (
                format!("notification {method}"),
                oracle.notifications.check(method, message),
            ),
            (None, Some(id)) => {
                let asked = self.pending.remove(&id.to_string());
                let asked = asked.unwrap_or_else(|| "an unknown request".to_owned());
                if message.get("error").is_some() {
                    (
                        format!("error reply to {asked}"),
                        violations(&oracle.error, message),
                    )
                } else {
                    match oracle.response(&asked) {
                        Some(validator) => (
                            format!("result of {asked}"),
                            violations(&validator, &message["result"]),
                        ),
                        None => {
                            self.unchecked.push(asked);
                            return;
                        }
                    }
                }
            }
            (None, None) => (
                "a message that is neither request, reply nor notification".to_owned(),
                vec!["no method and no id".to_owned()],
            ),
        };
        // A oneOf failure lists every variant; the first lines say enough.
        assert!(
            found.is_empty(),
            "the {what} violates Codex 0.163.0's schema ({}):\n{}\nmessage: {}",
            schema_dir().display(),
            found.iter().take(8).cloned().collect::<Vec<_>>().join("\n"),
            truncate(&message.to_string(), 4000),
        );
    }
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
