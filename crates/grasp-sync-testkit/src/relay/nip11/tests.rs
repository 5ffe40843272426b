//! Unit tests for the NIP-11 document.

use nostr::nips::nip11::RelayInformationDocument;
use serde_json::{Value, json};

use super::document;
use crate::relay::{Nip11Mode, TestRelayConfig};

fn config(nip11: Nip11Mode) -> TestRelayConfig {
    TestRelayConfig {
        name: "r1".to_owned(),
        max_subscriptions: 7,
        default_filter_limit: 50,
        max_filter_limit: Some(200),
        max_filters: Some(5),
        nip11,
        ..TestRelayConfig::default()
    }
}

/// Asserts the document's `supported_nips` and `limitation` for `config`.
fn check(config: &TestRelayConfig, nips: Value, limitation: Option<Value>) {
    let doc = document(config).unwrap();
    assert_eq!(doc["name"], json!(config.name));
    assert_eq!(doc["supported_nips"], nips);
    assert_eq!(doc.get("limitation").cloned(), limitation);
}

#[test]
fn advertised_limits_are_the_configured_ones() {
    check(
        &config(Nip11Mode::WithLimits),
        json!([1, 11, 34, 77]),
        Some(json!({
            "max_subscriptions": 7,
            "max_filters": 5,
            "max_limit": 200,
            "default_limit": 50,
        })),
    );
}

#[test]
fn unset_optional_limits_are_left_out() {
    let config = TestRelayConfig {
        max_filter_limit: None,
        max_filters: None,
        ..config(Nip11Mode::WithLimits)
    };
    check(
        &config,
        json!([1, 11, 34, 77]),
        Some(json!({ "max_subscriptions": 7, "default_limit": 50 })),
    );
}

#[test]
fn hidden_limits_leave_no_limitation_object() {
    check(
        &config(Nip11Mode::WithoutLimits),
        json!([1, 11, 34, 77]),
        None,
    );
}

#[test]
fn negentropy_is_listed_only_when_advertised() {
    let config = TestRelayConfig {
        advertise_negentropy: false,
        ..config(Nip11Mode::WithoutLimits)
    };
    check(&config, json!([1, 11, 34]), None);
}

#[test]
fn no_document_when_not_served() {
    assert_eq!(document(&config(Nip11Mode::NotServed)), None);
}

#[test]
fn document_parses_as_a_nip11_relay_information_document() {
    let doc = document(&config(Nip11Mode::WithLimits)).unwrap();
    let parsed: RelayInformationDocument = serde_json::from_value(doc).unwrap();
    let limitation = parsed.limitation.unwrap();
    assert_eq!(limitation.max_subscriptions, Some(7));
    assert_eq!(limitation.max_filters, Some(5));
    assert_eq!(limitation.max_limit, Some(200));
    assert_eq!(parsed.supported_nips, Some(vec![1, 11, 34, 77]));
}

#[test]
fn strict_limits_replace_the_plain_ones_and_are_advertised_only_when_asked() {
    use crate::relay::strict::{Dialect, FilterLimit, StrictLimits, SubscriptionLimit};
    let strict = |advertised| StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 3,
            dialect: Dialect::Strfry,
            counts_negentropy: true,
            advertised,
        }),
        filters_per_req: Some(FilterLimit {
            max: 2,
            dialect: Dialect::Strfry,
            advertised,
        }),
        ..StrictLimits::default()
    };
    let advertised = TestRelayConfig {
        strict: Some(strict(true)),
        ..config(Nip11Mode::WithLimits)
    };
    check(
        &advertised,
        json!([1, 11, 34, 77]),
        Some(json!({
            "max_subscriptions": 3,
            "max_filters": 2,
            "max_limit": 200,
            "default_limit": 50,
        })),
    );
    let hidden = TestRelayConfig {
        strict: Some(strict(false)),
        advertise_default_limit: false,
        advertise_max_limit: false,
        ..config(Nip11Mode::WithLimits)
    };
    check(&hidden, json!([1, 11, 34, 77]), Some(json!({})));
}
