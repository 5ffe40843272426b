//! The round against a relay played in-process: a negentropy server answers each frame the
//! round sends, straight into the round's route, and the test decides when the answers stop.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostr::{ClientMessage, EventId, Filter, JsonUtil, RelayMessage, SubscriptionId, Timestamp};
use tokio::sync::mpsc;

use super::drive;
use crate::transport::negentropy::{NegentropyError, RoundLimits};
use crate::transport::sdk::routes::{ROUTE_CAPACITY, RouteEnd};

/// An ID and its `created_at`, as a round's "have" set holds them.
type Item = (EventId, Timestamp);

fn id(n: u8) -> EventId {
    EventId::from_byte_array([n; 32])
}

/// Items `range` as (ID, created_at) pairs, one second apart.
fn items(range: std::ops::Range<u8>) -> Vec<(EventId, Timestamp)> {
    range
        .map(|n| (id(n), Timestamp::from(1_700_000_000 + u64::from(n))))
        .collect()
}

/// How the played relay's answers stop.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// They never stop.
    Never,
    /// The route is dropped after this many answers while the session stays up.
    Lost(usize),
    /// The session ends after this many answers.
    Ended(usize),
}

/// The relay: holds `held`, answers each NEG-OPEN and NEG-MSG into the round's route until
/// `cut`, and records every frame the round sent.
struct PlayedRelay {
    server: Negentropy<'static, NegentropyStorageVector>,
    route: Option<mpsc::Sender<RelayMessage<'static>>>,
    cut: Cut,
    ended: bool,
    answers: usize,
    frames: Arc<Mutex<Vec<String>>>,
}

impl PlayedRelay {
    fn new(held: &[(EventId, Timestamp)], cut: Cut) -> Self {
        let mut storage = NegentropyStorageVector::with_capacity(held.len());
        for (id, created_at) in held {
            storage
                .insert(created_at.as_secs(), Id::from_byte_array(id.to_bytes()))
                .expect("insert");
        }
        storage.seal().expect("seal");
        Self {
            server: Negentropy::owned(storage, 0).expect("server"),
            route: None,
            cut,
            ended: false,
            answers: 0,
            frames: Arc::default(),
        }
    }

    /// What the relay does with one frame of the round.
    fn receive(&mut self, frame: String) {
        self.frames.lock().expect("frames").push(frame.clone());
        let (subscription_id, query) = match ClientMessage::from_json(&frame).expect("frame") {
            ClientMessage::NegOpen {
                subscription_id,
                initial_message,
                ..
            } => (subscription_id.into_owned(), initial_message.into_owned()),
            ClientMessage::NegMsg {
                subscription_id,
                message,
            } => (subscription_id.into_owned(), message.into_owned()),
            _ => return,
        };
        match self.cut {
            Cut::Lost(after) if self.answers == after => self.route = None,
            Cut::Ended(after) if self.answers == after => {
                self.route = None;
                self.ended = true;
            }
            _ => {}
        }
        let answer = self
            .server
            .reconcile(&hex::decode(query).expect("hex"))
            .expect("reconcile");
        if let Some(route) = &self.route {
            route
                .try_send(RelayMessage::NegMsg {
                    subscription_id: std::borrow::Cow::Owned(subscription_id),
                    message: std::borrow::Cow::Owned(hex::encode(answer)),
                })
                .expect("room in the route");
        }
        self.answers += 1;
    }

    /// The verbs of the frames the round sent, in order.
    fn verbs(&self) -> Vec<String> {
        self.frames
            .lock()
            .expect("frames")
            .iter()
            .map(|frame| {
                let value: serde_json::Value = serde_json::from_str(frame).expect("json");
                value[0].as_str().expect("verb").to_owned()
            })
            .collect()
    }
}

/// Runs one round with `have` against `relay`.
async fn round(
    relay: PlayedRelay,
    have: Vec<(EventId, Timestamp)>,
) -> (Result<super::NegentropyDiff, NegentropyError>, Vec<String>) {
    round_taking(relay, have, crate::transport::negentropy::MAX_MISSING_IDS).await
}

/// Like [`round`], taking at most `max_missing` IDs as missing.
async fn round_taking(
    mut relay: PlayedRelay,
    have: Vec<(EventId, Timestamp)>,
    max_missing: usize,
) -> (Result<super::NegentropyDiff, NegentropyError>, Vec<String>) {
    let (tx, answers) = mpsc::channel(ROUTE_CAPACITY);
    relay.route = Some(tx);
    let relay = Mutex::new(relay);
    let send = |message: ClientMessage<'_>| {
        relay.lock().expect("relay").receive(message.as_json());
        Ok(())
    };
    let end_of = || {
        if relay.lock().expect("relay").ended {
            RouteEnd::SessionEnded
        } else {
            RouteEnd::AnswersLost
        }
    };
    let bounds = super::Bounds {
        limits: RoundLimits::within(Duration::from_secs(15)),
        max_missing,
    };
    let id = SubscriptionId::new("round");
    let result = drive(id, Filter::new(), have, bounds, answers, end_of, send).await;
    let verbs = relay.lock().expect("relay").verbs();
    (result, verbs)
}

