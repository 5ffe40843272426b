//! One NIP-77 dry-run round over nostr-sdk's `Relay::sync_with_items`, bounded by a deadline,
//! and the per-session bookkeeping that tells which relay answers belong to which round.
//!
//! The client library picks the round's subscription ID and never shows it. The session learns
//! it from the relay's first answer: openings are serialised (one round at a time between
//! NEG-OPEN and that answer), so the first NEG-MSG or NEG-ERR with an ID no earlier round used
//! is this round's. A CLOSED for such an ID also counts when the ID has the library's shape and
//! no open REQ of the engine uses it; the library itself does not recognise a CLOSED and would
//! wait out its whole initial timeout. Knowing the ID lets a round that ends early (deadline,
//! refusal NOTICE, broken frame) send NEG-CLOSE, so the relay frees the negentropy session that
//! strfry-family relays count against the subscription budget. A round whose NEG-OPEN went out
//! and got no answer within its first-answer deadline ends as `NoAnswer`, so the engine can tell
//! a relay that ignores the verb from one that answered and then stalled.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use nostr::{ClientMessage, EventId, Filter, RelayMessage, SubscriptionId, Timestamp};
use nostr_sdk::pool::{RelayNotification, RelayStatus};
use nostr_sdk::{Relay, SyncOptions};
use tokio::sync::{MutexGuard, broadcast};

use crate::transport::negentropy::{
    NegentropyDiff, NegentropyError, RoundLimits, classify_refusal, notice_ends_round,
};

/// What one session knows about its negentropy rounds and REQs.
#[derive(Debug, Default)]
pub(super) struct NegRounds {
    /// Held from a round's start until its subscription ID is known.
    opening: tokio::sync::Mutex<()>,
    /// IDs of the engine's REQs not yet closed by the engine.
    open_reqs: Mutex<HashSet<SubscriptionId>>,
    /// Every round ID seen on this session (one per round; never reused by a later round).
    seen_rounds: Mutex<HashSet<SubscriptionId>>,
}

impl NegRounds {
    /// The engine sent a REQ with this ID.
    pub(super) fn handle_req(&self, id: &SubscriptionId) {
        lock(&self.open_reqs).insert(id.clone());
    }

    /// The engine closed the REQ with this ID.
    pub(super) fn handle_close(&self, id: &SubscriptionId) {
        lock(&self.open_reqs).remove(id);
    }

    /// Runs one dry-run round; it ends by `limits.deadline` whatever the relay does, and by
    /// `limits.first_answer` after the NEG-OPEN when the relay does not answer it.
    pub(super) async fn run(
        &self,
        relay: &Relay,
        filter: Filter,
        have: Vec<(EventId, Timestamp)>,
        limits: RoundLimits,
    ) -> Result<NegentropyDiff, NegentropyError> {
        let mut state = RoundState::default();
        let round = async {
            state.opening = Some(self.opening.lock().await);
            // The library queues silently on a relay that is gone: check first.
            if !relay.is_connected() {
                return Err(NegentropyError::NotConnected);
            }
            // Subscribe before the NEG-OPEN goes out so no answer is missed.
            let notifications = relay.notifications();
            // Dry run: the library neither uploads nor downloads, it only reconciles.
            let options = SyncOptions::default()
                .dry_run()
                .initial_timeout(limits.first_answer);
            let sync = relay.sync_with_items(filter, have, &options);
            state.sent = true;
            let watch = self.watch(notifications, &mut state, limits);
            // The watcher first: when a NOTICE or CLOSED ends the round, the library may see
            // it at the same time and report it less precisely.
            tokio::select! {
                biased;
                refusal = watch => Err(refusal),
                result = sync => result.map_err(from_sdk_error),
            }
        };
        // The library has no idle timeout: a stalled exchange never returns on its own.
        let mut outcome = tokio::time::timeout(limits.deadline, round)
            .await
            .unwrap_or(Err(NegentropyError::Timeout));
        state.opening = None;
        if matches!(outcome, Err(NegentropyError::Timeout)) && state.sent && state.id.is_none() {
            // Whichever timer ended it (ours, the library's initial one or the whole
            // deadline), the NEG-OPEN went out and nothing answered it.
            outcome = Err(NegentropyError::NoAnswer);
        }
        if outcome.is_err()
            && !state.closed_by_relay
            && let Some(id) = state.id.take()
            && relay.is_connected()
        {
            // Best effort: if the connection just ended, so did the relay's session.
            let _ = relay.send_msg(ClientMessage::NegClose {
                subscription_id: Cow::Owned(id),
            });
        }
        let reconciliation = outcome?;
        if state.lagged {
            // The library's own receiver may have lagged too, which ends its loop early with a
            // partial result that looks complete.
            return Err(NegentropyError::Protocol(
                "notifications lagged during the round".to_owned(),
            ));
        }
        let mut missing: Vec<EventId> = reconciliation.remote.into_iter().collect();
        missing.sort_unstable();
        Ok(NegentropyDiff {
            missing,
            relay_lacks: reconciliation.local.len(),
        })
    }

