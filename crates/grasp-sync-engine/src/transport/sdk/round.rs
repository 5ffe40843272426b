//! One NIP-77 dry-run round on a session, bounded by a deadline: the `negentropy` crate
//! reconciles, the round sends its frames as raw client messages, and the session's reader
//! hands it the relay's answers (`routes`).
//!
//! The round does not go through nostr-sdk's `Relay::sync_with_items`. That loop reads its own
//! receiver of the relay's notification broadcast, and a burst of events on the connection
//! (live pages, other subscriptions' history) can overrun it; it then ends as if the
//! reconciliation were complete and returns a partial diff as `Ok`, so IDs the relay holds
//! would never be fetched. Here a round whose answers may have been lost fails as a
//! [`NegentropyError::Protocol`] error, and its batch falls back to REQ+EOSE. Owning the
//! exchange also gives the round its subscription ID, so a CLOSED or NEG-ERR names it plainly,
//! and a round that ends early after the relay answered (deadline, refusal NOTICE, broken
//! frame, lost answers) sends NEG-CLOSE so the relay frees the negentropy session that
//! strfry-family relays count against the subscription budget. A round whose NEG-OPEN went out and got no answer within its
//! first-answer deadline ends as `NoAnswer`, so the engine can tell a relay that ignores the
//! verb from one that answered and then stalled.

use std::borrow::Cow;
use std::collections::HashSet;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostr::{ClientMessage, EventId, Filter, RelayMessage, SubscriptionId, Timestamp};
use nostr_sdk::Relay;
use tokio::sync::mpsc;

use super::routes::{RoundRoutes, RouteEnd};

use crate::transport::negentropy::{
    NegentropyDiff, NegentropyError, RoundLimits, classify_refusal, notice_ends_round,
};

/// The largest frame the round sends, in bytes before hex encoding: half of a 128 KiB frame,
/// less room for the JSON around it (the limit nostr-sdk's own rounds use).
const FRAME_SIZE_LIMIT: u64 = 60_000;

/// What bounds one round: its deadlines and the most IDs it takes as missing.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    limits: RoundLimits,
    max_missing: usize,
}

#[cfg(test)]
mod tests;

/// Runs one dry-run round; it ends by `limits.deadline` whatever the relay does, and by
/// `limits.first_answer` after the NEG-OPEN when the relay does not answer it.
pub(super) async fn run(
    relay: &Relay,
    routes: &RoundRoutes,
    filter: Filter,
    have: Vec<(EventId, Timestamp)>,
    limits: RoundLimits,
) -> Result<NegentropyDiff, NegentropyError> {
    // nostr-sdk queues silently on a relay that is gone: check before every frame.
    let send = |message: ClientMessage<'_>| {
        if !relay.is_connected() {
            return Err(NegentropyError::NotConnected);
        }
        relay
            .send_msg(message)
            .map_err(|_| NegentropyError::NotConnected)
    };
    let id = SubscriptionId::generate();
    // The route opens before the NEG-OPEN goes out, so no answer is missed, and closes however
    // the round ends.
    let answers = routes.open(&id);
    let _route = routes.closing(id.clone());
    let Some(answers) = answers.filter(|_| relay.is_connected()) else {
        return Err(NegentropyError::NotConnected);
    };
    let bounds = Bounds {
        limits,
        max_missing: limits.max_missing,
    };
    drive(id, filter, have, bounds, answers, || routes.end_of(), send).await
}

/// Runs the round `id`: sends its frames through `send` and reads the relay's answers from
/// `answers`; when those stop, `end_of` tells why.
async fn drive<S, E>(
    id: SubscriptionId,
    filter: Filter,
    have: Vec<(EventId, Timestamp)>,
    bounds: Bounds,
    answers: mpsc::Receiver<RelayMessage<'static>>,
    end_of: E,
    send: S,
) -> Result<NegentropyDiff, NegentropyError>
where
    S: Fn(ClientMessage<'_>) -> Result<(), NegentropyError> + Sync,
    E: Fn() -> RouteEnd + Sync,
{
    let storage = storage_of(have)?;
    let mut client = Negentropy::borrowed(&storage, FRAME_SIZE_LIMIT).map_err(broken)?;
    let initial = client.initiate().map_err(broken)?;
    let mut round = Round {
        id,
        client,
        answered: false,
        closed_by_relay: false,
        missing: HashSet::new(),
        max_missing: bounds.max_missing,
        relay_lacks: HashSet::new(),
    };
    send(ClientMessage::NegOpen {
        subscription_id: Cow::Borrowed(&round.id),
        filter: Cow::Owned(filter),
        id_size: None,
        initial_message: Cow::Owned(hex::encode(initial)),
    })?;
    // The relay may stall mid-exchange: the deadline bounds the whole round.
    let outcome = tokio::time::timeout(
        bounds.limits.deadline,
        round.exchange(&send, answers, &end_of, bounds.limits),
    )
    .await
    .unwrap_or(Err(NegentropyError::Timeout));
    match outcome {
        Ok(()) => Ok(round.diff()),
        Err(error) => {
            // A relay that answered holds a session for the round; so may one whose answer
            // was lost. One that never answered may not know the verb at all.
            let lost = matches!(&error, NegentropyError::Protocol(_)) && !round.answered;
            if (round.answered || lost) && !round.closed_by_relay {
                // Best effort: if the connection just ended, so did the relay's session.
                let _ = send(ClientMessage::NegClose {
                    subscription_id: Cow::Borrowed(&round.id),
                });
            }
            Err(match error {
                // Whichever timer ended it, the NEG-OPEN went out and nothing answered it.
                NegentropyError::Timeout if !round.answered => NegentropyError::NoAnswer,
                other => other,
            })
        }
    }
}

/// One round in progress.
struct Round<'a> {
    /// The round's subscription ID, chosen by the round.
    id: SubscriptionId,
    /// The reconciliation's client side.
    client: Negentropy<'a, NegentropyStorageVector>,
    /// The relay answered the NEG-OPEN (NEG-MSG, NEG-ERR or CLOSED).
    answered: bool,
    /// The relay ended the round itself (NEG-ERR or CLOSED): no NEG-CLOSE is due.
    closed_by_relay: bool,
    /// IDs the relay holds that the "have" set lacks, at most `max_missing`.
    missing: HashSet<EventId>,
    max_missing: usize,
    /// IDs of the "have" set the relay lacks.
    relay_lacks: HashSet<EventId>,
}

