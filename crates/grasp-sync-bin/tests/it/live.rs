//! Events that arrive by sync reach the embedded relay's open subscriptions, once each, as if
//! they had been published to it.

use std::time::Duration;

use grasp_sync_bin::Daemon;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Filter, Keys, Kind, RelayMessage, SubscriptionId, Timestamp};
use nostr_sdk::pool::{RelayNotification, RelayOptions, RelayPool};

use crate::support::{Publisher, test_settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_of_the_embedded_relay_receives_an_event_that_arrived_by_sync() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&test_settings(dir.path()))
        .await
        .expect("daemon");
    let service = format!("ws://{}", daemon.relay_addr().expect("embedded relay"));
    let source = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("source");

    // A client of the embedded relay waits for new issues.
    let url = nostr::RelayUrl::parse(&service).expect("url");
    let pool = RelayPool::default();
    pool.add_relay(url.clone(), RelayOptions::new().reconnect(false))
        .await
        .expect("add relay");
    let client = pool.relay(&url).await.expect("relay");
    client
        .try_connect(Duration::from_secs(10))
        .await
        .expect("connect");
    let mut notifications = client.notifications();
    let subscription = SubscriptionId::new("issues");
    client
        .send_msg(nostr::ClientMessage::req(
            subscription.clone(),
            vec![Filter::new().kind(Kind::from(1621)).limit(0)],
        ))
        .expect("subscribe");

    // An accepted announcement listing the source makes the daemon sync from it live.
    let owner = Keys::generate();
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "live".to_owned(),
            name: "live".to_owned(),
            relays: vec![service.clone(), source.url()],
            clone: vec![format!(
                "http://{}/{}/live.git",
                daemon.relay_addr().expect("addr"),
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement");
    source
        .seed([announcement.clone()])
        .await
        .expect("seed source");
    let publisher = Publisher::connect(&service).await;
    assert!(
        publisher.publish(&announcement).await.0,
        "announcement refused"
    );
    publisher.close().await;

    // Wait until the daemon holds the source's history, then publish an issue there only.
    let source_key = grasp_sync_model::RelayUrl::parse(&source.url())
        .expect("url")
        .to_string();
    let synced = crate::support::wait_until(Duration::from_secs(30), || async {
        daemon.status().await.is_some_and(|s| {
            s.relays
                .get(&source_key)
                .is_some_and(|r| r.connection == "connected")
        })
    })
    .await;
    assert!(synced, "{:#?}", daemon.status().await);
    let repo = [RepoRef::new(owner.public_key(), "live")];
    let issue = |title: &str, at: u64| {
        nip34::root(
            &Keys::generate(),
            RootKind::Issue,
            &repo,
            title,
            Timestamp::from_secs(at),
        )
        .expect("issue")
    };
    let first = issue("arrived by sync", 1_700_000_100);
    let second = issue("arrived later", 1_700_000_200);
    source.publish(first.clone()).await.expect("publish");

    // Fan-out is in order: once the second issue arrived, any repeat of the first would have.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Ok(Ok(notification)) = tokio::time::timeout_at(deadline, notifications.recv()).await {
        let RelayNotification::Message {
            message:
                RelayMessage::Event {
                    subscription_id,
                    event,
                },
        } = notification
        else {
            continue;
        };
        if *subscription_id != subscription {
            continue;
        }
        seen.push(event.id);
        if event.id == first.id && !seen.contains(&second.id) {
            source.publish(second.clone()).await.expect("publish");
        }
        if event.id == second.id {
            break;
        }
    }
    assert_eq!(
        seen,
        vec![first.id, second.id],
        "each synced issue reaches the subscriber once, in order"
    );
    assert!(daemon.holds(&first.id).await.expect("holds"));
    client.disconnect();
    pool.shutdown().await;
    daemon.shutdown().await;
}
