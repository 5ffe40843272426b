//! The table of every known relay text with its category, plus prefix, number and robustness
//! rules of the classifier.

use proptest::prelude::*;

use crate::{MAX_PLAUSIBLE_BYTE_CAP, Refusal, RefusalCategory as C, classify};

/// Every known relay text, verbatim as the relay sends it (the relay is named beside each).
const KNOWN: &[(&str, C)] = &[
    // strfry (RelayServer: NOTICE and CLOSED errors carry an "ERROR: " prefix).
    (
        "ERROR: too many concurrent NEG requests",
        C::TooManyConcurrentNeg,
    ),
    ("ERROR: too many concurrent REQs", C::TooManySubscriptions),
    (
        "ERROR: bad req: filter validation failed: invalid number of filters: 8",
        C::TooManyFilters,
    ),
    (
        "ERROR: bad req: filter validation failed: too many kinds in filter: 12",
        C::InvalidFilter,
    ),
    (
        "ERROR: bad req: filter validation failed: kind not allowed: 4",
        C::InvalidFilter,
    ),
    (
        "ERROR: bad req: filter validation failed: filter must have exactly one author, p tag, or e tag",
        C::InvalidFilter,
    ),
    ("ERROR: bad req: filter item too large", C::InvalidFilter),
    ("ERROR: bad req: filter item too small", C::InvalidFilter),
    (
        "ERROR: bad req: total filter items too large",
        C::InvalidFilter,
    ),
    ("ERROR: bad req: too many tags in filter", C::InvalidFilter),
    ("ERROR: bad req: unindexed tag filter", C::InvalidFilter),
    ("ERROR: bad req: unrecognised filter item", C::InvalidFilter),
    ("ERROR: bad req: arr too big", C::Error),
    ("blocked: too many query results", C::Blocked),
    ("closed: unknown subscription handle", C::Unknown),
    ("blocked: event marked as protected", C::Blocked),
    ("duplicate: have this event", C::Duplicate),
    // rust-nostr relay builder (LocalRelay).
    ("rate-limited: too many queries", C::RateLimited),
    ("rate-limited: too many REQs", C::TooManySubscriptions),
    ("blocked: too many filters", C::TooManyFilters),
    (
        "rate-limited: active subscriptions exceed max size 262144 bytes",
        C::RetainedBytesExceeded,
    ),
    ("blocked: requested too many event IDs", C::InvalidFilter),
    ("blocked: subscription ID exceeds max length 64", C::Blocked),
    ("auth-required: you must auth", C::AuthRequired),
    (
        "error: you cannot request another user's gift wrap",
        C::Error,
    ),
    ("error: invalid negentropy message", C::Error),
    ("error: subscription not found", C::Error),
    ("error: database error", C::Error),
    ("rate-limited: slow down", C::RateLimited),
    ("duplicate: already have this event", C::Duplicate),
    ("pow: required a difficulty >= 20", C::Pow),
    ("invalid: invalid event signature", C::Invalid),
    // nostream.
    ("rate limited", C::RateLimited),
    (
        "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to 10",
        C::TooManySubscriptions,
    ),
    (
        "Subscription rejected: Too many filters: Number of filters per susbscription must be less then or equal to 10",
        C::TooManyFilters,
    ),
    (
        "Subscription rejected: Limit too high: Filter limit must be less than or equal to 5000",
        C::InvalidFilter,
    ),
    ("rate-limited: slow down there chief", C::RateLimited),
    // rnostr.
    (
        "Number of subscriptions exceeds limit",
        C::TooManySubscriptions,
    ),
    ("invalid: limitation.max_filters 10", C::TooManyFilters),
    ("invalid: limitation.max_limit 300", C::InvalidFilter),
    ("invalid: limitation.max_subid_length 100", C::Invalid),
    // khatru.
    ("rate-limited: slow down, please", C::RateLimited),
    (
        "rate-limited: there is a bug in the client, no one should be making so many requests",
        C::RateLimited,
    ),
    ("blocked: too many things to filter for", C::InvalidFilter),
    ("blocked: can't handle empty filters", C::InvalidFilter),
    ("blocked: no reason", C::Blocked),
    // nostr-rs-relay.
    (
        "Maximum concurrent subscription count reached",
        C::TooManySubscriptions,
    ),
    ("duplicate: ", C::Duplicate),
    // NIP-01 prefixes alone.
    ("restricted: not on the allowlist", C::Restricted),
    ("mute: you are muted", C::Blocked),
];