impl Round<'_> {
    /// Reads the relay's answers until the reconciliation is complete (`Ok`) or something ends
    /// the round: a NEG-ERR or CLOSED for it, a NOTICE saying the verbs are unknown or the
    /// query rate is too high, the session ending, answers lost, a broken frame, or no first
    /// answer within `limits.first_answer`.
    async fn exchange<S, E>(
        &mut self,
        send: &S,
        mut answers: mpsc::Receiver<RelayMessage<'static>>,
        end_of: &E,
        limits: RoundLimits,
    ) -> Result<(), NegentropyError>
    where
        S: Fn(ClientMessage<'_>) -> Result<(), NegentropyError> + Sync,
        E: Fn() -> RouteEnd + Sync,
    {
        let first_answer = tokio::time::sleep(limits.first_answer);
        tokio::pin!(first_answer);
        loop {
            let received = tokio::select! {
                received = answers.recv() => received,
                () = &mut first_answer, if !self.answered => return Err(NegentropyError::NoAnswer),
            };
            let Some(message) = received else {
                return Err(match end_of() {
                    RouteEnd::SessionEnded => NegentropyError::NotConnected,
                    // An answer may be among the lost messages: the diff would be partial.
                    RouteEnd::AnswersLost => {
                        NegentropyError::Protocol("answers lost during the round".to_owned())
                    }
                });
            };
            match message {
                RelayMessage::NegMsg {
                    subscription_id,
                    message,
                } if *subscription_id == self.id => {
                    self.answered = true;
                    if self.reconcile(send, &message)? {
                        return Ok(());
                    }
                }
                RelayMessage::NegErr {
                    subscription_id,
                    message,
                }
                | RelayMessage::Closed {
                    subscription_id,
                    message,
                } if *subscription_id == self.id => {
                    self.answered = true;
                    self.closed_by_relay = true;
                    return Err(classify_refusal(&message));
                }
                RelayMessage::Notice(text) => {
                    if let Some(error) = notice_ends_round(&text, limits.probe) {
                        return Err(error);
                    }
                }
                _ => {}
            }
        }
    }

    /// Reconciles one NEG-MSG and sends the next one, or NEG-CLOSE when the reconciliation is
    /// complete (then `true`).
    fn reconcile<S>(&mut self, send: &S, message: &str) -> Result<bool, NegentropyError>
    where
        S: Fn(ClientMessage<'_>) -> Result<(), NegentropyError>,
    {
        let query = hex::decode(message)
            .map_err(|error| NegentropyError::Protocol(format!("undecodable NEG-MSG: {error}")))?;
        let mut have = Vec::new();
        let mut need = Vec::new();
        let next = self
            .client
            .reconcile_with_ids(&query, &mut have, &mut need)
            .map_err(broken)?;
        self.relay_lacks.extend(have.into_iter().map(event_id));
        self.missing.extend(need.into_iter().map(event_id));
        if self.missing.len() > self.max_missing {
            return Err(NegentropyError::TooManyMissing(self.max_missing));
        }
        match next {
            Some(next) => {
                send(ClientMessage::NegMsg {
                    subscription_id: Cow::Borrowed(&self.id),
                    message: Cow::Owned(hex::encode(next)),
                })?;
                Ok(false)
            }
            None => {
                // The relay frees its session; the diff is complete whether or not this
                // reaches it.
                let _ = send(ClientMessage::NegClose {
                    subscription_id: Cow::Borrowed(&self.id),
                });
                Ok(true)
            }
        }
    }

    /// The complete round's diff.
    fn diff(self) -> NegentropyDiff {
        let mut missing: Vec<EventId> = self.missing.into_iter().collect();
        missing.sort_unstable();
        let mut relay_lacks: Vec<EventId> = self.relay_lacks.into_iter().collect();
        relay_lacks.sort_unstable();
        NegentropyDiff {
            missing,
            relay_lacks,
        }
    }
}

/// The "have" set as the reconciliation's sealed storage.
fn storage_of(have: Vec<(EventId, Timestamp)>) -> Result<NegentropyStorageVector, NegentropyError> {
    let mut storage = NegentropyStorageVector::with_capacity(have.len());
    for (id, created_at) in have {
        storage
            .insert(created_at.as_secs(), Id::from_byte_array(id.to_bytes()))
            .map_err(broken)?;
    }
    storage.seal().map_err(broken)?;
    Ok(storage)
}

fn event_id(id: Id) -> EventId {
    EventId::from_byte_array(*id)
}

fn broken(error: negentropy::Error) -> NegentropyError {
    NegentropyError::Protocol(error.to_string())
}
