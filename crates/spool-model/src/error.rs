//! Typed provider errors, their Codex classification and retryability.

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use spool_protocol::CodexErrorInfo;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Waiting for the response headers after sending the request.
    Headers,
    /// Waiting for the next chunk of a response body already streaming.
    Idle,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutPhase::Headers => f.write_str("no response headers"),
            TimeoutPhase::Idle => f.write_str("no data on the response stream"),
        }
    }
}

/// Why a model stream failed. Every variant names the provider, and the URL
/// where there is one, so a one-line report is enough to act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The server answered with a non-success status.
    #[error("{provider}: POST {url} failed with HTTP {status}: {message}")]
    Http {
        provider: String,
        url: String,
        status: u16,
        /// The provider's message (`error.message` of a JSON body), else the
        /// raw body text.
        message: String,
        /// The provider's `error.code` (or `error.type`), e.g.
        /// `context_length_exceeded`.
        code: Option<String>,
        /// From `Retry-After` / `retry-after-ms`.
        retry_after: Option<Duration>,
    },
    /// No connection could be made (refused, DNS, TLS, connect timeout).
    #[error("{provider}: could not connect to {url}: {message}")]
    Connect {
        provider: String,
        url: String,
        message: String,
    },
    #[error("{provider}: {url}: {phase} for {after:?}")]
    Timeout {
        provider: String,
        url: String,
        phase: TimeoutPhase,
        after: Duration,
    },
    /// An SSE line or the JSON of a known event could not be decoded.
    #[error("{provider}: malformed stream from {url}: {message}")]
    MalformedStream {
        provider: String,
        url: String,
        message: String,
    },
    /// The body ended, or the connection broke, before a terminal event.
    #[error("{provider}: connection to {url} dropped before the response completed: {message}")]
    StreamDropped {
        provider: String,
        url: String,
        message: String,
    },
    /// The provider reported a failure in the stream: `response.failed`, an
    /// `error` event, or an error chunk of Chat Completions.
    #[error("{provider}: response from {url} failed: {message}{}", code_suffix(.code))]
    ResponseFailed {
        provider: String,
        url: String,
        code: Option<String>,
        message: String,
    },
    /// Every attempt failed with a retryable error; `last` is the final one.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        attempts: u32,
        last: Box<ModelError>,
    },
    /// The request cannot be sent to this provider as it is.
    #[error("{provider}: invalid request: {message}")]
    InvalidRequest { provider: String, message: String },
    /// The HTTP client could not be built.
    #[error("{provider}: could not build the HTTP client: {message}")]
    Client { provider: String, message: String },
    /// A failure scripted by a test, or a scripted provider out of scripts.
    #[error("{provider}: {message}")]
    Scripted { provider: String, message: String },
}

fn code_suffix(code: &Option<String>) -> String {
    code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default()
}

impl ModelError {
    /// A scripted failure, for tests.
    pub fn scripted(message: impl Into<String>) -> Self {
        ModelError::Scripted {
            provider: "scripted".into(),
            message: message.into(),
        }
    }

    /// The HTTP status behind this error, if any.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            ModelError::Http { status, .. } => Some(*status),
            ModelError::RetriesExhausted { last, .. } => last.http_status(),
            ModelError::Connect { .. }
            | ModelError::Timeout { .. }
            | ModelError::MalformedStream { .. }
            | ModelError::StreamDropped { .. }
            | ModelError::ResponseFailed { .. }
            | ModelError::InvalidRequest { .. }
            | ModelError::Client { .. }
            | ModelError::Scripted { .. } => None,
        }
    }

    /// Whether sending the same request again may succeed: rate limits,
    /// server errors and lost connections are transient; a bad request, a
    /// malformed stream or a reported failure will fail the same way again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => {
                *status == 408 || *status == 409 || *status == 429 || *status >= 500
            }
            ModelError::Connect { .. }
            | ModelError::Timeout { .. }
            | ModelError::StreamDropped { .. } => true,
            ModelError::MalformedStream { .. }
            | ModelError::ResponseFailed { .. }
            | ModelError::RetriesExhausted { .. }
            | ModelError::InvalidRequest { .. }
            | ModelError::Client { .. }
            | ModelError::Scripted { .. } => false,
        }
    }

    /// The Codex app-server class of this error, for `TurnError`.
    pub fn codex_error_info(&self) -> CodexErrorInfo {
        match self {
            ModelError::Http { status, code, .. } => {
                if let Some(info) = code.as_deref().and_then(info_from_code) {
                    return info;
                }
                match *status {
                    400 | 404 | 413 | 422 => CodexErrorInfo::BadRequest,
                    401 | 403 => CodexErrorInfo::Unauthorized,
                    500 => CodexErrorInfo::InternalServerError,
                    502..=504 | 529 => CodexErrorInfo::ServerOverloaded,
                    s => CodexErrorInfo::HttpConnectionFailed {
                        http_status_code: Some(s),
                    },
                }
            }
            ModelError::Connect { .. } => CodexErrorInfo::HttpConnectionFailed {
                http_status_code: None,
            },
            ModelError::Timeout { phase, .. } => match phase {
                TimeoutPhase::Headers => CodexErrorInfo::HttpConnectionFailed {
                    http_status_code: None,
                },
                TimeoutPhase::Idle => CodexErrorInfo::ResponseStreamDisconnected {
                    http_status_code: None,
                },
            },
            ModelError::StreamDropped { .. } => CodexErrorInfo::ResponseStreamDisconnected {
                http_status_code: None,
            },
            ModelError::ResponseFailed { code, .. } => code
                .as_deref()
                .and_then(info_from_code)
                .unwrap_or(CodexErrorInfo::Other),
            ModelError::RetriesExhausted { last, .. } => {
                CodexErrorInfo::ResponseTooManyFailedAttempts {
                    http_status_code: last.http_status(),
                }
            }
            ModelError::InvalidRequest { .. } => CodexErrorInfo::BadRequest,
            ModelError::MalformedStream { .. }
            | ModelError::Client { .. }
            | ModelError::Scripted { .. } => CodexErrorInfo::Other,
        }
    }
}

