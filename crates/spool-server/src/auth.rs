//! Bearer tokens for the WebSocket and HTTP listeners. stdio is trusted.
//!
//! A listener on a non-loopback address does not start without a token.
//! With a token, every request but the health probes needs
//! `Authorization: Bearer <token>`: HTTP answers 401 without it, and a
//! WebSocket upgrade is refused (401) before it happens. Tokens are
//! compared in constant time and never logged (their `Debug` hides them;
//! the header is marked sensitive).

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;

/// A secret every network request must carry.
#[derive(Clone)]
pub struct AuthToken(Arc<str>);

impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthToken(<hidden>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthTokenError {
    #[error("the auth token is empty")]
    Empty,
    #[error("the auth token has characters not allowed in an HTTP header")]
    NotAHeader,
    #[error("cannot read the auth token file {path}: {source}")]
    File {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl AuthToken {
    /// The token, surrounding whitespace (a file's final newline) removed.
    pub fn new(token: &str) -> Result<AuthToken, AuthTokenError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthTokenError::Empty);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(AuthTokenError::NotAHeader);
        }
        Ok(AuthToken(token.into()))
    }

    pub fn from_file(path: &Path) -> Result<AuthToken, AuthTokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthTokenError::File {
            path: path.to_owned(),
            source,
        })?;
        AuthToken::new(&text)
    }

    /// Whether an `Authorization` header value carries this token. Takes
    /// the same time whatever the given token's content.
    pub fn accepts(&self, authorization: &[u8]) -> bool {
        let Some(given) = strip_bearer(authorization) else {
            return false;
        };
        constant_time_eq(self.0.as_bytes(), given)
    }
}

fn strip_bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
}

/// Compares every byte of `given` whatever the first difference; the time
/// depends on the given length only.
fn constant_time_eq(expected: &[u8], given: &[u8]) -> bool {
    let mut diff = expected.len() ^ given.len();
    for (i, byte) in given.iter().enumerate() {
        let want = expected
            .get(i % expected.len().max(1))
            .copied()
            .unwrap_or(0);
        diff |= usize::from(want ^ byte);
    }
    diff == 0 && !expected.is_empty()
}

/// Middleware: refuses a request without the right token (when the
/// listener has one).
pub(crate) async fn require(
    State(token): State<Option<AuthToken>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &token {
        let ok = request
            .headers()
            .get(header::AUTHORIZATION)
            .is_some_and(|value| token.accepts(value.as_bytes()));
        if !ok {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a bearer token is required: Authorization: Bearer <token>",
            )
            .into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_bearer_token_is_accepted() {
        let token = AuthToken::new("s3cret\n").unwrap();
        assert!(token.accepts(b"Bearer s3cret"));
        assert!(token.accepts(b"bearer s3cret"));
        assert!(!token.accepts(b"Bearer s3cre"));
        assert!(!token.accepts(b"Bearer s3cret2"));
        assert!(!token.accepts(b"Bearer S3cret"));
        assert!(!token.accepts(b"Basic s3cret"));
        assert!(!token.accepts(b"s3cret"));
        assert!(!token.accepts(b""));
        assert!(matches!(AuthToken::new(" \n"), Err(AuthTokenError::Empty)));
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
