//! In-process function tools: a Rust closure with a JSON Schema for its
//! arguments.
//!
//! The model's arguments are untrusted text. [`FunctionTool::invoke`] parses
//! and validates them before the handler sees anything, so a handler can rely
//! on its schema; bad arguments come back to the model as a failed call with
//! a message naming every problem, which is usually enough for it to retry
//! correctly. The handler runs in its own task so that a panic in one tool
//! fails that call instead of the turn (or the server).

mod arguments;
mod context;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::{Value, json};

pub use context::{EmissionKind, ToolContext, ToolEmission};

/// The future a handler returns: the tool's output on success, or a message
/// for the model on failure.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'static>>;

/// A type-erased handler, shared by clones of the tool.
pub type ToolHandler = Arc<dyn Fn(Value, ToolContext) -> ToolFuture + Send + Sync>;

/// Why a tool could not be built. These are programming errors in the tool's
/// definition, caught once at construction rather than on every call.
#[derive(Debug, thiserror::Error)]
pub enum FunctionToolError {
    #[error(
        "invalid tool name {name:?}: use 1 to 64 ASCII letters, digits, '_' or '-' (what model APIs accept)"
    )]
    InvalidName { name: String },
    #[error("invalid parameters schema for tool {name:?}: {message}")]
    InvalidSchema { name: String, message: String },
}

/// What one call produced, ready to become the call's output item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionOutcome {
    pub output: String,
    pub success: bool,
}

impl FunctionOutcome {
    fn failed(output: String) -> Self {
        Self {
            output,
            success: false,
        }
    }
}

/// An in-process tool. Cloning is cheap (the schema and handler are shared).
#[derive(Clone)]
pub struct FunctionTool {
    name: String,
    description: String,
    parameters: Value,
    strict: bool,
    validator: Arc<Validator>,
    handler: ToolHandler,
}

impl FunctionTool {
    /// Builds a tool, compiling `parameters` (a JSON Schema for the arguments
    /// object) once. `strict` starts off; see [`FunctionTool::with_strict`].
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Result<Self, FunctionToolError>
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        let name = name.into();
        let valid_name = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(FunctionToolError::InvalidName { name });
        }
        // The arguments are always an object, and model APIs reject a
        // non-object parameters schema (even the valid schema `true`).
        if !parameters.is_object() {
            return Err(FunctionToolError::InvalidSchema {
                name,
                message: "the schema must be a JSON object".to_owned(),
            });
        }
        let validator = jsonschema::validator_for(&parameters).map_err(|e| {
            FunctionToolError::InvalidSchema {
                name: name.clone(),
                message: e.to_string(),
            }
        })?;
        let handler: ToolHandler =
            Arc::new(move |args, ctx| -> ToolFuture { Box::pin(handler(args, ctx)) });
        Ok(Self {
            name,
            description: description.into(),
            parameters,
            strict: false,
            validator: Arc::new(validator),
            handler,
        })
    }

    /// Sets the Responses API `strict` flag (the provider then constrains
    /// sampling to the schema). The schema must meet the provider's strict
    /// rules; that is checked by the provider, not here.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// The tool as the Responses API declares a function tool.
    pub fn definition(&self) -> Value {
        json!({
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "strict": self.strict,
        })
    }

    /// Runs one call. Never fails and never panics: every problem becomes
    /// `success: false` with an output the model can read.
    ///
    /// Must be called inside a Tokio runtime (the handler runs in a spawned
    /// task). Dropping the returned future aborts the handler's task, so a
    /// cancelled turn does not leave tools running on its behalf.
    pub async fn invoke(&self, raw_arguments: &str, ctx: ToolContext) -> FunctionOutcome {
        let args = match arguments::parse_arguments(&self.name, &self.validator, raw_arguments) {
            Ok(args) => args,
            Err(message) => return FunctionOutcome::failed(message),
        };
        let handler = Arc::clone(&self.handler);
        // The handler is called inside the task too: a closure that panics
        // before returning its future is caught the same way.
        let task = tokio::spawn(async move { handler(args, ctx).await });
        let _abort = AbortOnDrop(task.abort_handle());
        match task.await {
            Ok(Ok(output)) => FunctionOutcome {
                output,
                success: true,
            },
            Ok(Err(message)) => FunctionOutcome::failed(message),
            Err(e) if e.is_panic() => FunctionOutcome::failed(format!(
                "tool {} panicked: {}",
                self.name,
                panic_message(e.into_panic())
            )),
            // Only the runtime shutting down cancels the task while we wait.
            Err(_) => FunctionOutcome::failed(format!("tool {} was cancelled", self.name)),
        }
    }
}

impl fmt::Debug for FunctionTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionTool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

/// Aborts the handler's task if `invoke` is dropped before it finishes.
/// Aborting a finished task does nothing, so it is also dropped normally.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The text of a panic payload (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}
