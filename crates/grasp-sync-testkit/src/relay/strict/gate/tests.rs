//! Unit tests for the gate: each limit's verdict at the right message, slot accounting from
//! both directions, the query window on an injected clock.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;
use tokio::time::Instant;

use super::{Gate, Verdict};
use crate::relay::strict::{
    Dialect, FilterLimit, FilterPredicate, PolicyRule, StrictLimits, SubscriptionLimit,
};

/// A REQ with `filters` filters (kind 1, 2, ...).
fn req(id: &str, filters: usize) -> String {
    let mut frame = vec![json!("REQ"), json!(id)];
    frame.extend((1..=filters).map(|k| json!({ "kinds": [k] })));
    serde_json::Value::Array(frame).to_string()
}

fn close(id: &str) -> String {
    json!(["CLOSE", id]).to_string()
}

fn neg_open(id: &str) -> String {
    json!(["NEG-OPEN", id, { "kinds": [1] }, "6100000200"]).to_string()
}

fn subscriptions(max: usize, dialect: Dialect, counts_negentropy: bool) -> StrictLimits {
    StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max,
            dialect,
            counts_negentropy,
            advertised: true,
        }),
        ..StrictLimits::default()
    }
}

/// Runs a script against a fresh gate. Each step is (seconds since start, input, expected):
/// input `> frame` is a client message, expected `forward`, `disconnect`, `ignore` or the
/// refusal frame; input `< frame` is a relay message, expected `event` or `-`.
fn check(limits: StrictLimits, script: &[(u64, &str, &str)]) {
    let mut gate = Gate::new(Arc::new(limits));
    let start = Instant::now();
    for (i, (secs, input, expected)) in script.iter().enumerate() {
        let now = start + Duration::from_secs(*secs);
        let got = if let Some(frame) = input.strip_prefix("> ") {
            match gate.handle_client(now, frame).verdict {
                Verdict::Forward => "forward".to_owned(),
                Verdict::Disconnect => "disconnect".to_owned(),
                Verdict::Ignore => "ignore".to_owned(),
                Verdict::Refuse { frames, .. } => frames.join(" "),
                Verdict::Answer(frame) => frame,
            }
        } else if let Some(frame) = input.strip_prefix("< ") {
            if gate.handle_relay(frame) {
                "event"
            } else {
                "-"
            }
            .to_owned()
        } else {
            panic!("step {i}: input must start with `> ` or `< `");
        };
        assert_eq!(got, *expected, "step {i}: {input}");
    }
}

#[test]
fn query_allowance_refills_sixty_seconds_after_each_start() {
    let limits = StrictLimits {
        queries_per_minute: Some(2),
        ..StrictLimits::default()
    };
    let refused = |id: &str| json!(["CLOSED", id, "rate-limited: too many queries"]).to_string();
    check(
        limits,
        &[
            (0, &format!("> {}", req("a", 1)), "forward"),
            (1, &format!("> {}", req("b", 1)), "forward"),
            // The refused start does not use the allowance...
            (2, &format!("> {}", req("c", 1)), &refused("c")),
            // ...so at 60 s only `a` has left the window and one start fits.
            (60, &format!("> {}", req("d", 1)), "forward"),
            (60, &format!("> {}", req("e", 1)), &refused("e")),
            (61, &format!("> {}", req("e", 1)), "forward"),
            (
                61,
                &format!("> {}", neg_open("n")),
                &json!(["NEG-ERR", "n", "rate-limited: too many queries"]).to_string(),
            ),
        ],
    );
}

#[test]
fn a_shorter_query_window_refills_the_allowance_that_much_sooner() {
    let limits = StrictLimits {
        queries_per_minute: Some(2),
        query_window: Duration::from_secs(5),
        ..StrictLimits::default()
    };
    let refused = |id: &str| json!(["CLOSED", id, "rate-limited: too many queries"]).to_string();
    check(
        limits,
        &[
            (0, &format!("> {}", req("a", 1)), "forward"),
            (3, &format!("> {}", req("b", 1)), "forward"),
            (4, &format!("> {}", req("c", 1)), &refused("c")),
            // `a` leaves the window exactly 5 s after it was read, `b` at 8 s.
            (5, &format!("> {}", req("d", 1)), "forward"),
            (7, &format!("> {}", req("e", 1)), &refused("e")),
            (8, &format!("> {}", req("e", 1)), "forward"),
            (
                9,
                &format!("> {}", neg_open("n")),
                &json!(["NEG-ERR", "n", "rate-limited: too many queries"]).to_string(),
            ),
            (13, &format!("> {}", neg_open("n")), "forward"),
        ],
    );
}

