//! The strict relay through its public API: each limit answers with its relay's text at the
//! right message and not before, the counters count, nostr-sdk works through the proxy and
//! sees disabled negentropy as unsupported, and the profiles advertise what they should.

use std::time::Duration;

use grasp_sync_testkit::{
    Dialect, FilterLimit, FilterPredicate, PolicyRule, RefusalKind, StartKind, StrictLimits,
    SubscriptionLimit, TestRelay, TestRelayConfig,
};
use nostr_sdk::prelude::*;
use serde_json::{Value, json};

use crate::support::{DEADLINE, End, Probe, Raw, fetch_nip11, notes};

/// A negentropy initial message for an empty set over the whole range.
const EMPTY_NEG_MESSAGE: &str = "6100000200";

async fn start(limits: StrictLimits) -> TestRelay {
    TestRelay::start(TestRelayConfig::strict(limits))
        .await
        .expect("strict relay starts")
}

fn req(id: &str, filters: usize) -> Value {
    let mut frame = vec![json!("REQ"), json!(id)];
    frame.extend((1..=filters).map(|k| json!({ "kinds": [k] })));
    Value::Array(frame)
}

fn eose(id: &str) -> Value {
    json!(["EOSE", id])
}

fn neg_open(id: &str) -> Value {
    json!(["NEG-OPEN", id, { "kinds": [1] }, EMPTY_NEG_MESSAGE])
}

/// Opens `max` subscriptions, asserts the next REQ gets `refusal`, closes one and asserts a
/// REQ is accepted again.
async fn check_subscription_cap(dialect: Dialect, refusal: Value) {
    let relay = start(StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 2,
            dialect,
            counts_negentropy: false,
            advertised: true,
        }),
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("a", 1), eose("a")).await;
    client.exchange(req("b", 1), eose("b")).await;
    client.exchange(req("c", 1), refusal).await;
    client.send(json!(["CLOSE", "a"])).await;
    client.exchange(req("c", 1), eose("c")).await;
    let stats = relay.strict_stats();
    assert_eq!(stats.refusals_of(RefusalKind::TooManySubscriptions), 1);
    assert_eq!(stats.peak_open_subscriptions(), 2);
}

#[tokio::test]
async fn strfry_refuses_a_req_past_its_subscription_cap_with_a_notice() {
    check_subscription_cap(
        Dialect::Strfry,
        json!(["NOTICE", "ERROR: too many concurrent REQs"]),
    )
    .await;
}

#[tokio::test]
async fn rust_nostr_refuses_a_req_past_its_subscription_cap_with_closed() {
    check_subscription_cap(
        Dialect::RustNostr,
        json!(["CLOSED", "c", "rate-limited: too many REQs"]),
    )
    .await;
}

#[tokio::test]
async fn nostream_refuses_a_req_past_its_subscription_cap_stating_the_cap() {
    check_subscription_cap(
        Dialect::Nostream,
        json!([
            "NOTICE",
            "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to 2"
        ]),
    )
    .await;
}

#[tokio::test]
async fn rnostr_refuses_a_req_past_its_subscription_cap_with_a_closed() {
    check_subscription_cap(
        Dialect::Rnostr,
        json!(["CLOSED", "c", "Number of subscriptions exceeds limit"]),
    )
    .await;
}

