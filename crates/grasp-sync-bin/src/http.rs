//! Small HTTP helpers shared by the embedded relay's front and the `/metrics` + `/status`
//! endpoints: plain and JSON responses, header token matching.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

/// A response body held in memory.
pub(crate) type Body = Full<Bytes>;

/// A response with a body and a content type.
pub(crate) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A plain-text response.
pub(crate) fn plain(status: StatusCode, text: impl Into<String>) -> Response<Body> {
    respond(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(text.into()),
    )
}

/// Whether a comma-separated token of any `name` header equals `token`, ignoring case and
/// parameters such as `;q=0.9`.
pub(crate) fn header_has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|item| item.split(';').next())
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}
