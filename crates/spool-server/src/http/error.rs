//! Errors of the HTTP API: `{"error": {"code", "message"}}` with the status
//! that fits.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use spool_protocol::jsonrpc::error_codes;
use spool_store::StoreError;

use crate::hub::HubError;
use crate::methods::MethodError;

#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub fn shutting_down() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match &error {
            StoreError::UnknownThread(_) | StoreError::UnknownRequest { .. } => {
                ApiError::not_found(error.to_string())
            }
            StoreError::RequestAlreadyResolved { .. } => {
                ApiError::new(StatusCode::CONFLICT, "already_answered", error.to_string())
            }
            StoreError::BadCursor(_) => ApiError::bad_request(error.to_string()),
            _ => {
                tracing::error!(%error, "a store call of the HTTP API failed");
                ApiError::internal(error.to_string())
            }
        }
    }
}

impl From<HubError> for ApiError {
    fn from(error: HubError) -> Self {
        match error {
            HubError::Store(error) => error.into(),
            HubError::Busy(_) => ApiError::new(StatusCode::CONFLICT, "busy", error.to_string()),
            HubError::NotRunning(_) | HubError::OtherTurnRunning { .. } => {
                ApiError::new(StatusCode::CONFLICT, "not_running", error.to_string())
            }
            HubError::Invalid(_) | HubError::Ceiling(_) => ApiError::bad_request(error.to_string()),
        }
    }
}

impl From<MethodError> for ApiError {
    fn from(error: MethodError) -> Self {
        match error.code {
            error_codes::INVALID_PARAMS | error_codes::INVALID_REQUEST => {
                ApiError::bad_request(error.message)
            }
            error_codes::METHOD_NOT_FOUND => ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                "not_implemented",
                error.message,
            ),
            _ => ApiError::internal(error.message),
        }
    }
}