    /// Watches the connection during a round: learns the round's ID, and ends the round on
    /// what the library does not recognise (a CLOSED for it, a NOTICE saying the verbs are
    /// unknown, a query-rate NOTICE, the connection ending before the first answer) and when
    /// no first answer came within `limits.first_answer`. Never returns on its own otherwise.
    async fn watch<'a>(
        &'a self,
        mut notifications: broadcast::Receiver<RelayNotification>,
        state: &mut RoundState<'a>,
        limits: RoundLimits,
    ) -> NegentropyError {
        let first_answer = tokio::time::sleep(limits.first_answer);
        tokio::pin!(first_answer);
        loop {
            let received = tokio::select! {
                received = notifications.recv() => received,
                () = &mut first_answer, if state.id.is_none() => return NegentropyError::NoAnswer,
            };
            let message = match received {
                Ok(RelayNotification::Message { message }) => message,
                // The library notices a lost connection only after the relay's first answer.
                Ok(RelayNotification::RelayStatus {
                    status:
                        RelayStatus::Disconnected
                        | RelayStatus::Terminated
                        | RelayStatus::Banned
                        | RelayStatus::Sleeping,
                }) => return NegentropyError::NotConnected,
                Ok(RelayNotification::Shutdown) => return NegentropyError::NotConnected,
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    state.lagged = true;
                    continue;
                }
                // The library reports the end of the connection itself.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            };
            match message {
                RelayMessage::NegMsg {
                    subscription_id, ..
                } => {
                    self.claim(state, &subscription_id);
                }
                RelayMessage::NegErr {
                    subscription_id, ..
                } => {
                    // The library reports the error; the relay has closed the round.
                    let ours = self.claim(state, &subscription_id);
                    state.closed_by_relay |= ours;
                }
                RelayMessage::Closed {
                    subscription_id,
                    message,
                } => {
                    let ours = state.id.as_ref() == Some(subscription_id.as_ref())
                        || (state.id.is_none()
                            && library_shaped(&subscription_id)
                            && !lock(&self.open_reqs).contains(subscription_id.as_ref())
                            && self.claim(state, &subscription_id));
                    if ours {
                        state.closed_by_relay = true;
                        return classify_refusal(&message);
                    }
                }
                RelayMessage::Notice(text) => {
                    if let Some(error) = notice_ends_round(&text, limits.probe) {
                        return error;
                    }
                }
                _ => {}
            }
        }
    }

    /// Whether `id` is this round's: it is already known as such, or the round is still
    /// opening and no earlier round used the ID (which then becomes the round's and ends the
    /// opening).
    fn claim<'a>(&'a self, state: &mut RoundState<'a>, id: &SubscriptionId) -> bool {
        if let Some(known) = &state.id {
            return known == id;
        }
        if !lock(&self.seen_rounds).insert(id.clone()) {
            return false;
        }
        state.id = Some(id.clone());
        state.opening = None;
        true
    }
}

/// What a round learns while it runs.
#[derive(Debug, Default)]
struct RoundState<'a> {
    /// The opening lock, until the round's ID is known or the round ends.
    opening: Option<MutexGuard<'a, ()>>,
    /// The NEG-OPEN was handed to the library (the round had its turn to open).
    sent: bool,
    /// The round's subscription ID, once the relay answered.
    id: Option<SubscriptionId>,
    /// The relay ended the round itself (NEG-ERR or CLOSED): no NEG-CLOSE is due.
    closed_by_relay: bool,
    /// The notification channel lost messages during the round.
    lagged: bool,
}

/// Whether an ID looks like the client library's generated ones (32 lowercase hex digits).
fn library_shaped(id: &SubscriptionId) -> bool {
    let text = id.as_str();
    text.len() == 32
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Maps a client-library error from a negentropy round.
fn from_sdk_error(error: nostr_sdk::pool::relay::Error) -> NegentropyError {
    use nostr_sdk::pool::relay::Error;
    match error {
        Error::NegentropyNotSupported => NegentropyError::Unsupported,
        Error::Timeout => NegentropyError::Timeout,
        // A NEG-ERR: the relay's text, verbatim.
        Error::RelayMessage(text) => classify_refusal(&text),
        Error::NotConnected
        | Error::NotReady
        | Error::Sleeping
        | Error::Banned
        | Error::ReceivedShutdown
        | Error::TerminationRequest
        | Error::Transport(_) => NegentropyError::NotConnected,
        other => NegentropyError::Protocol(other.to_string()),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
