//! What a failed start or call says: rmcp's errors name the transport's
//! Rust type and stop there; the transport's own error and its causes say
//! what happened.

use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;

use super::http;

/// A start that failed: at which step, why, and the HTTP status when a
/// server refused spool.
pub(super) struct Failure {
    pub doing: &'static str,
    pub reason: String,
    pub refused: Option<u16>,
}

pub(super) fn failure(doing: &'static str, error: &(dyn std::error::Error + 'static)) -> Failure {
    Failure {
        doing,
        reason: describe(error),
        refused: transport_cause(error).and_then(http::refused),
    }
}

/// The transport's own error under an rmcp error, if that is what failed.
fn transport_cause<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    // The one rmcp error that holds its transport's error without giving
    // it as its source.
    if let Some(ClientInitializeError::TransportError { error, .. }) =
        error.downcast_ref::<ClientInitializeError>()
    {
        return Some(&*error.error);
    }
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(transport) = error.downcast_ref::<DynamicTransportError>() {
            return Some(&*transport.error);
        }
        current = error.source();
    }
    None
}

/// An rmcp error said plainly: where the transport failed, its own error
/// and its causes (rmcp's message names the transport's Rust type and
/// stops there: reqwest's "error sending request" without "connection
/// refused").
pub(super) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let Some(cause) = transport_cause(error) else {
        return error.to_string();
    };
    let mut said = cause.to_string();
    let mut source = http::client_error(cause).or_else(|| cause.source());
    while let Some(error) = source {
        let message = error.to_string();
        // Many errors repeat their source's message in their own.
        if !said.contains(&message) {
            said.push_str(": ");
            said.push_str(&message);
        }
        source = error.source();
    }
    said
}
