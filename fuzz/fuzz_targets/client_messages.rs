//! The embedded relay's per-connection guard (`grasp_sync_bin::fuzzing::ConnectionGuard`) fed a
//! sequence of client messages, raw text or well-formed NIP-01/NIP-77 messages with fuzzed
//! fields, at fuzzed instants, under fuzzed small limits, with the relay closing subscriptions
//! and NIP-77 sessions failing in between.
//!
//! Asserts after every message: open subscriptions and NIP-77 sessions never exceed their caps
//! and equal what the relay has actually been sent (forwarded REQs minus CLOSEs and relay
//! CLOSEDs); every answer is a relay message of the kind NIP-01 pairs with the client's message,
//! naming the same subscription or event; every refusal of a REQ, COUNT, NEG-OPEN or EVENT is
//! classified by `grasp_sync_health::classify` as something other than `Unknown`; and no more
//! queries get through than the token bucket allows over the elapsed time.
#![no_main]

use std::collections::HashSet;
use std::time::Duration;

use arbitrary::Arbitrary;
use grasp_sync_bin::RelayLimits;
use grasp_sync_bin::fuzzing::{ConnectionGuard, Judgement};
use grasp_sync_health::{RefusalCategory, classify};
use libfuzzer_sys::fuzz_target;
use nostr::secp256k1::schnorr::Signature;
use nostr::{
    ClientMessage, Event, EventId, Filter, JsonUtil, Kind, PublicKey, RelayMessage, SubscriptionId,
    Tag, Timestamp,
};

/// The unix time when the connection opens.
const UNIX_START: u64 = 1_800_000_000;

#[derive(Debug, Arbitrary)]
struct Input {
    limits: Limits,
    steps: Vec<Step>,
}

#[derive(Debug, Arbitrary)]
struct Limits {
    max_subscriptions: u8,
    max_filters: u8,
    max_subid_length: u8,
    max_negentropy_sessions: u8,
    max_content_length: u8,
    max_event_tags: u8,
    queries_per_second: u8,
    query_burst: u8,
    max_future_created_at: u16,
}

