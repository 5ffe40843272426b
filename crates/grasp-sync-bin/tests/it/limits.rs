//! The embedded relay's NIP-11 document against its behaviour: every limit it advertises is
//! read from the document and then crossed by one, and the NIPs it lists are served.

use std::net::SocketAddr;
use std::time::Duration;

use grasp_sync_bin::{Daemon, RelayLimits, Settings};
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use nostr::{ClientMessage, EventBuilder, JsonUtil, Keys, RelayMessage, Tag, Timestamp};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::raw::{Frame, RawClient};
use crate::support::test_settings;

const WAIT: Duration = Duration::from_secs(10);

/// Small limits, so each can be crossed cheaply.
fn limits() -> RelayLimits {
    RelayLimits {
        max_subscriptions: 3,
        max_filters: 2,
        max_limit: 4,
        default_limit: 3,
        max_subid_length: 10,
        max_message_length: 8_192,
        max_event_tags: 5,
        max_content_length: 50,
        ..RelayLimits::default()
    }
}

async fn nip11(addr: SocketAddr) -> Value {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nAccept: application/nostr+json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let (_, body) = response.split_once("\r\n\r\n").expect("head and body");
    serde_json::from_str(body).expect("a JSON document")
}

fn req(id: &str, filters: &[&str]) -> String {
    format!(r#"["REQ","{id}",{}]"#, filters.join(","))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_nip11_advertises_is_the_one_enforced() {
    let dir = tempfile::tempdir().expect("dir");
    let base = test_settings(dir.path());
    let settings = Settings {
        relay: RelayLimits {
            max_future_created_at: base.max_future_created_at,
            ..limits()
        },
        ..base
    };
    let daemon = Daemon::start(&settings).await.expect("daemon");
    let addr = daemon.relay_addr().expect("embedded relay");
    let service = format!("ws://{addr}");

    let document = nip11(addr).await;
    let limitation = document["limitation"]
        .as_object()
        .expect("limitation")
        .clone();
    let mut keys: Vec<&str> = limitation.keys().map(String::as_str).collect();
    keys.sort_unstable();
    // A newly advertised limit needs its check below.
    assert_eq!(
        keys,
        [
            "auth_required",
            "created_at_upper_limit",
            "default_limit",
            "max_content_length",
            "max_event_tags",
            "max_filters",
            "max_limit",
            "max_message_length",
            "max_subid_length",
            "max_subscriptions",
            "payment_required",
            "restricted_writes",
        ]
    );
    let advertised = |key: &str| -> usize {
        usize::try_from(limitation[key].as_u64().expect("a number")).expect("fits")
    };

    // An accepted repository with more issues than max_limit.
    let owner = Keys::generate();
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "limits".to_owned(),
            name: "limits".to_owned(),
            relays: vec![service.clone()],
            clone: vec![format!(
                "http://{addr}/{}/limits.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement");
    let repo = [RepoRef::new(owner.public_key(), "limits")];
    let mut publisher = RawClient::connect(&service).await;
    let mut events = vec![announcement];
    for n in 0..(advertised("max_limit") as u64 + 2) {
        events.push(
            nip34::root(
                &Keys::generate(),
                RootKind::Issue,
                &repo,
                "issue",
                Timestamp::from_secs(1_700_000_100 + n),
            )
            .expect("issue"),
        );
    }
    for event in &events {
        publisher
            .send(ClientMessage::event(event.clone()).as_json())
            .await;
        let (accepted, message) = publisher.ok_for(&event.id, WAIT).await;
        assert!(accepted, "{message}");
    }
    let issues = r#"{"kinds":[1621]}"#;

    // max_subscriptions
    let mut client = RawClient::connect(&service).await;
    for n in 0..advertised("max_subscriptions") {
        let id = format!("s{n}");
        client
            .send(req(&id, &[r#"{"kinds":[1621],"limit":1}"#]))
            .await;
        assert_eq!(client.events_until_eose(&id, WAIT).await, Ok(1));
    }
    client.send(req("over", &[issues])).await;
    let refused = client
        .events_until_eose("over", WAIT)
        .await
        .expect_err("refused");
    assert!(refused.contains("too many subscriptions"), "{refused}");

    // max_filters
    let mut client = RawClient::connect(&service).await;
    let filters = vec![issues; advertised("max_filters")];
    client.send(req("f", &filters)).await;
    assert!(client.events_until_eose("f", WAIT).await.is_ok());
    client
        .send(ClientMessage::close(nostr::SubscriptionId::new("f")).as_json())
        .await;
    let filters = vec![issues; advertised("max_filters") + 1];
    client.send(req("g", &filters)).await;
    let refused = client
        .events_until_eose("g", WAIT)
        .await
        .expect_err("refused");
    assert!(refused.contains("too many filters"), "{refused}");

    // max_limit and default_limit
    let mut client = RawClient::connect(&service).await;
    client
        .send(req("l", &[r#"{"kinds":[1621],"limit":1000000000}"#]))
        .await;
    assert_eq!(
        client.events_until_eose("l", WAIT).await,
        Ok(advertised("max_limit"))
    );
    client.send(req("d", &[issues])).await;
    assert_eq!(
        client.events_until_eose("d", WAIT).await,
        Ok(advertised("default_limit"))
    );

    // max_subid_length
    let longest = "x".repeat(advertised("max_subid_length"));
    client.send(req(&longest, &[issues])).await;
    assert!(client.events_until_eose(&longest, WAIT).await.is_ok());
    let too_long = "y".repeat(advertised("max_subid_length") + 1);
    client.send(req(&too_long, &[issues])).await;
    let refused = client
        .events_until_eose(&too_long, WAIT)
        .await
        .expect_err("refused");
    assert!(refused.starts_with("invalid: subscription id"), "{refused}");

    // max_event_tags, max_content_length, created_at_upper_limit: at the limit the event
    // is judged on its merits (here: refused by the policy, as it tags no repository);
    // past it, refused for the limit.
    let keys = Keys::generate();
    let judged = |builder: EventBuilder| builder.sign_with_keys(&keys).expect("sign");
    let tags = |n: usize| {
        (0..n)
            .map(|i| Tag::hashtag(format!("t{i}")))
            .collect::<Vec<_>>()
    };
    let now = Timestamp::now().as_secs();
    let ahead = advertised("created_at_upper_limit") as u64;
    let cases = [
        (
            judged(EventBuilder::text_note("x").tags(tags(advertised("max_event_tags")))),
            false,
            "tags, more than",
        ),
        (
            judged(EventBuilder::text_note("x").tags(tags(advertised("max_event_tags") + 1))),
            true,
            "tags, more than",
        ),
        (
            judged(EventBuilder::text_note(
                "c".repeat(advertised("max_content_length")),
            )),
            false,
            "characters, more than",
        ),
        (
            judged(EventBuilder::text_note(
                "c".repeat(advertised("max_content_length") + 1),
            )),
            true,
            "characters, more than",
        ),
        (
            judged(
                EventBuilder::text_note("x")
                    .custom_created_at(Timestamp::from_secs(now + ahead - 120)),
            ),
            false,
            "in the future",
        ),
        (
            judged(
                EventBuilder::text_note("x")
                    .custom_created_at(Timestamp::from_secs(now + ahead + 120)),
            ),
            true,
            "in the future",
        ),
    ];
    for (event, over, reason) in cases {
        client
            .send(ClientMessage::event(event.clone()).as_json())
            .await;
        let (accepted, message) = client.ok_for(&event.id, WAIT).await;
        // restricted_writes: a note that tags no repository is refused either way.
        assert!(!accepted, "{message}");
        assert_eq!(message.contains(reason), over, "{reason}: {message}");
    }

    // max_message_length: a message of exactly that size is read; one byte more closes.
    let mut client = RawClient::connect(&service).await;
    let size = advertised("max_message_length");
    let exact = |size: usize| {
        let head = r#"["REQ","m",{"kinds":[1621],"limit":1}"#;
        format!("{head}{}]", " ".repeat(size - head.len() - 1))
    };
    client.send(exact(size)).await;
    assert!(client.events_until_eose("m", WAIT).await.is_ok());
    client.send(exact(size + 1)).await;
    match client.message(WAIT).await {
        RelayMessage::Notice(text) => assert!(text.contains("larger than"), "{text}"),
        other => panic!("expected a NOTICE, got {other:?}"),
    }
    assert!(
        matches!(client.next(WAIT).await, Frame::Closed(Some(code)) if u16::from(code) == 1009)
    );

    // auth_required false: every read above went without AUTH. The listed NIPs answer.
    let nips: Vec<u64> = document["supported_nips"]
        .as_array()
        .expect("supported_nips")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(nips, [1, 9, 11, 34, 45, 77]);
    assert_eq!(document["limitation"]["auth_required"], Value::Bool(false));
    let mut client = RawClient::connect(&service).await;
    client.send(r#"["COUNT","c",{"kinds":[1621]}]"#).await;
    match client.message(WAIT).await {
        RelayMessage::Count { count, .. } => assert_eq!(count, advertised("max_limit") + 2),
        other => panic!("expected COUNT, got {other:?}"),
    }
    let mut storage = negentropy::NegentropyStorageVector::new();
    storage.seal().expect("seal");
    let mut negentropy = negentropy::Negentropy::owned(storage, 0).expect("negentropy");
    let initial = hex::encode(negentropy.initiate().expect("initiate"));
    client
        .send(format!(r#"["NEG-OPEN","n",{issues},"{initial}"]"#))
        .await;
    assert!(matches!(
        client.message(WAIT).await,
        RelayMessage::NegMsg { .. }
    ));
    daemon.shutdown().await;
}
