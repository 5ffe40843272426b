//! The guard's rules, one at a time, on injected time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use grasp_sync_health::{RefusalCategory, classify};
use nostr::{
    ClientMessage, EventBuilder, Filter, JsonUtil, Keys, Kind, RelayMessage, Tag, Timestamp,
};

use super::{Guard, Verdict};
use crate::relay::limits::RelayLimits;

fn limits() -> RelayLimits {
    RelayLimits {
        max_subscriptions: 3,
        max_filters: 2,
        max_subid_length: 8,
        max_negentropy_sessions: 2,
        max_content_length: 10,
        max_event_tags: 2,
        query_burst: 100,
        queries_per_second: 10,
        ..RelayLimits::default()
    }
}

fn guard(limits: RelayLimits) -> (Guard, Instant) {
    let now = Instant::now();
    (Guard::new(Arc::new(limits), now), now)
}

/// The unix time of these tests.
const UNIX_NOW: u64 = 1_800_000_000;

impl Guard {
    fn handle_client_now(&mut self, text: &str, now: Instant) -> Verdict {
        self.handle_client(text, now, Timestamp::from_secs(UNIX_NOW))
    }
}

fn req(id: &str, filters: usize) -> String {
    ClientMessage::req(
        nostr::SubscriptionId::new(id),
        vec![Filter::new().kind(Kind::GitIssue); filters],
    )
    .as_json()
}

fn neg_open(id: &str) -> String {
    format!(r#"["NEG-OPEN","{id}",{{"kinds":[1621]}},"6100"]"#)
}

/// The relay message of an answer.
fn answer(verdict: &Verdict) -> RelayMessage<'static> {
    match verdict {
        Verdict::Answer(text) => RelayMessage::from_json(text).expect("a relay message"),
        other => panic!("expected an answer, got {other:?}"),
    }
}

/// The text of a CLOSED, NEG-ERR, OK or NOTICE answer.
fn refusal_text(verdict: &Verdict) -> String {
    match answer(verdict) {
        RelayMessage::Closed { message, .. }
        | RelayMessage::NegErr { message, .. }
        | RelayMessage::Ok { message, .. }
        | RelayMessage::Notice(message) => message.into_owned(),
        other => panic!("not a refusal: {other:?}"),
    }
}

#[test]
fn subscriptions_are_counted_per_connection_and_freed_by_close() {
    let (mut guard, now) = guard(limits());
    for id in ["a", "b", "c"] {
        assert_eq!(guard.handle_client_now(&req(id, 1), now), Verdict::Forward);
    }
    let refused = guard.handle_client_now(&req("d", 1), now);
    let text = refusal_text(&refused);
    assert!(
        text.starts_with("blocked: too many subscriptions"),
        "{text}"
    );
    assert_eq!(
        classify(&text).category,
        RefusalCategory::TooManySubscriptions
    );
    // Replacing an open subscription is not a new one.
    assert_eq!(guard.handle_client_now(&req("a", 1), now), Verdict::Forward);
    assert_eq!(
        guard.handle_client_now(
            &ClientMessage::close(nostr::SubscriptionId::new("a")).as_json(),
            now
        ),
        Verdict::Forward
    );
    assert_eq!(guard.handle_client_now(&req("d", 1), now), Verdict::Forward);
    guard.relay_closed(&nostr::SubscriptionId::new("b"));
    assert_eq!(guard.subscriptions(), 2);
    assert_eq!(guard.handle_client_now(&req("e", 1), now), Verdict::Forward);
}

#[test]
fn too_many_filters_are_closed_with_a_text_clients_classify() {
    let (mut guard, now) = guard(limits());
    assert_eq!(guard.handle_client_now(&req("a", 2), now), Verdict::Forward);
    let refused = guard.handle_client_now(&req("b", 3), now);
    let text = refusal_text(&refused);
    assert_eq!(text, "blocked: too many filters: at most 2 per request");
    assert_eq!(classify(&text).category, RefusalCategory::TooManyFilters);
    // A refused REQ opens nothing.
    assert_eq!(guard.subscriptions(), 1);
}

#[test]
fn a_long_subscription_id_is_invalid() {
    let (mut guard, now) = guard(limits());
    let refused = guard.handle_client_now(&req("123456789", 1), now);
    assert!(matches!(answer(&refused), RelayMessage::Closed { .. }));
    assert!(refusal_text(&refused).starts_with("invalid: subscription id is longer than 8"));
}