#[test]
fn every_known_relay_text_has_its_category() {
    for (text, expected) in KNOWN {
        assert_eq!(classify(text).category, *expected, "{text}");
    }
}

fn check(text: &str, expected: Refusal) {
    assert_eq!(classify(text), expected, "{text}");
}

#[test]
fn strfry_filter_count_states_the_submitted_count() {
    check(
        "ERROR: bad req: filter validation failed: invalid number of filters: 8",
        Refusal {
            submitted_filters: Some(8),
            ..Refusal::new(C::TooManyFilters)
        },
    );
}

#[test]
fn a_stated_filter_ceiling_is_not_taken_as_the_submitted_count() {
    check(
        "Subscription rejected: Too many filters: Number of filters per susbscription must be less then or equal to 10",
        Refusal::new(C::TooManyFilters),
    );
    check(
        "invalid: limitation.max_filters 10",
        Refusal::new(C::TooManyFilters),
    );
}

#[test]
fn retained_byte_cap_is_parsed() {
    check(
        "rate-limited: active subscriptions exceed max size 262144 bytes",
        Refusal {
            byte_cap: Some(262_144),
            ..Refusal::new(C::RetainedBytesExceeded)
        },
    );
}

#[test]
fn absurd_or_overflowing_numbers_are_ignored() {
    let cases = [
        "invalid number of filters: 0",
        "invalid number of filters: 5000",
        "invalid number of filters: 99999999999999999999999999",
        "active subscriptions exceed max size 0 bytes",
        "active subscriptions exceed max size 18446744073709551616 bytes",
        "active subscriptions exceed max size 99999999999 bytes",
        "invalid number of filters: ",
    ];
    for text in cases {
        let refusal = classify(text);
        assert_eq!(
            (refusal.submitted_filters, refusal.byte_cap),
            (None, None),
            "{text}"
        );
    }
    let largest = format!("active subscriptions exceed max size {MAX_PLAUSIBLE_BYTE_CAP} bytes");
    assert_eq!(classify(&largest).byte_cap, Some(MAX_PLAUSIBLE_BYTE_CAP));
}

#[test]
fn nip01_prefixes_decide_when_no_known_text_matches() {
    let cases = [
        ("rate-limited: whatever", C::RateLimited),
        ("blocked: whatever", C::Blocked),
        ("restricted: whatever", C::Restricted),
        ("auth-required: whatever", C::AuthRequired),
        ("invalid: whatever", C::Invalid),
        ("duplicate: whatever", C::Duplicate),
        ("pow: whatever", C::Pow),
        ("error: whatever", C::Error),
        ("  Blocked : spaced and capitalised", C::Blocked),
    ];
    for (text, expected) in cases {
        assert_eq!(classify(text).category, expected, "{text}");
    }
}

#[test]
fn unknown_text_is_unknown() {
    for text in [
        "",
        "   ",
        "hello",
        "weird: prefix",
        "rate-limited",
        "ratelimited: x",
    ] {
        assert_eq!(classify(text).category, C::Unknown, "{text:?}");
    }
}

#[test]
fn only_the_first_kilobyte_is_examined() {
    let long = format!("{}too many queries", "x".repeat(2000));
    assert_eq!(classify(&long).category, C::Unknown);
    let multibyte = "é".repeat(600) + "too many queries";
    assert_eq!(classify(&multibyte).category, C::Unknown);
}

#[test]
fn metric_labels_are_unique_lowercase() {
    let mut labels: Vec<&str> = C::ALL.iter().map(|c| c.metric_label()).collect();
    assert!(
        labels
            .iter()
            .all(|l| l.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    );
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), C::ALL.len());
}

proptest! {
    #[test]
    fn any_text_classifies_without_panicking(text in ".{0,300}") {
        let refusal = classify(&text);
        prop_assert!(C::ALL.contains(&refusal.category));
    }

    #[test]
    fn any_stated_filter_count_is_plausible_or_absent(n in any::<u64>()) {
        let refusal = classify(&format!("invalid number of filters: {n}"));
        prop_assert_eq!(refusal.category, C::TooManyFilters);
        let expected = (1..=4096).contains(&n).then(|| u32::try_from(n).unwrap());
        prop_assert_eq!(refusal.submitted_filters, expected);
    }
}
