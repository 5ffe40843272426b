//! Tests of the lenient NIP-11 reading: what `supported_nips` says about NIP-77.

use super::{NipListing, RelayInfo};

fn check(document: &str, expected: NipListing) {
    let info = RelayInfo::from_json(document.as_bytes()).expect("json");
    assert_eq!(info.nip77, expected, "{document}");
}

#[test]
fn supported_nips_tells_listed_not_listed_and_unknown_apart() {
    check(r#"{"supported_nips":[1,11,77]}"#, NipListing::Listed);
    // Some relays list NIPs as strings.
    check(r#"{"supported_nips":["1","77"]}"#, NipListing::Listed);
    check(r#"{"supported_nips":[1,11,34]}"#, NipListing::NotListed);
    check(r#"{"supported_nips":[]}"#, NipListing::NotListed);
    check(
        r#"{"supported_nips":[1,"x",null,770]}"#,
        NipListing::NotListed,
    );
    // The relay said nothing about its NIPs.
    check(r#"{"name":"relay"}"#, NipListing::Unknown);
    check(r#"{"supported_nips":null}"#, NipListing::Unknown);
    check(r#"{"supported_nips":"1,77"}"#, NipListing::Unknown);
}

#[test]
fn a_relay_without_a_document_is_unknown() {
    assert_eq!(RelayInfo::default().nip77, NipListing::Unknown);
}
