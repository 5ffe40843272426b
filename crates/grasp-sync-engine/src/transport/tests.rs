//! Tests of the negentropy dry-run diff: against a real relay for the result, and against a
//! scripted WebSocket relay for every way a round can fail.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Event, EventBuilder, EventId, Filter, Keys, Kind, SubscriptionId, Timestamp};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use super::{
    NegentropyDiff, NegentropyError, RelayConnection, RelayConnector, RelayInbound, RelaySession,
    RoundLimits, SdkConnector,
};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn keys() -> Keys {
    Keys::parse("6b911fd37cdf5c81d4c0adb1ab7fa822ed253ab0ad9aa18d77257c88b29b718e")
        .expect("fixed key")
}

/// `count` text notes by one author, one second apart.
fn notes(keys: &Keys, count: u64) -> Vec<Event> {
    (0..count)
        .map(|i| {
            EventBuilder::text_note(format!("note {i}"))
                .custom_created_at(Timestamp::from(1_700_000_000 + i))
                .sign_with_keys(keys)
                .expect("sign")
        })
        .collect()
}

fn have_of(events: &[Event]) -> Vec<(EventId, Timestamp)> {
    events.iter().map(|e| (e.id, e.created_at)).collect()
}

async fn connect(url: &str) -> RelayConnection {
    connect_with(url, super::sdk::SdkConnectorOptions::default()).await
}

