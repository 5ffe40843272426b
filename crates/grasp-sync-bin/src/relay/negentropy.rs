//! [`NegSessions`]: the NIP-77 sessions of one connection, served by the `negentropy` crate
//! over the stored items a NEG-OPEN's filter matches. It turns each step into the message
//! to send: `NEG-MSG` with the next frame, or `NEG-ERR` when the filter matches more than
//! the relay reconciles or the client's message cannot be read.

use std::borrow::Cow;
use std::collections::HashMap;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostr::{EventId, JsonUtil, RelayMessage, SubscriptionId, Timestamp};

/// The text of a NEG-OPEN whose filter matches too many events (strfry's words).
pub(crate) const TOO_MANY_RESULTS: &str = "blocked: too many query results";

/// What a step sends to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NegReply {
    /// `NEG-MSG`: the session goes on.
    Message(String),
    /// `NEG-ERR`: the session is gone.
    Error(String),
}

impl NegReply {
    /// The reply's JSON text.
    pub(crate) fn into_json(self) -> String {
        match self {
            NegReply::Message(json) | NegReply::Error(json) => json,
        }
    }
}

/// The open NIP-77 sessions of one connection.
pub(crate) struct NegSessions {
    frame_size: u64,
    max_items: usize,
    sessions: HashMap<SubscriptionId, Negentropy<'static, NegentropyStorageVector>>,
}

impl std::fmt::Debug for NegSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NegSessions")
            .field("frame_size", &self.frame_size)
            .field("max_items", &self.max_items)
            .field("open", &self.sessions.len())
            .finish()
    }
}

impl NegSessions {
    /// Sessions whose frames stay within `frame_size` bytes, over at most `max_items` events.
    pub(crate) fn new(frame_size: usize, max_items: usize) -> NegSessions {
        NegSessions {
            frame_size: u64::try_from(frame_size).unwrap_or(u64::MAX),
            max_items,
            sessions: HashMap::new(),
        }
    }

    /// How many items to read for a NEG-OPEN: one more than reconciled, to tell "too many".
    pub(crate) fn read_limit(&self) -> usize {
        self.max_items.saturating_add(1)
    }

    /// Opens (or replaces) session `id` over `items` and answers the client's first
    /// message `initial` (hex).
    pub(crate) fn open(
        &mut self,
        id: SubscriptionId,
        items: Vec<(EventId, Timestamp)>,
        initial: &str,
    ) -> NegReply {
        self.sessions.remove(&id);
        if items.len() > self.max_items {
            return error(id, TOO_MANY_RESULTS.to_owned());
        }
        let mut storage = NegentropyStorageVector::with_capacity(items.len());
        for (event, created_at) in items {
            if let Err(problem) =
                storage.insert(created_at.as_secs(), Id::from_byte_array(event.to_bytes()))
            {
                return error(id, format!("error: cannot index the events: {problem}"));
            }
        }
        if let Err(problem) = storage.seal() {
            return error(id, format!("error: cannot index the events: {problem}"));
        }
        let mut session = match Negentropy::owned(storage, self.frame_size) {
            Ok(session) => session,
            Err(problem) => return error(id, format!("error: {problem}")),
        };
        match reconcile(&mut session, initial) {
            Ok(reply) => {
                self.sessions.insert(id.clone(), session);
                message(id, reply)
            }
            Err(reason) => error(id, reason),
        }
    }

    /// Answers the client's next message (hex) of session `id`.
    pub(crate) fn step(&mut self, id: SubscriptionId, query: &str) -> NegReply {
        let Some(session) = self.sessions.get_mut(&id) else {
            return error(id, "closed: no such NEG session".to_owned());
        };
        match reconcile(session, query) {
            Ok(reply) => message(id, reply),
            Err(reason) => {
                self.sessions.remove(&id);
                error(id, reason)
            }
        }
    }

    /// Forgets session `id`.
    pub(crate) fn close(&mut self, id: &SubscriptionId) {
        self.sessions.remove(id);
    }

    /// Open sessions.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }
}

fn reconcile(
    session: &mut Negentropy<'static, NegentropyStorageVector>,
    query: &str,
) -> Result<Vec<u8>, String> {
    let bytes = hex::decode(query)
        .map_err(|problem| format!("invalid: the message is not hex: {problem}"))?;
    session
        .reconcile(&bytes)
        .map_err(|problem| format!("invalid: cannot reconcile: {problem}"))
}

