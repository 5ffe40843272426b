//! Unit tests for the HTTP front's header handling and WebSocket accept key.

use hyper::header::{self, HeaderMap, HeaderValue};

use super::{accept_key, base64, header_contains, is_websocket_upgrade};

fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(name.clone(), HeaderValue::from_static(value));
    }
    map
}

#[test]
fn accept_key_matches_the_rfc_6455_example() {
    assert_eq!(
        accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

#[test]
fn base64_pads_to_whole_quanta() {
    for (input, output) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(input.as_bytes()), output, "{input}");
    }
}

#[test]
fn header_tokens_match_case_insensitively_and_ignore_parameters() {
    let map = headers(&[
        (header::CONNECTION, "keep-alive, Upgrade"),
        (header::ACCEPT, "text/html, application/nostr+json; q=0.9"),
    ]);
    assert!(header_contains(&map, header::CONNECTION, "upgrade"));
    assert!(header_contains(
        &map,
        header::ACCEPT,
        "application/nostr+json"
    ));
    assert!(!header_contains(&map, header::ACCEPT, "application/json"));
    assert!(!header_contains(&map, header::UPGRADE, "websocket"));
}

#[test]
fn only_connection_upgrade_with_upgrade_websocket_is_a_websocket_request() {
    let upgrade = headers(&[
        (header::CONNECTION, "Upgrade"),
        (header::UPGRADE, "WebSocket"),
    ]);
    assert!(is_websocket_upgrade(&upgrade));
    let no_connection = headers(&[(header::UPGRADE, "websocket")]);
    assert!(!is_websocket_upgrade(&no_connection));
    let other_protocol = headers(&[(header::CONNECTION, "upgrade"), (header::UPGRADE, "h2c")]);
    assert!(!is_websocket_upgrade(&other_protocol));
}