#[test]
fn the_query_window_defaults_to_the_rust_nostr_relay_builders_minute() {
    assert_eq!(
        StrictLimits::default().query_window,
        Duration::from_secs(60)
    );
}

#[test]
fn eose_keeps_a_slot_and_close_or_closed_frees_it() {
    let refused = |id: &str| json!(["CLOSED", id, "rate-limited: too many REQs"]).to_string();
    check(
        subscriptions(1, Dialect::RustNostr, false),
        &[
            (0, &format!("> {}", req("a", 1)), "forward"),
            (0, r#"< ["EOSE","a"]"#, "-"),
            (0, &format!("> {}", req("b", 1)), &refused("b")),
            (0, &format!("> {}", close("a")), "forward"),
            (0, &format!("> {}", req("b", 1)), "forward"),
            (0, r#"< ["EVENT","b",{}]"#, "event"),
            (0, r#"< ["CLOSED","b",""]"#, "-"),
            (0, &format!("> {}", req("c", 1)), "forward"),
            // Reusing an open ID replaces the subscription and needs no new slot.
            (0, &format!("> {}", req("c", 2)), "forward"),
        ],
    );
}

#[test]
fn each_dialect_refuses_subscriptions_with_its_text() {
    let cases = [
        (
            Dialect::Strfry,
            json!(["NOTICE", "ERROR: too many concurrent REQs"]),
        ),
        (
            Dialect::RustNostr,
            json!(["CLOSED", "b", "rate-limited: too many REQs"]),
        ),
        (
            Dialect::Nostream,
            json!([
                "NOTICE",
                "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to 1"
            ]),
        ),
        (
            Dialect::Rnostr,
            json!(["CLOSED", "b", "Number of subscriptions exceeds limit"]),
        ),
    ];
    for (dialect, expected) in cases {
        check(
            subscriptions(1, dialect, false),
            &[
                (0, &format!("> {}", req("a", 1)), "forward"),
                (0, &format!("> {}", req("b", 1)), &expected.to_string()),
            ],
        );
    }
}

#[test]
fn each_dialect_refuses_filters_with_its_text() {
    let cases = [
        (
            Dialect::Strfry,
            json!([
                "CLOSED",
                "b",
                "ERROR: bad req: filter validation failed: invalid number of filters: 5"
            ]),
        ),
        (
            Dialect::RustNostr,
            json!(["CLOSED", "b", "blocked: too many filters"]),
        ),
        (
            Dialect::Nostream,
            json!([
                "NOTICE",
                "Subscription rejected: Too many filters: Number of filters per susbscription must be less then or equal to 3"
            ]),
        ),
        (
            Dialect::Rnostr,
            json!(["CLOSED", "b", "invalid: limitation.max_filters 3"]),
        ),
    ];
    for (dialect, expected) in cases {
        let limits = StrictLimits {
            filters_per_req: Some(FilterLimit {
                max: 3,
                dialect,
                advertised: false,
            }),
            ..StrictLimits::default()
        };
        check(
            limits,
            &[
                (0, &format!("> {}", req("a", 3)), "forward"),
                (0, &format!("> {}", req("b", 5)), &expected.to_string()),
            ],
        );
    }
}

#[test]
fn retained_bytes_count_whole_frames_and_a_replacement_gives_its_own_back() {
    let frame = req("a", 1);
    let limits = StrictLimits {
        retained_req_bytes: Some(2 * frame.len()),
        ..StrictLimits::default()
    };
    let refused = json!([
        "CLOSED",
        "c",
        format!(
            "rate-limited: active subscriptions exceed max size {} bytes",
            2 * frame.len()
        )
    ])
    .to_string();
    check(
        limits,
        &[
            (0, &format!("> {frame}"), "forward"),
            (0, &format!("> {}", req("b", 1)), "forward"),
            (0, &format!("> {}", req("c", 1)), &refused),
            (0, &format!("> {}", req("b", 1)), "forward"),
            (0, &format!("> {}", close("b")), "forward"),
            (0, &format!("> {}", req("c", 1)), "forward"),
        ],
    );
}

#[test]
fn a_closed_refusal_of_an_open_id_ends_that_subscription_upstream_too() {
    let limits = StrictLimits {
        filters_per_req: Some(FilterLimit {
            max: 1,
            dialect: Dialect::RustNostr,
            advertised: true,
        }),
        ..StrictLimits::default()
    };
    let mut gate = Gate::new(Arc::new(limits));
    let now = Instant::now();
    assert_eq!(
        gate.handle_client(now, &req("a", 1)).verdict,
        Verdict::Forward
    );
    assert_eq!(gate.open(), (1, 0));
    match gate.handle_client(now, &req("a", 2)).verdict {
        Verdict::Refuse { close_upstream, .. } => {
            assert_eq!(close_upstream, Some(close("a")));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(gate.open(), (0, 0));
}

#[test]
fn negentropy_sessions_share_the_budget_only_when_counted() {
    let neg_refused = json!(["NOTICE", "ERROR: too many concurrent NEG requests"]).to_string();
    let req_refused = json!(["NOTICE", "ERROR: too many concurrent REQs"]).to_string();
    check(
        subscriptions(2, Dialect::Strfry, true),
        &[
            (0, &format!("> {}", neg_open("n1")), "forward"),
            (0, &format!("> {}", req("a", 1)), "forward"),
            (0, &format!("> {}", req("b", 1)), &req_refused),
            (0, &format!("> {}", neg_open("n2")), &neg_refused),
            (0, r#"< ["NEG-ERR","n1","closed"]"#, "-"),
            (0, &format!("> {}", neg_open("n2")), "forward"),
            (0, &format!("> {}", json!(["NEG-CLOSE", "n2"])), "forward"),
            (0, &format!("> {}", req("b", 1)), "forward"),
        ],
    );
    check(
        subscriptions(1, Dialect::Strfry, false),
        &[
            (0, &format!("> {}", req("a", 1)), "forward"),
            (0, &format!("> {}", neg_open("n1")), "forward"),
            (0, &format!("> {}", neg_open("n2")), "forward"),
        ],
    );
}

#[test]
fn concurrent_negentropy_cap_answers_with_strfrys_notice() {
    let limits = StrictLimits {
        concurrent_negentropy: Some(1),
        ..StrictLimits::default()
    };
    check(
        limits,
        &[
            (0, &format!("> {}", neg_open("n1")), "forward"),
            // Reopening the same ID replaces the session.
            (0, &format!("> {}", neg_open("n1")), "forward"),
            (
                0,
                &format!("> {}", neg_open("n2")),
                &json!(["NOTICE", "ERROR: too many concurrent NEG requests"]).to_string(),
            ),
            (0, &format!("> {}", req("a", 1)), "forward"),
        ],
    );
}

#[test]
fn disabled_negentropy_answers_every_neg_message_with_strfrys_notice() {
    let limits = StrictLimits {
        negentropy_enabled: false,
        ..StrictLimits::default()
    };
    let notice = json!(["NOTICE", "ERROR: bad msg: negentropy disabled"]).to_string();
    check(
        limits,
        &[
            (0, &format!("> {}", neg_open("n1")), &notice),
            (0, &format!("> {}", json!(["NEG-MSG", "n1", "61"])), &notice),
            (0, &format!("> {}", json!(["NEG-CLOSE", "n1"])), &notice),
            (0, &format!("> {}", req("a", 1)), "forward"),
        ],
    );
}

#[test]
fn ignored_neg_open_gets_no_answer_even_with_negentropy_off() {
    let limits = StrictLimits {
        ignore_neg_open: true,
        negentropy_enabled: false,
        ..StrictLimits::default()
    };
    check(
        limits,
        &[
            (0, &format!("> {}", neg_open("n1")), "ignore"),
            (
                0,
                &format!("> {}", json!(["NEG-MSG", "n1", "61"])),
                "ignore",
            ),
            (0, &format!("> {}", json!(["NEG-CLOSE", "n1"])), "ignore"),
            (0, &format!("> {}", req("a", 1)), "forward"),
        ],
    );
}

#[test]
fn policies_refuse_requests_with_a_matching_filter() {
    let limits = StrictLimits {
        policies: vec![
            PolicyRule::new(FilterPredicate::Tag('q'), "blocked: quotes are not served"),
            PolicyRule::new(FilterPredicate::Kind(4), "restricted: no direct messages"),
            PolicyRule::new(
                FilterPredicate::custom(|f| f.search.is_some()),
                "blocked: no search",
            ),
        ],
        ..StrictLimits::default()
    };
    let quote = json!(["REQ", "q", { "kinds": [1] }, { "#q": ["abc"] }]).to_string();
    let upper_q = json!(["REQ", "Q", { "#Q": ["abc"] }]).to_string();
    let dm = json!(["REQ", "dm", { "kinds": [4, 1] }]).to_string();
    let search = json!(["REQ", "s", { "search": "x" }]).to_string();
    let neg_quote = json!(["NEG-OPEN", "n", { "#q": ["abc"] }, "6100000200"]).to_string();
    check(
        limits,
        &[
            (
                0,
                &format!("> {quote}"),
                &json!(["CLOSED", "q", "blocked: quotes are not served"]).to_string(),
            ),
            (0, &format!("> {upper_q}"), "forward"),
            (
                0,
                &format!("> {dm}"),
                &json!(["CLOSED", "dm", "restricted: no direct messages"]).to_string(),
            ),
            (
                0,
                &format!("> {search}"),
                &json!(["CLOSED", "s", "blocked: no search"]).to_string(),
            ),
            (
                0,
                &format!("> {neg_quote}"),
                &json!(["NEG-ERR", "n", "blocked: quotes are not served"]).to_string(),
            ),
        ],
    );
}

#[test]
fn the_connection_drops_at_the_message_after_its_budget() {
    let limits = StrictLimits {
        disconnect_after_messages: Some(2),
        ..StrictLimits::default()
    };
    check(
        limits,
        &[
            (0, &format!("> {}", req("a", 1)), "forward"),
            (0, "> not json", "forward"),
            (0, &format!("> {}", close("a")), "disconnect"),
        ],
    );
}

/// A client or relay step of the property test.
#[derive(Debug, Clone)]
enum Step {
    Req(u8, usize),
    Close(u8),
    RelayClosed(u8),
    NegOpen(u8),
    NegClose(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..6, 1usize..4).prop_map(|(id, n)| Step::Req(id, n)),
        (0u8..6).prop_map(Step::Close),
        (0u8..6).prop_map(Step::RelayClosed),
        (0u8..6).prop_map(Step::NegOpen),
        (0u8..6).prop_map(Step::NegClose),
    ]
}

proptest! {
    #[test]
    fn open_subscriptions_and_retained_bytes_never_exceed_their_caps(
        max in 1usize..4,
        counts_negentropy in any::<bool>(),
        steps in proptest::collection::vec(step(), 0..60),
    ) {
        let cap = 2 * req("0", 3).len();
        let limits = StrictLimits {
            retained_req_bytes: Some(cap),
            ..subscriptions(max, Dialect::RustNostr, counts_negentropy)
        };
        let mut gate = Gate::new(Arc::new(limits));
        let now = Instant::now();
        for step in steps {
            match step {
                Step::Req(id, n) => { gate.handle_client(now, &req(&id.to_string(), n)); }
                Step::Close(id) => { gate.handle_client(now, &close(&id.to_string())); }
                Step::RelayClosed(id) => { gate.handle_relay(&json!(["CLOSED", id.to_string(), ""]).to_string()); }
                Step::NegOpen(id) => { gate.handle_client(now, &neg_open(&format!("n{id}"))); }
                Step::NegClose(id) => { gate.handle_client(now, &json!(["NEG-CLOSE", format!("n{id}")]).to_string()); }
            }
            let (subs, negs) = gate.open();
            let in_use = subs + if counts_negentropy { negs } else { 0 };
            prop_assert!(in_use <= max);
            prop_assert!(gate.retained_bytes <= cap);
            prop_assert_eq!(gate.retained_bytes, gate.subscriptions.values().sum::<usize>());
        }
    }
}

#[test]
fn events_asked_for_by_id_are_withheld_by_share_and_others_are_not() {
    use nostr::JsonUtil;
    let serve = crate::ServeById::new(0);
    let limits = StrictLimits {
        serve_by_id: Some(serve.clone()),
        ..StrictLimits::default()
    };
    let mut gate = Gate::new(Arc::new(limits));
    let keys = nostr::Keys::generate();
    let event = nostr::EventBuilder::text_note("x")
        .sign_with_keys(&keys)
        .expect("sign");
    let by_id = nostr::ClientMessage::req(
        nostr::SubscriptionId::new("ids"),
        vec![nostr::Filter::new().id(event.id)],
    );
    let by_kind = nostr::ClientMessage::req(
        nostr::SubscriptionId::new("kind"),
        vec![nostr::Filter::new().kind(nostr::Kind::TextNote)],
    );
    gate.handle_client(Instant::now(), &by_id.as_json());
    gate.handle_client(Instant::now(), &by_kind.as_json());
    let frame = |sub: &str| {
        nostr::RelayMessage::event(nostr::SubscriptionId::new(sub), event.clone()).as_json()
    };
    assert!(gate.withholds(&frame("ids")), "0 % served: withheld");
    assert!(
        !gate.withholds(&frame("kind")),
        "semantic requests are never withheld"
    );
    serve.set(100);
    assert!(!gate.withholds(&frame("ids")), "100 % served: delivered");
}

/// The gate's verdict on `frame`, as frames sent back (a forward is none).
fn answers(gate: &mut Gate, frame: &str) -> Vec<serde_json::Value> {
    let parse = |f: &str| serde_json::from_str::<serde_json::Value>(f).expect("json");
    match gate.handle_client(Instant::now(), frame).verdict {
        Verdict::Refuse { frames, .. } => frames.iter().map(|f| parse(f)).collect(),
        Verdict::Answer(frame) => vec![parse(&frame)],
        Verdict::Forward | Verdict::Disconnect | Verdict::Ignore => Vec::new(),
    }
}

fn auth_frame(keys: &nostr::Keys, challenge: &str) -> String {
    let relay = nostr::RelayUrl::parse("ws://127.0.0.1:1").expect("url");
    let event = nostr::EventBuilder::auth(challenge, relay)
        .sign_with_keys(keys)
        .expect("auth event");
    nostr::JsonUtil::as_json(&nostr::ClientMessage::auth(event))
}

#[test]
fn restricted_reads_wait_for_an_accepted_auth() {
    use crate::relay::strict::{AuthAccepts, AuthRefusal, StrictAuth};
    let text = "auth-required: requested filter requires authentication";
    for (refusal, accepts) in [
        (AuthRefusal::Closed, AuthAccepts::Anyone),
        (AuthRefusal::Notice, AuthAccepts::Anyone),
        (AuthRefusal::NoticeThenClosed, AuthAccepts::Nobody),
    ] {
        let mut gate = Gate::new(Arc::new(StrictLimits {
            auth: Some(StrictAuth {
                refusal,
                accepts,
                ..StrictAuth::new(FilterPredicate::Kind(4))
            }),
            ..StrictLimits::default()
        }));
        let keys = nostr::Keys::generate();
        // Before any challenge, an AUTH names none the connection was sent.
        let early = answers(&mut gate, &auth_frame(&keys, "guess"));
        assert_eq!(early[0][2], json!(false), "{refusal:?}: {early:?}");
        assert!(answers(&mut gate, r#"["REQ","open",{"kinds":[1]}]"#).is_empty());
        // The first restricted request brings the challenge, once.
        let first = answers(&mut gate, r#"["REQ","dm",{"kinds":[4]}]"#);
        assert_eq!(first[0][0], json!("AUTH"), "{refusal:?}: {first:?}");
        let challenge = first[0][1].as_str().expect("challenge").to_owned();
        let expected: Vec<serde_json::Value> = match refusal {
            AuthRefusal::Closed => vec![json!(["CLOSED", "dm", text])],
            AuthRefusal::Notice => vec![json!(["NOTICE", text])],
            AuthRefusal::NoticeThenClosed => {
                vec![json!(["NOTICE", text]), json!(["CLOSED", "dm", text])]
            }
        };
        assert_eq!(first[1..], expected[..], "{refusal:?}");
        let neg = answers(&mut gate, r#"["NEG-OPEN","n",{"kinds":[4]},"6100"]"#);
        assert_eq!(neg, vec![json!(["NEG-ERR", "n", text])], "{refusal:?}");
        // A wrong challenge is refused; the right one is accepted unless nobody is.
        let wrong = answers(&mut gate, &auth_frame(&keys, "guess"));
        assert_eq!(wrong[0][2], json!(false), "{refusal:?}: {wrong:?}");
        let right = answers(&mut gate, &auth_frame(&keys, &challenge));
        let accepted = accepts == AuthAccepts::Anyone;
        assert_eq!(right[0][2], json!(accepted), "{refusal:?}: {right:?}");
        let again = answers(&mut gate, r#"["REQ","dm2",{"kinds":[4]}]"#);
        assert_eq!(again.is_empty(), accepted, "{refusal:?}: {again:?}");
    }
}