fn message(id: SubscriptionId, reply: Vec<u8>) -> NegReply {
    NegReply::Message(
        RelayMessage::NegMsg {
            subscription_id: Cow::Owned(id),
            message: Cow::Owned(hex::encode(reply)),
        }
        .as_json(),
    )
}

/// A `NEG-ERR` for session `id`.
pub(crate) fn error(id: SubscriptionId, reason: String) -> NegReply {
    NegReply::Error(
        RelayMessage::NegErr {
            subscription_id: Cow::Owned(id),
            message: Cow::Owned(reason),
        }
        .as_json(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client session over `items`, and its first message.
    fn client(
        items: &[(EventId, Timestamp)],
    ) -> (Negentropy<'static, NegentropyStorageVector>, String) {
        let mut storage = NegentropyStorageVector::new();
        for (id, at) in items {
            storage
                .insert(at.as_secs(), Id::from_byte_array(id.to_bytes()))
                .expect("insert");
        }
        storage.seal().expect("seal");
        let mut session = Negentropy::owned(storage, 0).expect("session");
        let initial = hex::encode(session.initiate().expect("initiate"));
        (session, initial)
    }

    fn item(n: u8) -> (EventId, Timestamp) {
        (
            EventId::from_byte_array([n; 32]),
            Timestamp::from_secs(1_000 + u64::from(n)),
        )
    }

    fn payload(reply: &NegReply) -> String {
        let NegReply::Message(json) = reply else {
            panic!("expected NEG-MSG, got {reply:?}");
        };
        match RelayMessage::from_json(json).expect("json") {
            RelayMessage::NegMsg { message, .. } => message.into_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_client_learns_what_the_relay_has_and_lacks() {
        let relay_items: Vec<_> = (1..=5).map(item).collect();
        let client_items: Vec<_> = (4..=8).map(item).collect();
        let mut sessions = NegSessions::new(60_000, 100);
        let (mut client, initial) = client(&client_items);
        let id = SubscriptionId::new("n");
        let mut reply = sessions.open(id.clone(), relay_items, &initial);
        let (mut have, mut need) = (Vec::new(), Vec::new());
        loop {
            let bytes = hex::decode(payload(&reply)).expect("hex");
            match client
                .reconcile_with_ids(&bytes, &mut have, &mut need)
                .expect("reconcile")
            {
                Some(next) => reply = sessions.step(id.clone(), &hex::encode(next)),
                None => break,
            }
        }
        have.sort();
        need.sort();
        let ids = |range: std::ops::RangeInclusive<u8>| -> Vec<Id> {
            range.map(|n| Id::from_byte_array([n; 32])).collect()
        };
        assert_eq!(have, ids(6..=8), "the client has, the relay lacks");
        assert_eq!(need, ids(1..=3), "the relay has, the client lacks");
        assert_eq!(sessions.len(), 1);
        sessions.close(&id);
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn a_filter_over_the_item_cap_gets_too_many_results() {
        let mut sessions = NegSessions::new(60_000, 3);
        assert_eq!(sessions.read_limit(), 4);
        let (_, initial) = client(&[]);
        let reply = sessions.open(
            SubscriptionId::new("n"),
            (1..=4).map(item).collect(),
            &initial,
        );
        let NegReply::Error(json) = reply else {
            panic!("expected NEG-ERR");
        };
        assert!(json.contains(TOO_MANY_RESULTS), "{json}");
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn bad_messages_end_the_session_with_an_error() {
        let mut sessions = NegSessions::new(60_000, 10);
        let id = SubscriptionId::new("n");
        assert!(matches!(
            sessions.open(id.clone(), vec![item(1)], "zz"),
            NegReply::Error(_)
        ));
        let (_, initial) = client(&[]);
        assert!(matches!(
            sessions.open(id.clone(), vec![item(1)], &initial),
            NegReply::Message(_)
        ));
        assert!(matches!(
            sessions.step(id.clone(), "00ff"),
            NegReply::Error(_)
        ));
        assert_eq!(sessions.len(), 0);
        assert!(matches!(sessions.step(id, &initial), NegReply::Error(_)));
    }
}