impl Limits {
    fn relay_limits(&self) -> RelayLimits {
        RelayLimits {
            max_subscriptions: usize::from(self.max_subscriptions % 9),
            max_filters: usize::from(self.max_filters % 5),
            max_subid_length: usize::from(self.max_subid_length % 80),
            max_negentropy_sessions: usize::from(self.max_negentropy_sessions % 5),
            max_content_length: usize::from(self.max_content_length % 50),
            max_event_tags: usize::from(self.max_event_tags % 5),
            queries_per_second: u32::from(self.queries_per_second % 20),
            query_burst: u32::from(self.query_burst % 20),
            max_future_created_at: Duration::from_secs(u64::from(self.max_future_created_at)),
            ..RelayLimits::default()
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Step {
    /// Milliseconds since the previous step.
    delay_ms: u16,
    action: Action,
}

#[derive(Debug, Arbitrary)]
enum Action {
    /// Any text from the client.
    Raw(String),
    Req {
        id: SubId,
        filters: u8,
    },
    Count(SubId),
    Close(SubId),
    Event {
        content: String,
        tags: u8,
        ahead_secs: i32,
    },
    NegOpen {
        id: SubId,
        initial: String,
    },
    NegMsg {
        id: SubId,
        message: String,
    },
    NegClose(SubId),
    Auth,
    /// The relay closes a subscription itself.
    RelayClosed(SubId),
    /// A NIP-77 session ends with an error sent to the client.
    NegFailed(SubId),
}

#[derive(Debug, Arbitrary)]
enum SubId {
    /// One of a few short ids, so that replacements and closes hit open subscriptions.
    Short(u8),
    Any(String),
}

impl SubId {
    fn text(&self) -> String {
        match self {
            SubId::Short(n) => format!("s{}", n % 10),
            SubId::Any(text) if text.is_empty() => "x".to_owned(),
            SubId::Any(text) => text.clone(),
        }
    }
}

fn sub(id: &SubId) -> SubscriptionId {
    SubscriptionId::new(id.text())
}

fn filters(n: u8) -> Vec<Filter> {
    vec![Filter::new().kind(Kind::GitIssue); usize::from(n % 8)]
}

fn event(content: &str, tags: u8, created_at: u64) -> Event {
    let tags = (0..tags % 8).map(|n| Tag::parse(["t", &n.to_string()]).expect("a tag"));
    Event::new(
        EventId::from_byte_array([3; 32]),
        PublicKey::from_byte_array([5; 32]),
        Timestamp::from_secs(created_at),
        Kind::GitIssue,
        tags,
        content,
        Signature::from_slice(&[9; 64]).expect("64 bytes are a signature"),
    )
}

/// The guard's counts, as the relay behind it sees them.
#[derive(Default)]
struct Upstream {
    subscriptions: HashSet<String>,
    negentropy: HashSet<String>,
    queries_through: u64,
}

fuzz_target!(|input: Input| {
    let limits = input.limits.relay_limits();
    let mut guard = ConnectionGuard::new(limits.clone());
    let mut upstream = Upstream::default();
    let mut elapsed = Duration::ZERO;
    for step in input.steps.iter().take(64) {
        elapsed += Duration::from_millis(u64::from(step.delay_ms));
        let unix_now = UNIX_START + elapsed.as_secs();
        let text = match &step.action {
            Action::Raw(text) => text.clone(),
            Action::Req { id, filters: n } => ClientMessage::req(sub(id), filters(*n)).as_json(),
            Action::Count(id) => {
                ClientMessage::count(sub(id), Filter::new().kind(Kind::GitIssue)).as_json()
            }
            Action::Close(id) => ClientMessage::close(sub(id)).as_json(),
            Action::Event {
                content,
                tags,
                ahead_secs,
            } => {
                let created_at = unix_now.saturating_add_signed(i64::from(*ahead_secs));
                ClientMessage::event(event(content, *tags, created_at)).as_json()
            }
            Action::NegOpen { id, initial } => serde_json::json!([
                "NEG-OPEN",
                id.text(),
                {"kinds": [1621]},
                initial
            ])
            .to_string(),
            Action::NegMsg { id, message } => {
                serde_json::json!(["NEG-MSG", id.text(), message]).to_string()
            }
            Action::NegClose(id) => serde_json::json!(["NEG-CLOSE", id.text()]).to_string(),
            Action::Auth => ClientMessage::auth(event("", 0, unix_now)).as_json(),
            Action::RelayClosed(id) => {
                guard.relay_closed(&id.text());
                upstream.subscriptions.remove(&id.text());
                check_counts(&guard, &upstream, &limits);
                continue;
            }
            Action::NegFailed(id) => {
                guard.negentropy_failed(&id.text());
                upstream.negentropy.remove(&id.text());
                check_counts(&guard, &upstream, &limits);
                continue;
            }
        };
        let judgement = guard.handle_client(&text, elapsed, Timestamp::from_secs(unix_now));
        check_judgement(&text, &judgement, &mut upstream);
        check_counts(&guard, &upstream, &limits);

        let capacity = f64::from(limits.query_burst.max(1));
        let refilled = elapsed.as_secs_f64() * f64::from(limits.queries_per_second);
        assert!(
            upstream.queries_through as f64 <= capacity + refilled + 1e-6,
            "{} queries through in {elapsed:?}",
            upstream.queries_through
        );
    }
});

fn check_counts(guard: &ConnectionGuard, upstream: &Upstream, limits: &RelayLimits) {
    assert!(guard.subscriptions() <= limits.max_subscriptions);
    assert!(guard.negentropy_sessions() <= limits.max_negentropy_sessions);
    assert_eq!(guard.subscriptions(), upstream.subscriptions.len());
    assert_eq!(guard.negentropy_sessions(), upstream.negentropy.len());
}

/// Checks that `judgement` is NIP-01's answer to `text`, and notes what reached the relay.
fn check_judgement(text: &str, judgement: &Judgement, upstream: &mut Upstream) {
    let answer = match judgement {
        Judgement::Answer(answer) => Some(
            RelayMessage::from_json(answer)
                .unwrap_or_else(|e| panic!("answer {answer:?} is not a relay message: {e}")),
        ),
        _ => None,
    };
    let Ok(message) = ClientMessage::from_json(text) else {
        assert!(
            matches!(answer, Some(RelayMessage::Notice(_))),
            "unparsable {text:?} got {judgement:?}"
        );
        return;
    };
    match (message, judgement, answer) {
        (ClientMessage::Event(event), Judgement::Answer(_), Some(answer)) => {
            let RelayMessage::Ok {
                event_id,
                status,
                message,
            } = answer
            else {
                panic!("an EVENT got {judgement:?}");
            };
            assert_eq!(event_id, event.id);
            assert!(!status);
            assert_refusal(&message);
        }
        (ClientMessage::Event(_), Judgement::Forward, None) => {}
        (
            ClientMessage::Req {
                subscription_id, ..
            },
            Judgement::Forward,
            None,
        ) => {
            upstream.subscriptions.insert(subscription_id.to_string());
            upstream.queries_through += 1;
        }
        (ClientMessage::Count { .. }, Judgement::Forward, None) => {
            upstream.queries_through += 1;
        }
        (
            ClientMessage::Req {
                subscription_id, ..
            }
            | ClientMessage::Count {
                subscription_id, ..
            },
            Judgement::Answer(_),
            Some(RelayMessage::Closed {
                subscription_id: closed,
                message,
            }),
        ) => {
            assert_eq!(closed, subscription_id);
            assert_refusal(&message);
        }
        (ClientMessage::Close(id), Judgement::Forward, None) => {
            upstream.subscriptions.remove(id.as_str());
        }
        (ClientMessage::Auth(_), Judgement::Forward, None) => {}
        (
            ClientMessage::NegOpen {
                subscription_id, ..
            },
            Judgement::NegOpen { id, .. },
            None,
        ) => {
            assert_eq!(id, subscription_id.as_str());
            upstream.negentropy.insert(id.clone());
            upstream.queries_through += 1;
        }
        (
            ClientMessage::NegOpen {
                subscription_id, ..
            },
            Judgement::Answer(_),
            Some(RelayMessage::NegErr {
                subscription_id: refused,
                message,
            }),
        ) => {
            assert_eq!(refused, subscription_id);
            assert_refusal(&message);
            upstream.negentropy.remove(subscription_id.as_str());
        }
        (
            ClientMessage::NegMsg {
                subscription_id, ..
            },
            Judgement::NegMsg { id, .. },
            None,
        ) => {
            assert_eq!(id, subscription_id.as_str());
            assert!(upstream.negentropy.contains(id));
        }
        (
            ClientMessage::NegMsg {
                subscription_id, ..
            },
            Judgement::Answer(_),
            Some(RelayMessage::NegErr {
                subscription_id: refused,
                ..
            }),
        ) => {
            assert_eq!(refused, subscription_id);
            assert!(!upstream.negentropy.contains(subscription_id.as_str()));
        }
        (ClientMessage::NegClose { subscription_id }, Judgement::NegClose { id }, None) => {
            assert_eq!(id, subscription_id.as_str());
            upstream.negentropy.remove(id);
        }
        (message, judgement, _) => panic!("{message:?} got {judgement:?}"),
    }
}

/// A refusal a client that classifies refusals recognises.
fn assert_refusal(message: &str) {
    let category = classify(message).category;
    assert_ne!(
        category,
        RefusalCategory::Unknown,
        "unrecognised refusal {message:?}"
    );
}
