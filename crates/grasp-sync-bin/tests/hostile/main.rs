//! Hostile clients against the real `grasp-sync` daemon on loopback, with its default limits.
//!
//! The daemon runs as its own process (the built binary), so what the probes measure is the
//! daemon, not this test's runtime. While the probes run, a thread of its own reads
//! `/metrics` every 50 ms and records how long each answer took. Each probe checks the
//! refusal it gets; at the end the daemon's peak memory and the slowest `/metrics` answer are
//! checked. `docs/security.md` lists the probes, the limits and the answers.

#[path = "../common/process.rs"]
mod process;
#[path = "../common/raw.rs"]
mod raw;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use grasp_sync_bin::RelayLimits;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use nostr::{ClientMessage, Event, EventBuilder, JsonUtil, Keys, RelayMessage, Timestamp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use process::DaemonProcess;
use raw::{Frame, RawClient};

const WAIT: Duration = Duration::from_secs(20);
/// Issues stored for the probes: more than the default `max_limit`.
const ISSUES: u64 = 520;

/// (current, peak) resident memory of process `pid` in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .expect("a memory field")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Reads `/metrics` every 50 ms on its own thread until stopped: (answers, slowest, failures).
struct MetricsWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(usize, Duration, usize)>,
}

impl MetricsWatch {
    fn start(addr: SocketAddr) -> MetricsWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (mut answers, mut slowest, mut failures) = (0, Duration::ZERO, 0);
            while !stopping.load(Ordering::Relaxed) {
                let asked = Instant::now();
                match scrape(addr) {
                    Ok(()) => {
                        answers += 1;
                        slowest = slowest.max(asked.elapsed());
                    }
                    Err(_) => failures += 1,
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (answers, slowest, failures)
        });
        MetricsWatch { stop, thread }
    }

    fn finish(self) -> (usize, Duration, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("metrics watch")
    }
}

fn scrape(addr: SocketAddr) -> std::io::Result<()> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    if response.starts_with("HTTP/1.1 200") && response.contains("grasp_sync_") {
        Ok(())
    } else {
        Err(std::io::Error::other("not a metrics answer"))
    }
}