/// A REQ with `max` filters is served; one with `max + 2` gets `refusal`.
async fn check_filter_cap(dialect: Dialect, max: usize, refusal: Value) {
    let relay = start(StrictLimits {
        filters_per_req: Some(FilterLimit {
            max,
            dialect,
            advertised: false,
        }),
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("ok", max), eose("ok")).await;
    client.exchange(req("big", max + 2), refusal).await;
    assert_eq!(
        relay
            .strict_stats()
            .refusals_of(RefusalKind::TooManyFilters),
        1
    );
}

#[tokio::test]
async fn strfry_filter_validation_states_the_submitted_filter_count() {
    check_filter_cap(
        Dialect::Strfry,
        3,
        json!([
            "CLOSED",
            "big",
            "ERROR: bad req: filter validation failed: invalid number of filters: 5"
        ]),
    )
    .await;
}

#[tokio::test]
async fn rust_nostr_refuses_too_many_filters_with_closed() {
    check_filter_cap(
        Dialect::RustNostr,
        20,
        json!(["CLOSED", "big", "blocked: too many filters"]),
    )
    .await;
}

#[tokio::test]
async fn nostream_refuses_too_many_filters_stating_its_ceiling() {
    check_filter_cap(
        Dialect::Nostream,
        10,
        json!([
            "NOTICE",
            "Subscription rejected: Too many filters: Number of filters per susbscription must be less then or equal to 10"
        ]),
    )
    .await;
}

#[tokio::test]
async fn rnostr_refuses_too_many_filters_stating_its_ceiling() {
    check_filter_cap(
        Dialect::Rnostr,
        10,
        json!(["CLOSED", "big", "invalid: limitation.max_filters 10"]),
    )
    .await;
}

#[tokio::test]
async fn retained_req_bytes_refuse_the_req_that_would_exceed_them() {
    let cap = 2 * req("a", 1).to_string().len();
    let relay = start(StrictLimits {
        retained_req_bytes: Some(cap),
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("a", 1), eose("a")).await;
    client.exchange(req("b", 1), eose("b")).await;
    let text = format!("rate-limited: active subscriptions exceed max size {cap} bytes");
    client
        .exchange(req("c", 1), json!(["CLOSED", "c", text]))
        .await;
    client.send(json!(["CLOSE", "b"])).await;
    client.exchange(req("c", 1), eose("c")).await;
    assert_eq!(
        relay
            .strict_stats()
            .refusals_of(RefusalKind::RetainedBytesExceeded),
        1
    );
}

#[tokio::test]
async fn the_query_allowance_refuses_the_start_past_it_with_closed_or_neg_err() {
    let relay = TestRelay::start(TestRelayConfig::rust_nostr_like_with_queries_per_minute(3))
        .await
        .unwrap();
    let mut client = Raw::connect(&relay.url()).await;
    for id in ["a", "b", "c"] {
        client.exchange(req(id, 1), eose(id)).await;
    }
    client
        .exchange(
            req("d", 1),
            json!(["CLOSED", "d", "rate-limited: too many queries"]),
        )
        .await;
    client
        .exchange(
            neg_open("n"),
            json!(["NEG-ERR", "n", "rate-limited: too many queries"]),
        )
        .await;
    let stats = relay.strict_stats();
    assert_eq!(stats.refusals_of(RefusalKind::TooManyQueries), 2);
    assert_eq!(stats.req_starts().count(), 4);
    assert_eq!(stats.neg_opens(), 1);
}

#[tokio::test]
async fn concurrent_negentropy_past_the_cap_gets_strfrys_notice() {
    let relay = start(StrictLimits {
        concurrent_negentropy: Some(1),
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.send(neg_open("n1")).await;
    assert_eq!(client.recv().await[0], "NEG-MSG");
    client
        .exchange(
            neg_open("n2"),
            json!(["NOTICE", "ERROR: too many concurrent NEG requests"]),
        )
        .await;
    client.send(json!(["NEG-CLOSE", "n1"])).await;
    client.send(neg_open("n3")).await;
    let answer = client.recv().await;
    assert_eq!(
        (answer[0].clone(), answer[1].clone()),
        (json!("NEG-MSG"), json!("n3"))
    );
    assert_eq!(
        relay
            .strict_stats()
            .refusals_of(RefusalKind::TooManyConcurrentNeg),
        1
    );
}

#[tokio::test]
async fn a_negentropy_session_takes_a_shared_slot_like_strfry() {
    let relay = start(StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 1,
            dialect: Dialect::Strfry,
            counts_negentropy: true,
            advertised: true,
        }),
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.send(neg_open("n1")).await;
    assert_eq!(client.recv().await[0], "NEG-MSG");
    client
        .exchange(
            req("a", 1),
            json!(["NOTICE", "ERROR: too many concurrent REQs"]),
        )
        .await;
    client.send(json!(["NEG-CLOSE", "n1"])).await;
    client.exchange(req("a", 1), eose("a")).await;
    client
        .exchange(
            neg_open("n2"),
            json!(["NOTICE", "ERROR: too many concurrent NEG requests"]),
        )
        .await;
}

#[tokio::test]
async fn nostr_sdk_reports_disabled_negentropy_as_unsupported() {
    let relay = start(StrictLimits {
        negentropy_enabled: false,
        ..StrictLimits::default()
    })
    .await;
    relay.seed(notes(3)).await.unwrap();
    let probe = Probe::connect(&relay.url()).await;
    let opts = SyncOptions::default()
        .dry_run()
        .initial_timeout(Duration::from_secs(60));
    let result = tokio::time::timeout(
        DEADLINE,
        probe
            .relay
            .sync_with_items(Filter::new().kind(Kind::TextNote), Vec::new(), &opts),
    )
    .await
    .expect("answered well before the 60 s initial timeout");
    assert!(
        matches!(
            result,
            Err(nostr_sdk::pool::relay::Error::NegentropyNotSupported)
        ),
        "{result:?}"
    );

    let mut client = Raw::connect(&relay.url()).await;
    client
        .exchange(
            neg_open("n"),
            json!(["NOTICE", "ERROR: bad msg: negentropy disabled"]),
        )
        .await;
    // REQs still work on the same connection.
    client
        .exchange(json!(["REQ", "a", { "kinds": [2] }]), eose("a"))
        .await;
    let stats = relay.strict_stats();
    assert_eq!(stats.refusals_of(RefusalKind::NegentropyDisabled), 2);
    assert_eq!(stats.neg_opens(), 2);
}

#[tokio::test]
async fn a_policy_refuses_reqs_and_neg_opens_with_a_quote_filter() {
    let relay = start(StrictLimits {
        policies: vec![PolicyRule::new(
            FilterPredicate::Tag('q'),
            "blocked: quote filters are not served",
        )],
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("plain", 2), eose("plain")).await;
    client
        .exchange(
            json!(["REQ", "quotes", { "kinds": [1] }, { "#q": ["x"] }]),
            json!(["CLOSED", "quotes", "blocked: quote filters are not served"]),
        )
        .await;
    client
        .exchange(
            json!(["NEG-OPEN", "n", { "#q": ["x"] }, EMPTY_NEG_MESSAGE]),
            json!(["NEG-ERR", "n", "blocked: quote filters are not served"]),
        )
        .await;
    assert_eq!(relay.strict_stats().refusals_of(RefusalKind::Policy), 2);
}

#[tokio::test]
async fn the_connection_drops_when_the_message_after_its_budget_arrives() {
    let relay = start(StrictLimits {
        disconnect_after_messages: Some(2),
        ..StrictLimits::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("a", 2), eose("a")).await;
    client.exchange(req("b", 2), eose("b")).await;
    client.send(req("c", 2)).await;
    client.until_disconnected().await;
    let stats = relay.strict_stats();
    assert!(stats.per_connection[0].dropped);
    assert_eq!(stats.per_connection[0].client_messages, 3);
    assert_eq!(
        stats.req_starts().count(),
        2,
        "the third REQ was not handled"
    );

    // A new connection gets a fresh budget.
    let mut again = Raw::connect(&relay.url()).await;
    again.exchange(req("a", 2), eose("a")).await;
    assert_eq!(relay.strict_stats().connections(), 2);
}

#[tokio::test]
async fn the_bytes_of_every_text_frame_are_counted_each_way_per_connection() {
    let relay = start(StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 1,
            dialect: Dialect::Strfry,
            counts_negentropy: false,
            advertised: true,
        }),
        ..StrictLimits::default()
    })
    .await;
    let refusal = json!(["NOTICE", "ERROR: too many concurrent REQs"]);
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("a", 2), eose("a")).await;
    client.exchange(req("b", 1), refusal.clone()).await;
    let mut other = Raw::connect(&relay.url()).await;
    other.exchange(req("c", 3), eose("c")).await;

    let len = |frame: Value| frame.to_string().len() as u64;
    let stats = relay.strict_stats();
    let first = &stats.per_connection[0];
    assert_eq!(
        (first.bytes_received, first.bytes_sent),
        (
            len(req("a", 2)) + len(req("b", 1)),
            len(eose("a")) + len(refusal.clone())
        ),
        "a refused REQ and the proxy's refusal count too"
    );
    let second = &stats.per_connection[1];
    assert_eq!(
        (second.bytes_received, second.bytes_sent),
        (len(req("c", 3)), len(eose("c")))
    );
    assert_eq!(
        first.received_by_verb,
        [("REQ", len(req("a", 2)) + len(req("b", 1)))].into()
    );
    assert_eq!(
        first.sent_by_verb,
        [("EOSE", len(eose("a"))), ("NOTICE", len(refusal))].into()
    );
    assert_eq!(
        stats.bytes_received(),
        first.bytes_received + second.bytes_received
    );
    assert_eq!(stats.bytes_sent(), first.bytes_sent + second.bytes_sent);
}

#[tokio::test]
async fn a_nostr_sdk_client_subscribes_and_gets_eose_through_the_proxy() {
    let relay = TestRelay::start(TestRelayConfig::nos_lol_like())
        .await
        .unwrap();
    let seeded = notes(5);
    relay.seed(seeded.clone()).await.unwrap();
    let mut probe = Probe::connect(&relay.url()).await;
    probe
        .req("all", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    let (events, end) = probe.until_end("all").await;
    assert_eq!(end, End::Eose);
    assert_eq!(events.len(), 5);

    let stats = relay.strict_stats();
    assert_eq!(stats.connections(), 1);
    assert_eq!(stats.events_sent(), 5);
    let starts: Vec<_> = stats.req_starts().collect();
    assert_eq!(starts.len(), 1);
    assert_eq!(
        (starts[0].subscription_id.as_str(), starts[0].refused),
        ("all", None)
    );
    assert_eq!(stats.total_refusals(), 0);
}

#[tokio::test]
async fn negentropy_through_the_proxy_reconciles_and_is_counted() {
    let relay = TestRelay::start(TestRelayConfig::nos_lol_like())
        .await
        .unwrap();
    let seeded = notes(6);
    relay.seed(seeded.clone()).await.unwrap();
    let probe = Probe::connect(&relay.url()).await;
    let have: Vec<(EventId, Timestamp)> =
        seeded[..2].iter().map(|e| (e.id, e.created_at)).collect();
    let result = tokio::time::timeout(
        DEADLINE,
        probe.relay.sync_with_items(
            Filter::new().kind(Kind::TextNote),
            have,
            &SyncOptions::default().dry_run(),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(result.remote.len(), 4);
    let stats = relay.strict_stats();
    assert_eq!(stats.neg_opens(), 1);
    assert_eq!(stats.per_connection[0].peak_negentropy, 1);
}

#[tokio::test]
async fn counters_record_starts_with_times_refusals_and_peaks_per_connection() {
    let relay = start(StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 2,
            dialect: Dialect::RustNostr,
            counts_negentropy: false,
            advertised: true,
        }),
        ..StrictLimits::default()
    })
    .await;
    let mut first = Raw::connect(&relay.url()).await;
    let mut second = Raw::connect(&relay.url()).await;
    first.exchange(req("a", 1), eose("a")).await;
    first.exchange(req("b", 1), eose("b")).await;
    first
        .exchange(
            req("c", 1),
            json!(["CLOSED", "c", "rate-limited: too many REQs"]),
        )
        .await;
    second.exchange(req("x", 1), eose("x")).await;

    let stats = relay.strict_stats();
    assert_eq!(stats.connections(), 2);
    let peaks: Vec<usize> = stats
        .per_connection
        .iter()
        .map(|c| c.peak_subscriptions)
        .collect();
    assert_eq!(peaks, vec![2, 1]);
    let first_starts: Vec<(&str, Option<RefusalKind>)> = stats
        .starts
        .iter()
        .filter(|s| s.connection == 0)
        .map(|s| (s.subscription_id.as_str(), s.refused))
        .collect();
    assert_eq!(
        first_starts,
        vec![
            ("a", None),
            ("b", None),
            ("c", Some(RefusalKind::TooManySubscriptions))
        ]
    );
    assert!(stats.starts.iter().all(|s| s.kind == StartKind::Req));
    assert!(stats.starts.windows(2).all(|w| w[0].at <= w[1].at));
    // Three starts on the first connection within well under a minute.
    assert_eq!(stats.most_starts_within(Duration::from_secs(60)), 3);
    assert_eq!(stats.refusals_of(RefusalKind::TooManySubscriptions), 1);
    assert_eq!(stats.per_connection[0].client_messages, 3);
}

/// Asserts the `limitation` object a profile's NIP-11 document serves.
async fn check_profile_nip11(config: TestRelayConfig, expected: Value) {
    let relay = TestRelay::start(config).await.expect("profile starts");
    let (status, body) = fetch_nip11(&relay.nip11_url()).await;
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).expect("NIP-11 is JSON");
    assert_eq!(doc["limitation"], expected);
}