/// Provider error codes that have a Codex class of their own.
fn info_from_code(code: &str) -> Option<CodexErrorInfo> {
    match code {
        "context_length_exceeded" | "context_window_exceeded" => {
            Some(CodexErrorInfo::ContextWindowExceeded)
        }
        "insufficient_quota" | "usage_limit_reached" | "usage_not_included" => {
            Some(CodexErrorInfo::UsageLimitExceeded)
        }
        "server_error" => Some(CodexErrorInfo::InternalServerError),
        "server_is_overloaded" | "slow_down" => Some(CodexErrorInfo::ServerOverloaded),
        "invalid_api_key" => Some(CodexErrorInfo::Unauthorized),
        _ => None,
    }
}

/// The most useful message in an error body: `error.message` of the OpenAI
/// shape, `error` as a string, a top-level `message`, else the raw text.
/// Returns the message and the provider's error code, if any.
pub(crate) fn message_from_body(body: &str) -> (String, Option<String>) {
    let trimmed = body.trim();
    if let Ok(json) = serde_json::from_str::<Value>(trimmed)
        && let Some((message, code)) = message_from_json(&json)
    {
        return (message, code);
    }
    if trimmed.is_empty() {
        return ("(empty body)".into(), None);
    }
    (truncate(trimmed, 2000), None)
}

/// `error.message`/`error.code` of a JSON error object, or of one nested in
/// `error`, as providers put them in bodies and in stream events.
pub(crate) fn message_from_json(json: &Value) -> Option<(String, Option<String>)> {
    let code_of = |v: &Value| {
        ["code", "type"]
            .iter()
            .find_map(|k| v.get(k).and_then(Value::as_str).map(str::to_owned))
    };
    match json.get("error") {
        Some(Value::String(s)) => return Some((s.clone(), code_of(json))),
        Some(err @ Value::Object(_)) => {
            if let Some(m) = err.get("message").and_then(Value::as_str) {
                return Some((m.to_owned(), code_of(err)));
            }
        }
        _ => {}
    }
    json.get("message")
        .and_then(Value::as_str)
        .map(|m| (m.to_owned(), code_of(json)))
}

/// At most `max` bytes of `s`, cut on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_messages() {
        let (m, c) = message_from_body(
            r#"{"error":{"message":"bad model","type":"invalid_request_error","code":"model_not_found"}}"#,
        );
        assert_eq!(
            (m.as_str(), c.as_deref()),
            ("bad model", Some("model_not_found"))
        );
        let (m, c) = message_from_body(r#"{"error":"nope"}"#);
        assert_eq!((m.as_str(), c), ("nope", None));
        let (m, _) = message_from_body("upstream exploded\n");
        assert_eq!(m, "upstream exploded");
        let (m, _) = message_from_body("");
        assert_eq!(m, "(empty body)");
    }

    #[test]
    fn classification() {
        let http = |status, code: Option<&str>| ModelError::Http {
            provider: "p".into(),
            url: "u".into(),
            status,
            message: "m".into(),
            code: code.map(str::to_owned),
            retry_after: None,
        };
        assert!(!http(400, None).is_retryable());
        assert!(http(429, None).is_retryable());
        assert!(http(503, None).is_retryable());
        assert_eq!(
            http(400, Some("context_length_exceeded")).codex_error_info(),
            CodexErrorInfo::ContextWindowExceeded
        );
        assert_eq!(
            http(401, None).codex_error_info(),
            CodexErrorInfo::Unauthorized
        );
        let exhausted = ModelError::RetriesExhausted {
            attempts: 4,
            last: Box::new(http(503, None)),
        };
        assert_eq!(
            exhausted.codex_error_info(),
            CodexErrorInfo::ResponseTooManyFailedAttempts {
                http_status_code: Some(503)
            }
        );
        assert!(
            exhausted
                .to_string()
                .starts_with("gave up after 4 attempts: p: POST u")
        );
    }
}