#[test]
fn queries_are_paced_by_a_token_bucket() {
    let (mut guard, start) = guard(RelayLimits {
        query_burst: 3,
        queries_per_second: 2,
        max_subscriptions: 100,
        ..RelayLimits::default()
    });
    for n in 0..3 {
        assert_eq!(
            guard.handle_client_now(&req(&n.to_string(), 1), start),
            Verdict::Forward
        );
    }
    let refused = guard.handle_client_now(&req("x", 1), start);
    let text = refusal_text(&refused);
    assert!(text.starts_with("rate-limited: too many queries"), "{text}");
    assert_eq!(classify(&text).category, RefusalCategory::RateLimited);
    // Half a second refills one token at 2 per second.
    let later = start + Duration::from_millis(500);
    assert_eq!(
        guard.handle_client_now(&req("y", 1), later),
        Verdict::Forward
    );
    assert!(matches!(
        answer(&guard.handle_client_now(&req("z", 1), later)),
        RelayMessage::Closed { .. }
    ));
    // COUNT and NEG-OPEN draw from the same budget.
    let count = r#"["COUNT","c",{"kinds":[1621]}]"#;
    assert!(matches!(
        answer(&guard.handle_client_now(count, later)),
        RelayMessage::Closed { .. }
    ));
    assert!(matches!(
        answer(&guard.handle_client_now(&neg_open("n"), later)),
        RelayMessage::NegErr { .. }
    ));
}

#[test]
fn negentropy_sessions_are_capped_and_freed() {
    let (mut guard, now) = guard(limits());
    for id in ["n1", "n2"] {
        assert!(matches!(
            guard.handle_client_now(&neg_open(id), now),
            Verdict::NegOpen { .. }
        ));
    }
    let refused = guard.handle_client_now(&neg_open("n3"), now);
    let text = refusal_text(&refused);
    assert!(
        text.starts_with("blocked: too many concurrent NEG requests"),
        "{text}"
    );
    assert_eq!(
        classify(&text).category,
        RefusalCategory::TooManyConcurrentNeg
    );
    // Re-opening an open session replaces it.
    assert!(matches!(
        guard.handle_client_now(&neg_open("n1"), now),
        Verdict::NegOpen { .. }
    ));
    assert_eq!(
        guard.handle_client_now(r#"["NEG-CLOSE","n1"]"#, now),
        Verdict::NegClose {
            id: nostr::SubscriptionId::new("n1")
        }
    );
    assert!(matches!(
        guard.handle_client_now(&neg_open("n3"), now),
        Verdict::NegOpen { .. }
    ));
    guard.negentropy_failed(&nostr::SubscriptionId::new("n2"));
    assert_eq!(guard.negentropy_sessions(), 1);
}

#[test]
fn a_message_for_an_unknown_negentropy_session_is_an_error() {
    let (mut guard, now) = guard(limits());
    let refused = guard.handle_client_now(r#"["NEG-MSG","nope","6100"]"#, now);
    assert!(matches!(answer(&refused), RelayMessage::NegErr { .. }));
    assert!(refusal_text(&refused).starts_with("closed:"));
}

#[test]
fn events_over_the_content_or_tag_limits_are_refused_with_ok_false() {
    let (mut guard, now) = guard(limits());
    let keys = Keys::generate();
    let long = EventBuilder::text_note("more than ten")
        .sign_with_keys(&keys)
        .expect("sign");
    let refused = guard.handle_client_now(&ClientMessage::event(long.clone()).as_json(), now);
    match answer(&refused) {
        RelayMessage::Ok {
            event_id,
            status,
            message,
        } => {
            assert_eq!(event_id, long.id);
            assert!(!status);
            assert!(
                message.starts_with("invalid: content is 13 characters"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let tagged = EventBuilder::text_note("short")
        .tags([Tag::hashtag("a"), Tag::hashtag("b"), Tag::hashtag("c")])
        .sign_with_keys(&keys)
        .expect("sign");
    let refused = guard.handle_client_now(&ClientMessage::event(tagged).as_json(), now);
    assert!(refusal_text(&refused).starts_with("invalid: 3 tags, more than 2"));
    let fine = EventBuilder::text_note("short")
        .sign_with_keys(&keys)
        .expect("sign");
    assert_eq!(
        guard.handle_client_now(&ClientMessage::event(fine).as_json(), now),
        Verdict::Forward
    );
}

#[test]
fn what_cannot_be_parsed_gets_a_notice_not_a_dropped_connection() {
    let (mut guard, now) = guard(limits());
    for text in ["not json", r#"["WHAT"]"#, r#"["REQ"]"#] {
        let verdict = guard.handle_client_now(text, now);
        assert!(
            matches!(answer(&verdict), RelayMessage::Notice(_)),
            "{text}"
        );
        assert!(refusal_text(&verdict).starts_with("invalid: cannot parse"));
    }
}

#[test]
fn an_event_past_the_created_at_window_is_invalid() {
    let (mut guard, now) = guard(limits());
    let window = limits().max_future_created_at.as_secs();
    let keys = Keys::generate();
    let at = |secs: u64| {
        EventBuilder::text_note("x")
            .custom_created_at(Timestamp::from_secs(secs))
            .sign_with_keys(&keys)
            .expect("sign")
    };
    let edge = at(UNIX_NOW + window);
    assert_eq!(
        guard.handle_client_now(&ClientMessage::event(edge).as_json(), now),
        Verdict::Forward
    );
    let past = at(UNIX_NOW + window + 1);
    let refused = guard.handle_client_now(&ClientMessage::event(past).as_json(), now);
    assert_eq!(
        refusal_text(&refused),
        format!("invalid: created_at is more than {window} s in the future")
    );
}