async fn connect_with(url: &str, options: super::sdk::SdkConnectorOptions) -> RelayConnection {
    let url = RelayUrl::parse(url).expect("relay url");
    SdkConnector::new(options)
        .with_address_policy(crate::AddressPolicy::allow_all())
        .connect(&url, CONNECT_TIMEOUT)
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_returns_exactly_the_ids_the_relay_holds_and_have_lacks() {
    let keys = keys();
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    let matching = notes(&keys, 5_000);
    // Events outside the filter must not show up in the diff.
    let other: Vec<Event> = (0..50)
        .map(|i| {
            EventBuilder::new(Kind::Custom(1621), format!("issue {i}"))
                .custom_created_at(Timestamp::from(1_700_000_000 + i))
                .sign_with_keys(&keys)
                .expect("sign")
        })
        .collect();
    relay.seed(matching.clone()).await.expect("seed");
    relay.seed(other).await.expect("seed");
    // We hold 4,000 of the 5,000, plus 7 IDs the relay never had.
    let mut have = have_of(&matching[..4_000]);
    let foreign = notes(&Keys::generate(), 7);
    have.extend(have_of(&foreign));
    let lacking: BTreeSet<EventId> = foreign.iter().map(|e| e.id).collect();
    let expected: Vec<EventId> = {
        let set: BTreeSet<EventId> = matching[4_000..].iter().map(|e| e.id).collect();
        set.into_iter().collect()
    };

    let connection = connect(&relay.url()).await;
    let filter = Filter::new().kind(Kind::TextNote).author(keys.public_key());
    let diff = connection
        .session
        .negentropy_diff(filter, have, RoundLimits::within(Duration::from_secs(15)))
        .await
        .expect("diff");

    assert_eq!(
        diff,
        NegentropyDiff {
            missing: expected,
            relay_lacks: lacking.into_iter().collect(),
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_is_answered_while_the_engine_reads_nothing() {
    let keys = keys();
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    let events = notes(&keys, 200);
    relay.seed(events.clone()).await.expect("seed");
    // An inbound channel of one message, which this test never reads.
    let options = super::sdk::SdkConnectorOptions {
        inbound_capacity: 1,
        ..super::sdk::SdkConnectorOptions::default()
    };
    let connection = connect_with(&relay.url(), options).await;
    // A REQ whose events fill it: the session's reader waits for the engine from here on.
    connection
        .session
        .subscribe(
            SubscriptionId::new("fill"),
            vec![Filter::new().kind(Kind::TextNote)],
        )
        .await
        .expect("req");
    let diff = connection
        .session
        .negentropy_diff(
            Filter::new().kind(Kind::TextNote),
            have_of(&events[..150]),
            RoundLimits::within(Duration::from_secs(15)),
        )
        .await
        .expect("diff");
    let expected: BTreeSet<EventId> = events[150..].iter().map(|e| e.id).collect();
    assert_eq!(diff.missing, expected.into_iter().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_is_a_dry_run_that_downloads_nothing() {
    let keys = keys();
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    let events = notes(&keys, 300);
    relay.seed(events.clone()).await.expect("seed");
    let RelayConnection {
        session,
        mut inbound,
    } = connect(&relay.url()).await;

    let filter = Filter::new().kind(Kind::TextNote).author(keys.public_key());
    let diff = session
        .negentropy_diff(
            filter,
            have_of(&events[..100]),
            RoundLimits::within(Duration::from_secs(15)),
        )
        .await
        .expect("diff");
    assert_eq!(diff.missing.len(), 200);

    // The relay answers one connection in order: had the round sent a download REQ, its events
    // would arrive before the EOSE of a marker REQ sent after the round.
    let marker = SubscriptionId::new("marker");
    session
        .subscribe(
            marker.clone(),
            vec![Filter::new().kind(Kind::Custom(9)).limit(0)],
        )
        .await
        .expect("marker req");
    let delivered = events_before_eose(&mut inbound, &marker).await;
    assert_eq!(delivered, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_rounds_on_one_session_each_get_their_own_diff() {
    let keys = keys();
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    let notes = notes(&keys, 400);
    let issues: Vec<Event> = (0..300)
        .map(|i| {
            EventBuilder::new(Kind::Custom(1621), format!("issue {i}"))
                .custom_created_at(Timestamp::from(1_700_000_000 + i))
                .sign_with_keys(&keys)
                .expect("sign")
        })
        .collect();
    relay.seed(notes.clone()).await.expect("seed");
    relay.seed(issues.clone()).await.expect("seed");
    let connection = connect(&relay.url()).await;
    let session = &connection.session;
    let deadline = RoundLimits::within(Duration::from_secs(15));

    let (first, second, third) = tokio::join!(
        session.negentropy_diff(
            Filter::new().kind(Kind::TextNote),
            have_of(&notes[..100]),
            deadline,
        ),
        session.negentropy_diff(
            Filter::new().kind(Kind::Custom(1621)),
            have_of(&issues[..250]),
            deadline,
        ),
        session.negentropy_diff(
            Filter::new().kind(Kind::TextNote),
            have_of(&notes),
            deadline,
        ),
    );
    assert_eq!(first.expect("notes").missing.len(), 300);
    assert_eq!(second.expect("issues").missing.len(), 50);
    assert_eq!(third.expect("all notes").missing, Vec::<EventId>::new());
}

/// The session's pool tracks one event ID (`transport/sdk.rs`): an event delivered again on
/// another subscription must still reach the engine every time, since each delivery counts for
/// its own subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_delivered_again_reaches_the_session_every_time() {
    let keys = keys();
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    // One event, so each round's delivery is the one the tracker saw last.
    relay.seed(notes(&keys, 1)).await.expect("seed");
    let RelayConnection {
        session,
        mut inbound,
    } = connect(&relay.url()).await;
    let the_note = || vec![Filter::new().kind(Kind::TextNote).author(keys.public_key())];
    for round in ["first", "second", "third"] {
        let id = SubscriptionId::new(round);
        session
            .subscribe(id.clone(), the_note())
            .await
            .expect("req");
        assert_eq!(events_before_eose(&mut inbound, &id).await, 1, "{round}");
    }
}

/// Counts events arriving before `marker`'s EOSE.
async fn events_before_eose(
    inbound: &mut mpsc::Receiver<RelayInbound>,
    marker: &SubscriptionId,
) -> usize {
    let mut events = 0;
    let wait = async {
        while let Some(message) = inbound.recv().await {
            match message {
                RelayInbound::Event { .. } => events += 1,
                RelayInbound::Eose(id) if &id == marker => return true,
                _ => {}
            }
        }
        false
    };
    let reached = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("marker eose in time");
    assert!(reached, "inbound ended before the marker's eose");
    events
}

/// How the scripted relay answers a NEG-OPEN.
#[derive(Debug, Clone)]
enum Script {
    /// Never answers.
    Silent,
    /// Drops the connection.
    Hangup,
    /// Answers with one frame (`{sub}` is replaced by the NEG-OPEN's subscription ID), then
    /// ignores everything.
    Reply(&'static str),
}

/// A WebSocket relay on loopback that answers NEG-OPEN as scripted and nothing else.
struct ScriptedRelay {
    url: String,
    /// Every text frame received from clients, in order.
    frames: Arc<Mutex<Vec<String>>>,
    /// Signalled on every received frame.
    received: Arc<Notify>,
    task: JoinHandle<()>,
}

impl ScriptedRelay {
    async fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("ws://{}", listener.local_addr().expect("addr"));
        let frames = Arc::new(Mutex::new(Vec::new()));
        let received = Arc::new(Notify::new());
        let (log, notify) = (Arc::clone(&frames), Arc::clone(&received));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = script.clone();
                let (log, notify) = (Arc::clone(&log), Arc::clone(&notify));
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    while let Some(Ok(message)) = ws.next().await {
                        let Message::Text(text) = message else {
                            continue;
                        };
                        log.lock()
                            .expect("frame log")
                            .push(text.as_str().to_owned());
                        notify.notify_waiters();
                        let Some(subscription) = neg_open_subscription(text.as_str()) else {
                            continue;
                        };
                        if let Script::Hangup = script {
                            return;
                        }
                        if let Script::Reply(frame) = &script {
                            let frame = frame.replace("{sub}", &subscription);
                            if ws.send(Message::text(frame)).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        Self {
            url,
            frames,
            received,
            task,
        }
    }

    /// Frames received so far whose verb is `verb`.
    fn frames_with_verb(&self, verb: &str) -> Vec<serde_json::Value> {
        let frames = self.frames.lock().expect("frame log");
        frames
            .iter()
            .filter_map(|f| serde_json::from_str::<serde_json::Value>(f).ok())
            .filter(|v| v.get(0).and_then(|v| v.as_str()) == Some(verb))
            .collect()
    }

    /// Waits (up to ten seconds) until a frame with `verb` arrived; returns those frames.
    async fn wait_for_verb(&self, verb: &str) -> Vec<serde_json::Value> {
        let wait = async {
            loop {
                let notified = self.received.notified();
                let found = self.frames_with_verb(verb);
                if !found.is_empty() {
                    return found;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("frame arrives in time")
    }
}

impl Drop for ScriptedRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The subscription ID of a NEG-OPEN frame, if `text` is one.
fn neg_open_subscription(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let array = value.as_array()?;
    if array.first()?.as_str()? != "NEG-OPEN" {
        return None;
    }
    Some(array.get(1)?.as_str()?.to_owned())
}

/// Runs one diff against a scripted relay with `deadline`, checks the error, and returns the
/// relay for further checks.
async fn check(script: Script, deadline: Duration, expected: NegentropyError) -> ScriptedRelay {
    check_keeping_session(script, RoundLimits::within(deadline), expected)
        .await
        .0
}

/// Like [`check`], but hands back the session too, so a test can keep it open (dropping it
/// disconnects, which could cut off a NEG-CLOSE that was queued but not yet written), and
/// takes the round's limits. Returns the round's duration too.
async fn check_keeping_session(
    script: Script,
    limits: RoundLimits,
    expected: NegentropyError,
) -> (ScriptedRelay, super::RelayConnection, Duration) {
    let relay = ScriptedRelay::start(script).await;
    let connection = connect(&relay.url).await;
    let keys = keys();
    let have = have_of(&notes(&keys, 40));
    let started = tokio::time::Instant::now();
    let result = connection
        .session
        .negentropy_diff(Filter::new().kind(Kind::TextNote), have, limits)
        .await;
    let elapsed = started.elapsed();
    assert_eq!(result, Err(expected));
    // Whatever the relay does, the round ends by its deadline (with scheduling slack).
    assert!(
        elapsed < limits.deadline + Duration::from_secs(2),
        "round took {elapsed:?}"
    );
    (relay, connection, elapsed)
}

/// A probe's limits with a long deadline, so only the first-answer deadline can end it early.
fn probe(first_answer: Duration) -> RoundLimits {
    RoundLimits {
        first_answer,
        deadline: Duration::from_secs(30),
        probe: true,
        max_missing: super::negentropy::MAX_MISSING_IDS,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_that_never_answers_ends_the_round_unanswered_by_the_deadline() {
    check(
        Script::Silent,
        Duration::from_millis(500),
        NegentropyError::NoAnswer,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_probe_ends_at_its_first_answer_deadline() {
    let (relay, _session, elapsed) = check_keeping_session(
        Script::Silent,
        probe(Duration::from_millis(500)),
        NegentropyError::NoAnswer,
    )
    .await;
    assert!(elapsed < Duration::from_secs(5), "probe took {elapsed:?}");
    assert_eq!(relay.frames_with_verb("NEG-OPEN").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_that_names_no_verb_ends_a_probe_as_unsupported() {
    // nostr-rs-relay's answer to any verb it does not know.
    let (_relay, _session, elapsed) = check_keeping_session(
        Script::Reply(r#"["NOTICE","could not parse command"]"#),
        probe(Duration::from_secs(20)),
        NegentropyError::Unsupported,
    )
    .await;
    assert!(elapsed < Duration::from_secs(10), "probe took {elapsed:?}");
    // Outside a probe the same NOTICE could be about anything: the round waits for its answer.
    check(
        Script::Reply(r#"["NOTICE","could not parse command"]"#),
        Duration::from_millis(500),
        NegentropyError::NoAnswer,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_that_stalls_mid_exchange_times_out_by_the_deadline() {
    // A valid first answer: one range up to infinity with a fingerprint that cannot match, so
    // the client answers and then waits for a reply that never comes.
    let (relay, _session, _) = check_keeping_session(
        Script::Reply(r#"["NEG-MSG","{sub}","61000001ffffffffffffffffffffffffffffffff"]"#),
        // Long enough that a loaded machine still reads the relay's answer (and learns the
        // round's ID) before the deadline, which is what makes NEG-CLOSE possible.
        RoundLimits::within(Duration::from_secs(3)),
        NegentropyError::Timeout,
    )
    .await;
    // The relay had answered when the round ended, so it is told to free the round: NEG-CLOSE
    // for the ID it opened.
    assert!(!relay.frames_with_verb("NEG-MSG").is_empty());
    let opened = relay.frames_with_verb("NEG-OPEN")[0][1].clone();
    let closed = relay.wait_for_verb("NEG-CLOSE").await;
    assert_eq!(closed[0][1], opened);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_answer_to_neg_open_ends_the_round_at_once() {
    // A CLOSED for the round's ID ends it at once, not at the 30 s deadline.
    check(
        Script::Reply(r#"["CLOSED","{sub}","rate-limited: too many queries"]"#),
        Duration::from_secs(30),
        NegentropyError::RateLimited("rate-limited: too many queries".to_owned()),
    )
    .await;
    check(
        Script::Reply(r#"["CLOSED","{sub}","error: unknown cmd"]"#),
        Duration::from_secs(30),
        NegentropyError::Unsupported,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_for_an_open_engine_subscription_does_not_end_a_round() {
    // An engine REQ whose ID looks like a generated one, closed by the relay mid-round.
    const REQ: &str = "0123456789abcdef0123456789abcdef";
    let relay = ScriptedRelay::start(Script::Reply(
        r#"["CLOSED","0123456789abcdef0123456789abcdef","blocked: not this one"]"#,
    ))
    .await;
    let connection = connect(&relay.url).await;
    connection
        .session
        .subscribe(SubscriptionId::new(REQ), vec![Filter::new().limit(0)])
        .await
        .expect("req");
    let result = connection
        .session
        .negentropy_diff(
            Filter::new().kind(Kind::TextNote),
            Vec::new(),
            RoundLimits::within(Duration::from_millis(500)),
        )
        .await;
    assert_eq!(result, Err(NegentropyError::NoAnswer));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notice_unknown_cmd_is_unsupported() {
    check(
        Script::Reply(r#"["NOTICE","unknown cmd"]"#),
        Duration::from_secs(5),
        NegentropyError::Unsupported,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notice_bad_msg_unknown_cmd_is_unsupported() {
    check(
        Script::Reply(r#"["NOTICE","ERROR: bad msg: unknown cmd"]"#),
        Duration::from_secs(5),
        NegentropyError::Unsupported,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neg_err_query_rate_is_rate_limited() {
    check(
        Script::Reply(r#"["NEG-ERR","{sub}","rate-limited: too many queries"]"#),
        Duration::from_secs(5),
        NegentropyError::RateLimited("rate-limited: too many queries".to_owned()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notice_query_rate_during_round_is_rate_limited() {
    check(
        Script::Reply(r#"["NOTICE","rate-limited: too many queries"]"#),
        Duration::from_secs(5),
        NegentropyError::RateLimited("rate-limited: too many queries".to_owned()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neg_err_other_reason_is_refused() {
    check(
        Script::Reply(r#"["NEG-ERR","{sub}","blocked: not for you"]"#),
        Duration::from_secs(5),
        NegentropyError::Refused("blocked: not for you".to_owned()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neg_err_unsupported_is_unsupported() {
    check(
        Script::Reply(r#"["NEG-ERR","{sub}","error: negentropy unsupported"]"#),
        Duration::from_secs(5),
        NegentropyError::Unsupported,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_answer_is_a_protocol_failure() {
    let relay = ScriptedRelay::start(Script::Reply(r#"["NEG-MSG","{sub}","zz"]"#)).await;
    let connection = connect(&relay.url).await;
    let result = connection
        .session
        .negentropy_diff(
            Filter::new().kind(Kind::TextNote),
            Vec::new(),
            RoundLimits::within(Duration::from_secs(5)),
        )
        .await;
    assert!(
        matches!(result, Err(NegentropyError::Protocol(_))),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_on_a_disconnected_session_is_not_connected() {
    let relay = ScriptedRelay::start(Script::Silent).await;
    let connection = connect(&relay.url).await;
    let session: Arc<dyn RelaySession> = connection.session;
    session.disconnect().await;
    let result = session
        .negentropy_diff(
            Filter::new().kind(Kind::TextNote),
            Vec::new(),
            RoundLimits::within(Duration::from_secs(5)),
        )
        .await;
    assert_eq!(result, Err(NegentropyError::NotConnected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_lost_mid_round_is_not_connected() {
    check(
        Script::Hangup,
        Duration::from_secs(5),
        NegentropyError::NotConnected,
    )
    .await;
}
