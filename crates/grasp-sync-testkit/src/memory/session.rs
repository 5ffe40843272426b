//! `MemorySession`: one connection of a [`MemoryNetwork`](super::MemoryNetwork), the engine's
//! [`RelaySession`]. REQ and CLOSE go through the relay's connection state; a NIP-77 round is
//! admitted or refused by the relay, then computed from what the relay holds.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use grasp_sync_engine::transport::{
    NegentropyDiff, NegentropyError, RoundLimits, classify_refusal,
};
use grasp_sync_engine::{RelaySession, TransportError};
use grasp_sync_model::RelayUrl;
use nostr::{
    ClientMessage, Event, EventBuilder, EventId, Filter, JsonUtil, RelayMessage, SubscriptionId,
};
use tokio::time::Instant;

use super::{NetworkState, Read, lock};

/// One connection to a relay of the network.
pub(crate) struct MemorySession {
    url: RelayUrl,
    key: String,
    connection: usize,
    state: Arc<Mutex<NetworkState>>,
}

impl MemorySession {
    pub(crate) fn new(url: RelayUrl, connection: usize, state: Arc<Mutex<NetworkState>>) -> Self {
        Self {
            key: url.as_str().to_owned(),
            url,
            connection,
            state,
        }
    }

    fn lock(&self) -> MutexGuard<'_, NetworkState> {
        lock(&self.state)
    }

    /// Sends one client message and queues the relay's answer; `None` when the connection
    /// is gone.
    fn send(&self, text: &str) -> Option<Read> {
        let mut state = self.lock();
        let read = state.read(&self.key, self.connection, text)?;
        let frames = read.frames.clone();
        state.deliver(&self.key, self.connection, frames);
        self.answer_challenge(&mut state, &read.frames);
        Some(read)
    }

    /// With the network's AUTH keys, answers a challenge among `frames` at once, as the
    /// engine's client library does, and queues the relay's `OK` after them.
    fn answer_challenge(&self, state: &mut NetworkState, frames: &[String]) {
        let Some(keys) = state.auth_keys().cloned() else {
            return;
        };
        let Some(challenge) = frames.iter().find_map(|frame| challenge_of(frame)) else {
            return;
        };
        let Ok(relay) = nostr::RelayUrl::parse(self.url.as_str()) else {
            return;
        };
        let Ok(event) = EventBuilder::auth(challenge, relay).sign_with_keys(&keys) else {
            return;
        };
        let auth = ClientMessage::auth(event).as_json();
        if let Some(read) = state.read(&self.key, self.connection, &auth) {
            state.deliver(&self.key, self.connection, read.frames);
        }
    }
}

#[async_trait]
impl RelaySession for MemorySession {
    fn url(&self) -> &RelayUrl {
        &self.url
    }

    fn authenticates(&self) -> bool {
        self.lock().auth_keys().is_some()
    }

    fn is_connected(&self) -> bool {
        self.lock().connected(&self.key, self.connection)
    }

    async fn subscribe(
        &self,
        id: SubscriptionId,
        filters: Vec<Filter>,
    ) -> Result<(), TransportError> {
        let text = ClientMessage::req(id, filters).as_json();
        self.send(&text)
            .map(|_| ())
            .ok_or(TransportError::NotConnected)
    }

    async fn close(&self, id: SubscriptionId) -> Result<(), TransportError> {
        let text = ClientMessage::close(id).as_json();
        self.send(&text)
            .map(|_| ())
            .ok_or(TransportError::NotConnected)
    }

    async fn publish(&self, _event: &Event) -> Result<(), TransportError> {
        Ok(())
    }

    async fn negentropy_diff(
        &self,
        filter: Filter,
        have: Vec<(EventId, nostr::Timestamp)>,
        limits: RoundLimits,
    ) -> Result<NegentropyDiff, NegentropyError> {
        let (read, delay) = {
            let mut state = self.lock();
            let id = state.negentropy_id();
            let open =
                ClientMessage::neg_open(SubscriptionId::new(&id), filter.clone(), "61".to_owned());
            let read = state.read(&self.key, self.connection, &open.as_json());
            if let Some(read) = &read
                && state.auth_keys().is_some()
            {
                // The round's own answer comes back to it; a challenge goes to the session.
                let challenges: Vec<String> = read
                    .frames
                    .iter()
                    .filter(|frame| challenge_of(frame).is_some())
                    .cloned()
                    .collect();
                state.deliver(&self.key, self.connection, challenges);
                self.answer_challenge(&mut state, &read.frames);
            }
            let delay = match &read {
                Some(read) if read.negentropy_admitted => {
                    Some(state.hooks.negentropy_delay(&self.key, self.connection))
                }
                _ => None,
            };
            (read.map(|read| (read, id)), delay)
        };
        let Some((read, id)) = read else {
            return Err(NegentropyError::NotConnected);
        };
        let Some(delay) = delay else {
            return match read.frames.iter().find_map(|frame| refusal_text(frame)) {
                Some(text) => Err(classify_refusal(&text)),
                None => {
                    tokio::time::sleep(limits.first_answer).await;
                    Err(NegentropyError::NoAnswer)
                }
            };
        };
        tokio::time::sleep(delay).await;
        let mut state = self.lock();
        let Some(slot) = state.relays.get_mut(&self.key) else {
            return Err(NegentropyError::NotConnected);
        };
        let remote: BTreeSet<EventId> = slot
            .relay
            .matching(&filter)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let Some(connection) = slot.connections.get_mut(&self.connection) else {
            return Err(NegentropyError::NotConnected);
        };
        connection
            .state
            .close_negentropy(&slot.relay, Instant::now(), &id);
        let have: BTreeSet<EventId> = have.into_iter().map(|(id, _)| id).collect();
        Ok(NegentropyDiff {
            missing: remote.difference(&have).copied().collect(),
            relay_lacks: have.difference(&remote).copied().collect(),
        })
    }

    async fn disconnect(&self) {
        self.lock().cut(&self.key, self.connection);
    }
}

/// The challenge of a relay's `AUTH` frame.
fn challenge_of(frame: &str) -> Option<String> {
    match RelayMessage::from_json(frame).ok()? {
        RelayMessage::Auth { challenge } => Some(challenge.into_owned()),
        _ => None,
    }
}

/// The text of a refusal frame answering a NEG-OPEN.
fn refusal_text(frame: &str) -> Option<String> {
    match RelayMessage::from_json(frame).ok()? {
        RelayMessage::NegErr { message, .. } | RelayMessage::Closed { message, .. } => {
            Some(message.into_owned())
        }
        RelayMessage::Notice(message) => Some(message.into_owned()),
        _ => None,
    }
}
