//! Tests of the WebSocket handshake helper.

use super::{encode_base64, websocket_accept};

#[test]
fn websocket_accept_matches_the_rfc_6455_example() {
    assert_eq!(
        websocket_accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

#[test]
fn base64_pads_partial_groups() {
    for (input, expected) in [
        (&b""[..], ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg=="),
    ] {
        assert_eq!(encode_base64(input), expected, "{input:?}");
    }
}