fn assert_lost(result: Result<super::NegentropyDiff, NegentropyError>) {
    match result {
        Err(NegentropyError::Protocol(text)) => assert!(text.contains("lost"), "{text}"),
        other => panic!("expected a failed round, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_round_returns_the_exact_diff_and_closes_its_session() {
    let relay = PlayedRelay::new(&items(0..60), Cut::Never);
    let (result, verbs) = round(relay, items(40..100)).await;
    let diff = result.expect("diff");
    let expected: Vec<EventId> = items(0..40).into_iter().map(|(id, _)| id).collect();
    assert_eq!(diff.missing, expected);
    assert_eq!(diff.relay_lacks.len(), 40);
    assert_eq!(verbs.first().map(String::as_str), Some("NEG-OPEN"));
    assert_eq!(verbs.last().map(String::as_str), Some("NEG-CLOSE"));
}

#[tokio::test(start_paused = true)]
async fn a_round_whose_first_answer_is_lost_fails_and_closes() {
    let relay = PlayedRelay::new(&items(0..60), Cut::Lost(0));
    let (result, verbs) = round(relay, items(40..100)).await;
    assert_lost(result);
    // The relay answered, though the round never saw it: its session is closed.
    assert_eq!(verbs, ["NEG-OPEN", "NEG-CLOSE"]);
}

/// 6,000 items the relay holds and the two thirds of them the round has: enough that the
/// reconciliation takes several exchanges.
fn large_sets() -> (Vec<Item>, Vec<Item>) {
    let held: Vec<Item> = (0..6_000u32)
        .map(|n| {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&n.to_be_bytes());
            (
                EventId::from_byte_array(bytes),
                Timestamp::from(1_700_000_000 + u64::from(n)),
            )
        })
        .collect();
    let have = held
        .iter()
        .copied()
        .filter(|(id, _)| id.as_bytes()[3] % 3 != 0)
        .collect();
    (held, have)
}

#[tokio::test(start_paused = true)]
async fn a_diff_spanning_several_exchanges_is_complete() {
    let (held, have) = large_sets();
    let relay = PlayedRelay::new(&held, Cut::Never);
    let (result, verbs) = round(relay, have.clone()).await;
    let diff = result.expect("diff");
    let have: BTreeSet<EventId> = have.into_iter().map(|(id, _)| id).collect();
    let expected: Vec<EventId> = held
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !have.contains(id))
        .collect();
    assert_eq!(diff.missing, expected);
    assert!(diff.relay_lacks.is_empty());
    let exchanges = verbs.iter().filter(|verb| *verb == "NEG-MSG").count();
    assert!(exchanges >= 2, "{verbs:?}");
}

#[tokio::test(start_paused = true)]
async fn answers_lost_mid_round_fail_it_instead_of_passing_a_partial_diff() {
    let (held, have) = large_sets();
    let relay = PlayedRelay::new(&held, Cut::Lost(1));
    let (result, verbs) = round(relay, have).await;
    assert_lost(result);
    // The relay answered once: its session is closed.
    assert_eq!(
        verbs.last().map(String::as_str),
        Some("NEG-CLOSE"),
        "{verbs:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_session_ending_mid_round_is_not_connected() {
    let (held, have) = large_sets();
    let relay = PlayedRelay::new(&held, Cut::Ended(1));
    let (result, _) = round(relay, have).await;
    assert_eq!(result, Err(NegentropyError::NotConnected));
}

#[tokio::test(start_paused = true)]
async fn a_relay_naming_more_missing_ids_than_the_bound_fails_the_round() {
    let (held, _) = large_sets();
    let relay = PlayedRelay::new(&held, Cut::Never);
    let (result, verbs) = round_taking(relay, Vec::new(), 1_000).await;
    match result {
        Err(NegentropyError::TooManyMissing(limit)) => assert_eq!(limit, 1_000),
        other => panic!("expected a failed round, got {other:?}"),
    }
    assert_eq!(
        verbs.last().map(String::as_str),
        Some("NEG-CLOSE"),
        "{verbs:?}"
    );
    // Within the bound, the same relay's diff is whole.
    let relay = PlayedRelay::new(&held, Cut::Never);
    let (result, _) = round_taking(relay, Vec::new(), held.len()).await;
    assert_eq!(result.expect("diff").missing.len(), held.len());
}