#[tokio::test]
async fn profiles_advertise_some_limits_and_hide_others() {
    check_profile_nip11(
        TestRelayConfig::nos_lol_like(),
        json!({ "max_subscriptions": 20, "max_limit": 500 }),
    )
    .await;
    check_profile_nip11(
        TestRelayConfig::nostream_like(),
        json!({
            "max_subscriptions": 10,
            "max_filters": 10,
            "max_limit": 5000,
            "default_limit": 500,
        }),
    )
    .await;
    check_profile_nip11(
        TestRelayConfig::strfry_filter_validation_like(),
        json!({ "max_subscriptions": 200, "max_limit": 500 }),
    )
    .await;
    check_profile_nip11(
        TestRelayConfig::ditto_like(),
        json!({ "max_subscriptions": 20, "max_limit": 1000 }),
    )
    .await;
    check_profile_nip11(
        TestRelayConfig::rust_nostr_like(),
        json!({
            "max_subscriptions": 500,
            "max_filters": 20,
            "max_limit": 500,
            "default_limit": 500,
        }),
    )
    .await;
}

/// Opens `budget` subscriptions on a profile, then asserts the next REQ gets `refusal`.
async fn check_profile_budget(config: TestRelayConfig, budget: usize, refusal: Value) {
    let relay = TestRelay::start(config).await.expect("profile starts");
    let mut client = Raw::connect(&relay.url()).await;
    for i in 0..budget {
        let id = format!("s{i}");
        client.exchange(req(&id, 1), eose(&id)).await;
    }
    client.exchange(req("over", 1), refusal).await;
}

