//! The JSON-RPC 2.0 envelope.
//!
//! spool emits `"jsonrpc": "2.0"` on every message and accepts messages
//! without it (Codex app-server omits the field). Ids are strings or integers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const JSONRPC_VERSION: &str = "2.0";

/// Standard and spool-specific error codes.
pub mod error_codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The server's bounded queues are full; try again later.
    pub const OVERLOADED: i64 = -32001;
}

#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Integer(n) => write!(f, "{n}"),
            RequestId::String(s) => f.write_str(s),
        }
    }
}

/// The `"jsonrpc"` marker: always written as "2.0"; when read, absent is
/// accepted and any other value is rejected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
#[schemars(with = "String")]
pub struct Version2;

impl Serialize for Version2 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(JSONRPC_VERSION)
    }
}

impl<'de> Deserialize<'de> for Version2 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = String::deserialize(d)?;
        if v == JSONRPC_VERSION {
            Ok(Version2)
        } else {
            Err(serde::de::Error::custom(format!(
                "unsupported jsonrpc version {v:?}, expected \"2.0\""
            )))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcRequest {
    #[serde(default)]
    pub jsonrpc: Version2,
    pub id: RequestId,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcNotification {
    #[serde(default)]
    pub jsonrpc: Version2,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcResponse {
    #[serde(default)]
    pub jsonrpc: Version2,
    pub id: RequestId,
    pub result: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcError {
    #[serde(default)]
    pub jsonrpc: Version2,
    /// `null` when the request's id could not be read.
    pub id: Option<RequestId>,
    pub error: JsonRpcErrorObject,
}

/// Any one JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum JsonRpcMessage {
    Request(JsonRpcRequest),
    Notification(JsonRpcNotification),
    Response(JsonRpcResponse),
    Error(JsonRpcError),
}

/// Why a line could not be read as a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvelopeError {
    /// Not JSON at all (-32700).
    Parse(String),
    /// JSON, but not a JSON-RPC message (-32600). Carries the id if one
    /// could be read, so the error reply can name it.
    Invalid {
        id: Option<RequestId>,
        reason: String,
    },
}

impl std::fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvelopeError::Parse(e) => write!(f, "parse error: {e}"),
            EnvelopeError::Invalid { reason, .. } => write!(f, "invalid request: {reason}"),
        }
    }
}

impl std::error::Error for EnvelopeError {}

impl EnvelopeError {
    pub fn code(&self) -> i64 {
        match self {
            EnvelopeError::Parse(_) => error_codes::PARSE_ERROR,
            EnvelopeError::Invalid { .. } => error_codes::INVALID_REQUEST,
        }
    }
}

impl JsonRpcMessage {
    /// Reads one message, telling requests, notifications, responses and
    /// errors apart by their members rather than by trial and error.
    pub fn parse(text: &str) -> Result<JsonRpcMessage, EnvelopeError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| EnvelopeError::Parse(e.to_string()))?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<JsonRpcMessage, EnvelopeError> {
        let Value::Object(map) = &value else {
            return Err(EnvelopeError::Invalid {
                id: None,
                reason: "a message must be a JSON object".into(),
            });
        };
        let id = map
            .get("id")
            .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
        let invalid = |reason: String| EnvelopeError::Invalid {
            id: id.clone(),
            reason,
        };
        let has = |k: &str| map.contains_key(k);
        let result = if has("method") {
            if has("id") {
                serde_json::from_value(value.clone()).map(JsonRpcMessage::Request)
            } else {
                serde_json::from_value(value.clone()).map(JsonRpcMessage::Notification)
            }
        } else if has("error") {
            serde_json::from_value(value.clone()).map(JsonRpcMessage::Error)
        } else if has("result") {
            serde_json::from_value(value.clone()).map(JsonRpcMessage::Response)
        } else {
            return Err(invalid(
                "expected a request, notification, response or error".into(),
            ));
        };
        result.map_err(|e| invalid(e.to_string()))
    }

    // Invariant: every JSON-RPC message is plain data with string keys.
    #[allow(clippy::expect_used)]
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("JSON-RPC messages always serialize")
    }
}

impl JsonRpcError {
    pub fn new(id: Option<RequestId>, code: i64, message: impl Into<String>) -> Self {
        JsonRpcError {
            jsonrpc: Version2,
            id,
            error: JsonRpcErrorObject {
                code,
                message: message.into(),
                data: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_without_jsonrpc_field_is_accepted() {
        let m = JsonRpcMessage::parse(r#"{"id":1,"method":"initialize","params":{}}"#).unwrap();
        let JsonRpcMessage::Request(r) = m else {
            panic!("expected request, got {m:?}")
        };
        assert_eq!(r.id, RequestId::Integer(1));
        assert_eq!(r.method, "initialize");
    }

    #[test]
    fn messages_are_written_with_jsonrpc_2() {
        let m = JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: Version2,
            id: RequestId::String("a".into()),
            result: serde_json::json!({}),
        });
        assert_eq!(m.to_line(), r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
    }

    #[test]
    fn kinds_are_told_apart() {
        assert!(matches!(
            JsonRpcMessage::parse(r#"{"method":"initialized"}"#),
            Ok(JsonRpcMessage::Notification(_))
        ));
        assert!(matches!(
            JsonRpcMessage::parse(r#"{"id":"x","result":null}"#),
            Ok(JsonRpcMessage::Response(_))
        ));
        assert!(matches!(
            JsonRpcMessage::parse(r#"{"id":2,"error":{"code":-1,"message":"m"}}"#),
            Ok(JsonRpcMessage::Error(_))
        ));
    }

    #[test]
    fn bad_input_gets_the_right_error() {
        assert_eq!(JsonRpcMessage::parse("{nope").unwrap_err().code(), -32700);
        let e = JsonRpcMessage::parse(r#"{"id":7,"method":3}"#).unwrap_err();
        assert_eq!(e.code(), -32600);
        assert_eq!(
            e,
            EnvelopeError::Invalid {
                id: Some(RequestId::Integer(7)),
                reason: match &e {
                    EnvelopeError::Invalid { reason, .. } => reason.clone(),
                    EnvelopeError::Parse(_) => unreachable!(),
                }
            }
        );
        assert!(JsonRpcMessage::parse(r#"{"jsonrpc":"1.0","id":1,"method":"a"}"#).is_err());
        assert!(JsonRpcMessage::parse("[1,2]").is_err());
    }
}