/// An accepted repository listing the service, with `ISSUES` issues.
async fn seed(service: &str, addr: SocketAddr) -> Vec<Event> {
    let owner = Keys::generate();
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "hostile".to_owned(),
            name: "hostile".to_owned(),
            relays: vec![service.to_owned()],
            clone: vec![format!(
                "http://{addr}/{}/hostile.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement");
    let repo = [RepoRef::new(owner.public_key(), "hostile")];
    let author = Keys::generate();
    let mut events = vec![announcement];
    for n in 0..ISSUES {
        events.push(
            nip34::root(
                &author,
                RootKind::Issue,
                &repo,
                "issue",
                Timestamp::from_secs(1_700_000_100 + n),
            )
            .expect("issue"),
        );
    }
    let mut client = RawClient::connect(service).await;
    for event in &events {
        client
            .send(ClientMessage::event(event.clone()).as_json())
            .await;
    }
    for event in &events {
        let (accepted, message) = client.ok_for(&event.id, WAIT).await;
        assert!(accepted, "seed event refused: {message}");
    }
    events
}

/// 2,000 NEG-OPENs on one socket: each gets one answer; at most the session cap open.
async fn negentropy_flood(service: &str, limits: &RelayLimits) -> String {
    let mut storage = negentropy::NegentropyStorageVector::new();
    storage.seal().expect("seal");
    let mut session = negentropy::Negentropy::owned(storage, 0).expect("session");
    let initial = hex::encode(session.initiate().expect("initiate"));
    let mut client = RawClient::connect(service).await;
    for n in 0..2_000 {
        client
            .send(format!(
                r#"["NEG-OPEN","n{n}",{{"kinds":[1621]}},"{initial}"]"#
            ))
            .await;
    }
    let (mut opened, mut too_many, mut rate_limited) = (0, 0, 0);
    let mut answered = std::collections::HashSet::new();
    while answered.len() < 2_000 {
        match client.message(WAIT).await {
            RelayMessage::NegMsg {
                subscription_id, ..
            } => {
                opened += 1;
                assert!(answered.insert(subscription_id.into_owned()));
            }
            RelayMessage::NegErr {
                subscription_id,
                message,
            } => {
                if message.starts_with("blocked: too many concurrent NEG requests") {
                    too_many += 1;
                } else if message.starts_with("rate-limited: too many queries") {
                    rate_limited += 1;
                } else {
                    panic!("unexpected NEG-ERR: {message}");
                }
                assert!(answered.insert(subscription_id.into_owned()));
            }
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    assert!(
        opened <= limits.max_negentropy_sessions,
        "{opened} sessions open"
    );
    assert!(rate_limited > 0 && too_many > 0);
    format!("{opened} NEG-MSG, {too_many} too many concurrent, {rate_limited} rate-limited")
}

/// A REQ with `limit: 1000000000` gets `max_limit` events and EOSE.
async fn huge_limit(service: &str, limits: &RelayLimits) -> String {
    let mut client = RawClient::connect(service).await;
    client
        .send(r#"["REQ","big",{"kinds":[1621],"limit":1000000000}]"#)
        .await;
    let events = client.events_until_eose("big", WAIT).await.expect("served");
    assert_eq!(events, limits.max_limit);
    format!("{events} events and EOSE")
}

/// A REQ of 5,000 filters is closed.
async fn many_filters(service: &str) -> String {
    let mut client = RawClient::connect(service).await;
    let filters = vec![r#"{"kinds":[1621]}"#; 5_000].join(",");
    client.send(format!(r#"["REQ","many",{filters}]"#)).await;
    let refused = client
        .events_until_eose("many", WAIT)
        .await
        .expect_err("refused");
    assert!(
        refused.starts_with("blocked: too many filters"),
        "{refused}"
    );
    format!("CLOSED \"{refused}\"")
}

/// A message over `max_message_length` gets a NOTICE and a close with code 1009.
async fn oversized(service: &str, message: String) -> String {
    let mut client = RawClient::connect(service).await;
    // The relay may close while the message is still being written.
    let _ = client.try_send(message).await;
    let notice = match client.next(WAIT).await {
        Frame::Relay(message) => match *message {
            RelayMessage::Notice(text) => text.into_owned(),
            other => panic!("expected a NOTICE, got {other:?}"),
        },
        other => panic!("expected a NOTICE, got {other:?}"),
    };
    assert!(
        notice.starts_with("invalid: message is larger than"),
        "{notice}"
    );
    let closed = client.next(WAIT).await;
    assert!(
        matches!(closed, Frame::Closed(Some(code)) if u16::from(code) == 1009),
        "{closed:?}"
    );
    format!("NOTICE \"{notice}\", close 1009")
}

/// An event dated ten years ahead is refused.
async fn far_future(service: &str) -> String {
    let ten_years = 10 * 365 * 24 * 3600;
    let event = EventBuilder::text_note("from the future")
        .custom_created_at(Timestamp::from_secs(Timestamp::now().as_secs() + ten_years))
        .sign_with_keys(&Keys::generate())
        .expect("sign");
    let mut client = RawClient::connect(service).await;
    client
        .send(ClientMessage::event(event.clone()).as_json())
        .await;
    let (accepted, message) = client.ok_for(&event.id, WAIT).await;
    assert!(!accepted);
    assert!(
        message.starts_with("invalid: created_at is more than"),
        "{message}"
    );
    format!("OK false \"{message}\"")
}

/// 1,500 idle TCP connections and 100 half-sent HTTP requests: every one is closed, over the
/// per-address cap at once with a 429, the others at the header-read timeout.
async fn idle_sockets(addr: SocketAddr, limits: &RelayLimits) -> String {
    let mut sockets = Vec::new();
    for n in 0..1_600 {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        if n >= 1_500 {
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: relay\r\nAccept: text/")
                .await
                .expect("write");
        }
        sockets.push(stream);
    }
    let started = Instant::now();
    let deadline = limits.header_read_timeout + Duration::from_secs(15);
    let mut turned_away = 0;
    for mut stream in sockets {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(deadline, stream.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "a connection still open after {deadline:?}");
        if answer.starts_with(b"HTTP/1.1 429") {
            turned_away += 1;
        }
    }
    let held = 1_600 - turned_away;
    assert!(held <= limits.max_connections_per_ip, "{held} held at once");
    format!(
        "{turned_away} answered 429 at once, {held} closed at the header timeout; all closed after {:.1} s",
        started.elapsed().as_secs_f64()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_get_their_refusals_and_the_daemon_stays_responsive() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = DaemonProcess::start(dir.path(), &[]);
    let limits = RelayLimits::default();
    let service = daemon.relay.clone();
    let relay_addr: SocketAddr = service.trim_start_matches("ws://").parse().expect("addr");
    seed(&service, relay_addr).await;
    let (rss_before, _) = memory(daemon.pid());

    let watch = MetricsWatch::start(daemon.metrics);
    let keys = Keys::generate();
    let ids: Vec<String> = (0..100_000u32).map(|n| format!("\"{:064x}\"", n)).collect();
    let big_event = EventBuilder::text_note("x".repeat(10 * 1024 * 1024))
        .sign_with_keys(&keys)
        .expect("sign");
    let results = [
        (
            "2,000 NEG-OPENs on one socket",
            negentropy_flood(&service, &limits).await,
        ),
        (
            "REQ with limit 1000000000",
            huge_limit(&service, &limits).await,
        ),
        ("REQ of 5,000 filters", many_filters(&service).await),
        (
            "REQ with 100,000 ids",
            oversized(
                &service,
                format!(r#"["REQ","ids",{{"ids":[{}]}}]"#, ids.join(",")),
            )
            .await,
        ),
        (
            "a 10 MB event",
            oversized(&service, ClientMessage::event(big_event).as_json()).await,
        ),
        ("an event dated 10 years ahead", far_future(&service).await),
        (
            "1,500 idle TCP + 100 half-sent HTTP",
            idle_sockets(relay_addr, &limits).await,
        ),
    ];
    let (answers, slowest, failures) = watch.finish();
    let (rss_after, peak) = memory(daemon.pid());
    for (probe, outcome) in &results {
        println!("{probe}: {outcome}");
    }
    println!(
        "/metrics: {answers} answers, slowest {} ms, {failures} failed; memory {} MiB before, {} MiB after, peak {} MiB",
        slowest.as_millis(),
        rss_before / 1024,
        rss_after / 1024,
        peak / 1024
    );
    assert!(
        answers > 20 && failures == 0,
        "{answers} answers, {failures} failures"
    );
    assert!(
        slowest < Duration::from_millis(200),
        "slowest /metrics answer: {slowest:?}"
    );
    assert!(
        peak.saturating_sub(rss_before) < 64 * 1024,
        "peak {peak} KiB against {rss_before} KiB before the probes"
    );
}
