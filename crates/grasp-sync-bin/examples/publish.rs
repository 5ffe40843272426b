//! Publishes a sample repository to one relay, for trying `grasp-sync run` by hand: an
//! announcement listing every relay given (with a clone URL on each relay's host), an issue and
//! a reply, signed with fresh keys. Prints the relay's `OK` answer for each event.
//!
//! Usage: `cargo run -p grasp-sync-bin --example publish -- <publish-to> [<also-listed>...]`

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, bail};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind, ThreadTag};
use nostr::{ClientMessage, Event, Keys, RelayMessage, Timestamp};
use nostr_sdk::pool::{RelayNotification, RelayOptions, RelayPool};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let relays: Vec<String> = std::env::args().skip(1).collect();
    let Some(target) = relays.first() else {
        bail!("usage: publish <publish-to> [<also-listed>...]");
    };
    let mut clone = Vec::new();
    for relay in &relays {
        let url = RelayUrl::parse(relay).with_context(|| format!("relay url {relay}"))?;
        let scheme = if url.as_str().starts_with("wss://") {
            "https"
        } else {
            "http"
        };
        let base = format!("{scheme}://{}", url.host());
        if !clone.contains(&base) {
            clone.push(base);
        }
    }
    let owner = Keys::generate();
    let identifier = "hello-grasp";
    let clone = clone
        .iter()
        .map(|base| format!("{base}/{}/{identifier}.git", owner.public_key().to_hex()))
        .collect();
    let now = Timestamp::now().as_secs();
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: identifier.to_owned(),
            name: identifier.to_owned(),
            relays: relays.clone(),
            clone,
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(now),
        },
    )?;
    let repo = RepoRef::new(owner.public_key(), identifier);
    let author = Keys::generate();
    let issue = nip34::root(
        &author,
        RootKind::Issue,
        &[repo],
        "the first issue",
        Timestamp::from_secs(now + 1),
    )?;
    let reply = nip34::reply(
        &owner,
        &issue,
        ThreadTag::LowerE,
        "thanks, looking",
        Timestamp::from_secs(now + 2),
    )?;

    let url = nostr::RelayUrl::parse(target).context("relay url")?;
    let pool = RelayPool::default();
    pool.add_relay(url.clone(), RelayOptions::new().reconnect(false))
        .await?;
    let relay = pool.relay(&url).await?;
    relay
        .try_connect(Duration::from_secs(10))
        .await
        .with_context(|| format!("connecting to {target}"))?;
    let mut out = std::io::stdout();
    for (what, event) in [
        ("announcement", &announcement),
        ("issue", &issue),
        ("reply", &reply),
    ] {
        let (accepted, message) = publish(&relay, event).await?;
        let verdict = if accepted { "accepted" } else { "refused" };
        writeln!(out, "{what} {}: {verdict} {message}", event.id)?;
    }
    relay.disconnect();
    pool.shutdown().await;
    Ok(())
}

/// Sends one event and waits for the relay's `OK`.
async fn publish(relay: &nostr_sdk::Relay, event: &Event) -> anyhow::Result<(bool, String)> {
    let mut notifications = relay.notifications();
    relay.send_msg(ClientMessage::event(event.clone()))?;
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(notification) = notifications.recv().await {
            if let RelayNotification::Message {
                message:
                    RelayMessage::Ok {
                        event_id,
                        status,
                        message,
                    },
            } = notification
                && event_id == event.id
            {
                return Some((status, message.into_owned()));
            }
        }
        None
    })
    .await;
    match answer {
        Ok(Some(answer)) => Ok(answer),
        _ => bail!("no OK for {} within 10 s", event.id),
    }
}
