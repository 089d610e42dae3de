//! The trace viewer's page: `GET /` is its `index.html`, `GET
//! /viewer/{file}` its scripts and styles, embedded in the binary at build
//! time (`build.rs` lists `viewer/`).
//!
//! These routes pass the guard (host and origin checks, so a page of
//! another origin or a rebound name cannot load them) but need no token:
//! the page must load before it can ask the person for the token, and it
//! holds nothing but the viewer's code. Every thread it shows comes from
//! `/v1`, which does need the token.
//!
//! The headers keep the page to itself: a Content-Security-Policy that lets
//! it run only its own scripts and talk only to this server, no framing,
//! no sniffing, no referrer (the token travels in the URL's fragment, which
//! is never sent, but the page's URL should not leak either).

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

include!(concat!(env!("OUT_DIR"), "/viewer_assets.rs"));

/// The page's Content-Security-Policy.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the viewer's page.
pub(crate) async fn index(headers: HeaderMap) -> Response {
    asset("index.html", &headers)
}

/// `GET /viewer/{file}`: one of the viewer's files.
pub(crate) async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    asset(&name, &headers)
}

fn asset(name: &str, request: &HeaderMap) -> Response {
    let Ok(found) = VIEWER_ASSETS.binary_search_by(|(n, ..)| (*n).cmp(name)) else {
        return ApiError::not_found(format!("the viewer has no file {name:?}")).into_response();
    };
    let (_, content_type, bytes, etag) = VIEWER_ASSETS[found];
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == etag
        });
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::ETAG, HeaderValue::from_static(etag)),
        // Revalidated on every load (a 304 when unchanged): a rebuilt
        // binary serves its own viewer at once.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (StatusCode::OK, headers, bytes).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_has_the_page() {
        let names: Vec<&str> = VIEWER_ASSETS.iter().map(|(n, ..)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "binary search needs the table sorted");
        assert!(names.contains(&"index.html"), "{names:?}");
        for (name, content_type, _, etag) in VIEWER_ASSETS {
            assert!(HeaderValue::from_str(content_type).is_ok(), "{name}");
            assert!(etag.starts_with('"') && etag.ends_with('"'), "{name}");
        }
    }
}