#[tokio::test]
async fn profiles_refuse_one_past_their_subscription_budget() {
    check_profile_budget(
        TestRelayConfig::nos_lol_like(),
        20,
        json!(["NOTICE", "ERROR: too many concurrent REQs"]),
    )
    .await;
    check_profile_budget(
        TestRelayConfig::nostream_like(),
        10,
        json!([
            "NOTICE",
            "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to 10"
        ]),
    )
    .await;
    check_profile_budget(
        TestRelayConfig::ditto_like(),
        20,
        json!(["CLOSED", "over", "rate-limited: too many REQs"]),
    )
    .await;
}

#[tokio::test]
async fn ditto_like_serves_one_hundred_results_per_filter_without_limit() {
    let relay = TestRelay::start(TestRelayConfig::ditto_like())
        .await
        .unwrap();
    relay.seed(notes(150)).await.unwrap();
    let mut probe = Probe::connect(&relay.url()).await;
    probe
        .req("page", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    assert_eq!(probe.until_end("page").await.0.len(), 100);
}

#[tokio::test]
async fn a_relay_without_strict_limits_counts_nothing() {
    let relay = TestRelay::start(TestRelayConfig::default()).await.unwrap();
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("a", 1), eose("a")).await;
    assert_eq!(
        relay.strict_stats(),
        grasp_sync_testkit::StrictStats::default()
    );
}

#[tokio::test]
async fn a_strict_relay_stops_restarts_and_keeps_its_counters() {
    let mut relay = TestRelay::start(TestRelayConfig::nostream_like())
        .await
        .unwrap();
    let mut client = Raw::connect(&relay.url()).await;
    client.exchange(req("a", 1), eose("a")).await;
    relay.stop().await.unwrap();
    client.until_disconnected().await;
    relay.restart().await.unwrap();
    let mut again = Raw::connect(&relay.url()).await;
    again.exchange(req("a", 1), eose("a")).await;
    let stats = relay.strict_stats();
    assert_eq!(stats.connections(), 2);
    assert_eq!(stats.req_starts().count(), 2);
}
