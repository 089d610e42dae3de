//! A server reached over streamable HTTP: its URL, and the bearer token its
//! section names.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::McpError;
use crate::config::McpServerConfig;

/// The transport to `url`, with `Authorization: Bearer …` when the section
/// names a variable holding the token.
pub(super) fn transport(
    name: &str,
    url: &str,
    config: &McpServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let mut settings = StreamableHttpClientTransportConfig::with_uri(url);
    // A response stream that breaks off is resumed a few times (0.25, 0.5,
    // 1 s apart), then its call ends as closed. rmcp's default retries
    // forever: a server that crashed mid-call would cost the call its
    // whole timeout.
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(3);
    retry.base_duration = Duration::from_millis(250);
    settings.retry_config = Arc::new(retry);
    if let Some(var) = &config.bearer_token_env_var {
        // An empty token is as good as none: refused here, by name, rather
        // than by the server with a 401 that does not say which variable.
        let token = std::env::var(var)
            .ok()
            .filter(|token| !token.is_empty())
            .ok_or_else(|| McpError::TokenUnset {
                name: name.to_owned(),
                var: var.clone(),
            })?;
        // rmcp adds the `Bearer ` prefix.
        settings = settings.auth_header(token);
    }
    // reqwest is built without a default crypto provider (ring, as the
    // model client uses, not aws-lc); installing it twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .user_agent(concat!("spool/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| McpError::Http {
            name: name.to_owned(),
            reason: error.to_string(),
        })?;
    Ok(StreamableHttpClientTransport::with_client(client, settings))
}

/// The HTTP status a server refused spool with (401: no token, or not
/// this one; 403: a token without the rights), from the transport's error.
pub(super) fn refused(error: &(dyn std::error::Error + 'static)) -> Option<u16> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>()? {
        StreamableHttpError::AuthRequired(_) => Some(401),
        StreamableHttpError::InsufficientScope(_) => Some(403),
        // Without a `WWW-Authenticate` header rmcp says only
        // `HTTP {status}: {body}`.
        StreamableHttpError::UnexpectedServerResponse(message) => [401, 403]
            .into_iter()
            .find(|status| message.starts_with(&format!("HTTP {status} "))),
        _ => None,
    }
}

/// The HTTP client's error under the transport's: rmcp says it without
/// giving it as the source, so its causes ("connection refused") would be
/// lost.
pub(super) fn client_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>()? {
        StreamableHttpError::Client(error) => Some(error),
        _ => None,
    }
}
