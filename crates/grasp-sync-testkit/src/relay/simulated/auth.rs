//! The rust-nostr relay builder's NIP-42 read mode ([`RelayAuth::Reads`]) for a simulated
//! relay, as a [`TestRelay`](crate::TestRelay) runs it behind its proxy: a REQ the proxy
//! passed, from a connection not authenticated, gets a fresh `["AUTH", challenge]` then
//! `["CLOSED", id, "auth-required: you must auth"]`; an `AUTH` naming any challenge the
//! connection was sent and not yet answered, validly signed, is accepted (`OK` true) for reads
//! by any key, and a bad one gets `OK` false `"auth-required: ..."` with the builder's reason.
//! NEG-OPEN needs no authentication, as in the builder. The builder's two-minute age check of
//! the `AUTH` event is left out: a simulated relay reads no wall clock.
//!
//! [`RelayAuth::Reads`]: crate::RelayAuth::Reads

use std::collections::BTreeSet;

use nostr::{ClientMessage, Event, JsonUtil, RelayMessage, SubscriptionId};

/// The builder's refusal of a REQ from a connection not authenticated.
const YOU_MUST_AUTH: &str = "auth-required: you must auth";

/// One connection's NIP-42 state in the builder's read mode.
#[derive(Debug, Default)]
pub(super) struct ReadsAuth {
    /// Challenges sent and not answered yet.
    challenges: BTreeSet<String>,
    authenticated: bool,
}

impl ReadsAuth {
    /// The frames refusing REQ `id`, if the connection is not authenticated: a fresh
    /// challenge, then `CLOSED`.
    pub(super) fn refuse_req(&mut self, id: &str) -> Option<Vec<String>> {
        if self.authenticated {
            return None;
        }
        // A fresh key's public half: 32 random bytes in hex.
        let challenge = nostr::Keys::generate().public_key().to_hex();
        self.challenges.insert(challenge.clone());
        Some(vec![
            RelayMessage::Auth {
                challenge: std::borrow::Cow::Owned(challenge),
            }
            .as_json(),
            RelayMessage::closed(SubscriptionId::new(id), YOU_MUST_AUTH).as_json(),
        ])
    }

    /// The `OK` answering client message `text` if it is an `AUTH`.
    pub(super) fn handle_client(&mut self, text: &str) -> Option<String> {
        let ClientMessage::Auth(event) = ClientMessage::from_json(text).ok()? else {
            return None;
        };
        let answer = match self.check(&event) {
            Ok(()) => RelayMessage::ok(event.id, true, ""),
            Err(why) => RelayMessage::ok(event.id, false, format!("auth-required: {why}")),
        };
        Some(answer.as_json())
    }

    /// The builder's checks, in its order and words (the age check left out).
    fn check(&mut self, event: &Event) -> Result<(), String> {
        let challenge = event
            .tags
            .challenge()
            .ok_or_else(|| "challenge not found".to_owned())?;
        if !self.challenges.remove(challenge) {
            return Err("received invalid challenge".to_owned());
        }
        event.verify().map_err(|e| e.to_string())?;
        self.authenticated = true;
        Ok(())
    }
}
