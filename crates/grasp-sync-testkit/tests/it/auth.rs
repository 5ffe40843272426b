//! `RelayAuth::Reads`, frame by frame as a bare client sees it: the rust-nostr relay builder's
//! NIP-42 read mode, which the test relay runs itself.

use grasp_sync_testkit::{RelayAuth, TestRelay, TestRelayConfig};
use nostr_sdk::prelude::*;
use serde_json::{Value, json};

use crate::support::{Raw, notes};

async fn auth_relay() -> TestRelay {
    let relay = TestRelay::start(TestRelayConfig {
        auth: RelayAuth::Reads,
        ..TestRelayConfig::default()
    })
    .await
    .expect("relay");
    relay.seed(notes(1)).await.expect("seed");
    relay
}

/// Sends a REQ for notes and returns the challenge the relay sends with its refusal.
async fn refused_req(client: &mut Raw, id: &str) -> String {
    client.send(json!(["REQ", id, {"kinds": [1]}])).await;
    let challenge = client.recv().await;
    assert_eq!(challenge[0], "AUTH", "{challenge}");
    assert_eq!(
        client.recv().await,
        json!(["CLOSED", id, "auth-required: you must auth"])
    );
    challenge[1].as_str().expect("challenge text").to_owned()
}

fn auth_frame(relay: &TestRelay, challenge: &str, keys: &Keys) -> (EventId, Value) {
    let url = RelayUrl::parse(&relay.url()).expect("url");
    let event = EventBuilder::auth(challenge, url)
        .sign_with_keys(keys)
        .expect("sign");
    let json: Value = serde_json::from_str(&event.as_json()).expect("json");
    (event.id, json!(["AUTH", json]))
}

#[tokio::test]
async fn reads_need_auth_and_any_signed_answer_to_a_challenge_is_accepted() {
    let relay = auth_relay().await;
    let mut client = Raw::connect(&relay.url()).await;
    let challenge = refused_req(&mut client, "before").await;
    let (id, frame) = auth_frame(&relay, &challenge, &Keys::generate());
    client
        .exchange(frame, json!(["OK", id.to_hex(), true, ""]))
        .await;
    client.send(json!(["REQ", "after", {"kinds": [1]}])).await;
    let event = client.recv().await;
    assert_eq!(
        (&event[0], &event[1]),
        (&json!("EVENT"), &json!("after")),
        "{event}"
    );
    assert_eq!(client.recv().await, json!(["EOSE", "after"]));
}

#[tokio::test]
async fn an_answer_to_a_challenge_never_sent_is_refused() {
    let relay = auth_relay().await;
    let mut client = Raw::connect(&relay.url()).await;
    refused_req(&mut client, "before").await;
    let (id, frame) = auth_frame(&relay, "not-the-challenge", &Keys::generate());
    client.send(frame).await;
    let ok = client.recv().await;
    assert_eq!(
        (&ok[0], &ok[1], &ok[2]),
        (&json!("OK"), &json!(id.to_hex()), &json!(false))
    );
    assert!(
        ok[3]
            .as_str()
            .is_some_and(|m| m.starts_with("auth-required:")),
        "{ok}"
    );
    // Still not authenticated: the next read is refused, with a fresh challenge.
    refused_req(&mut client, "still").await;
}
