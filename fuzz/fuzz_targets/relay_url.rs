//! Relay URL parsing and normalisation (`RelayUrl::parse`) on arbitrary text.
//!
//! Asserts: parsing never panics; a parsed URL is at most `MAX_RELAY_URL_BYTES`, starts with
//! `ws://` or `wss://`, has its host inside it, and is a fixed point: parsing its normal form
//! gives the same URL (normalisation is idempotent), and so does its `Display` text. The
//! transport (nostr-sdk's relay URLs, the NIP-11 fetch) reads relay URLs with the WHATWG parser
//! of the `url` crate, so that parser must accept every normal form and see the very host
//! `RelayUrl::host` reports: the address policy judges that host, and the dialler connects to
//! the other.
#![no_main]

use grasp_sync_model::{MAX_RELAY_URL_BYTES, RelayUrl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(url) = RelayUrl::parse(text) else {
        return;
    };
    let normal = url.as_str();
    assert!(normal.len() <= MAX_RELAY_URL_BYTES);
    assert!(normal.starts_with("ws://") || normal.starts_with("wss://"));
    assert_eq!(url.is_secure(), normal.starts_with("wss://"));
    assert!(!url.host().is_empty());
    assert!(normal.contains(url.host()));
    assert!(!normal.contains('#'));

    let again = RelayUrl::parse(normal).expect("a normal form parses");
    assert_eq!(again, url, "normalisation is not idempotent for {text:?}");
    assert_eq!(again.host(), url.host());
    assert_eq!(url.to_string().parse::<RelayUrl>().as_ref(), Ok(&url));

    let dialled = url::Url::parse(normal)
        .unwrap_or_else(|e| panic!("the transport cannot read {normal:?} (from {text:?}): {e}"));
    assert_eq!(
        dialled.host_str(),
        Some(url.host()),
        "the transport dials another host than {normal:?} names (from {text:?})"
    );
});
