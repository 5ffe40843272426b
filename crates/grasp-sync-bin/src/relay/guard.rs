//! [`Guard`]: the per-connection rules of the embedded relay, sans-IO. It reads each client
//! message (text, as received) at an instant the caller passes in, and says what happens to
//! it: forwarded to the relay unchanged, answered with a refusal, or served as a NIP-77 step.
//! It counts the connection's open subscriptions and NIP-77 sessions and paces its queries.
//!
//! Every refusal is a NIP-01 answer with a machine-readable prefix: `OK false` for an event,
//! `CLOSED` for a REQ or COUNT, `NEG-ERR` for a NEG-OPEN, `NOTICE` for what cannot be parsed.
//! The texts use the words other relays use ("too many subscriptions", "too many filters",
//! "too many concurrent NEG requests", "too many queries") so that clients which classify
//! refusals, grasp-sync among them, recognise them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use nostr::{ClientMessage, Event, Filter, JsonUtil, RelayMessage, SubscriptionId, Timestamp};

use super::limits::RelayLimits;

/// What to do with one client message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Pass the message to the relay unchanged.
    Forward,
    /// Send this to the client; nothing reaches the relay.
    Answer(String),
    /// Open (or replace) NIP-77 session `id` over `filter`, starting from `initial` (hex).
    NegOpen {
        id: SubscriptionId,
        filter: Box<Filter>,
        initial: String,
    },
    /// The next message (hex) of NIP-77 session `id`.
    NegMsg { id: SubscriptionId, message: String },
    /// NIP-77 session `id` is closed by the client; nothing is sent.
    NegClose { id: SubscriptionId },
}

/// The rules of one connection.
#[derive(Debug)]
pub(crate) struct Guard {
    limits: Arc<RelayLimits>,
    subscriptions: HashSet<SubscriptionId>,
    negentropy: HashSet<SubscriptionId>,
    queries: TokenBucket,
}

impl Guard {
    /// A fresh connection at `now`.
    pub(crate) fn new(limits: Arc<RelayLimits>, now: Instant) -> Guard {
        let queries = TokenBucket::full(limits.query_burst, limits.queries_per_second, now);
        Guard {
            limits,
            subscriptions: HashSet::new(),
            negentropy: HashSet::new(),
            queries,
        }
    }

    /// Open subscriptions.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn subscriptions(&self) -> usize {
        self.subscriptions.len()
    }

    /// Open NIP-77 sessions.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn negentropy_sessions(&self) -> usize {
        self.negentropy.len()
    }

    /// Judges one text message received at `now`, when the clock reads `unix_now`.
    pub(crate) fn handle_client(
        &mut self,
        text: &str,
        now: Instant,
        unix_now: Timestamp,
    ) -> Verdict {
        let message = match ClientMessage::from_json(text) {
            Ok(message) => message,
            Err(error) => {
                let mut reason = error.to_string();
                reason.truncate(200);
                return notice(format!("invalid: cannot parse the message: {reason}"));
            }
        };
        match message {
            ClientMessage::Event(event) => self.event(&event, unix_now),
            ClientMessage::Req {
                subscription_id,
                filters,
            } => self.req(subscription_id.into_owned(), filters.len(), now),
            ClientMessage::Count {
                subscription_id, ..
            } => self.count(subscription_id.into_owned(), now),
            ClientMessage::Close(subscription_id) => {
                self.subscriptions.remove(subscription_id.as_ref());
                Verdict::Forward
            }
            ClientMessage::Auth(_) => Verdict::Forward,
            ClientMessage::NegOpen {
                subscription_id,
                filter,
                initial_message,
                ..
            } => self.neg_open(
                subscription_id.into_owned(),
                filter.into_owned(),
                initial_message.into_owned(),
                now,
            ),
            ClientMessage::NegMsg {
                subscription_id,
                message,
            } => {
                let id = subscription_id.into_owned();
                if self.negentropy.contains(&id) {
                    Verdict::NegMsg {
                        id,
                        message: message.into_owned(),
                    }
                } else {
                    neg_err(id, "closed: no such NEG session".to_owned())
                }
            }
            ClientMessage::NegClose { subscription_id } => {
                let id = subscription_id.into_owned();
                self.negentropy.remove(&id);
                Verdict::NegClose { id }
            }
        }
    }

    /// The relay closed subscription `id` itself.
    pub(crate) fn relay_closed(&mut self, id: &SubscriptionId) {
        self.subscriptions.remove(id);
    }

    /// NIP-77 session `id` ended with an error sent to the client.
    pub(crate) fn negentropy_failed(&mut self, id: &SubscriptionId) {
        self.negentropy.remove(id);
    }

    fn event(&self, event: &Event, unix_now: Timestamp) -> Verdict {
        let limits = &self.limits;
        let content = event.content.chars().count();
        let window = limits.max_future_created_at.as_secs();
        let refusal = if event.created_at.as_secs() > unix_now.as_secs().saturating_add(window) {
            Some(format!(
                "invalid: created_at is more than {window} s in the future"
            ))
        } else if content > limits.max_content_length {
            Some(format!(
                "invalid: content is {content} characters, more than {}",
                limits.max_content_length
            ))
        } else if event.tags.len() > limits.max_event_tags {
            Some(format!(
                "invalid: {} tags, more than {}",
                event.tags.len(),
                limits.max_event_tags
            ))
        } else {
            None
        };
        match refusal {
            Some(message) => Verdict::Answer(RelayMessage::ok(event.id, false, message).as_json()),
            None => Verdict::Forward,
        }
    }

    fn req(&mut self, id: SubscriptionId, filters: usize, now: Instant) -> Verdict {
        if let Some(refusal) = self.query_refusal(&id, filters, now) {
            return closed(id, refusal);
        }
        if !self.subscriptions.contains(&id)
            && self.subscriptions.len() >= self.limits.max_subscriptions
        {
            return closed(
                id,
                format!(
                    "blocked: too many subscriptions: at most {} open per connection",
                    self.limits.max_subscriptions
                ),
            );
        }
        self.subscriptions.insert(id);
        Verdict::Forward
    }

    fn count(&mut self, id: SubscriptionId, now: Instant) -> Verdict {
        match self.query_refusal(&id, 1, now) {
            Some(refusal) => closed(id, refusal),
            None => Verdict::Forward,
        }
    }

    fn neg_open(
        &mut self,
        id: SubscriptionId,
        filter: Filter,
        initial: String,
        now: Instant,
    ) -> Verdict {
        if let Some(refusal) = self.query_refusal(&id, 1, now) {
            self.negentropy.remove(&id);
            return neg_err(id, refusal);
        }
        if !self.negentropy.contains(&id)
            && self.negentropy.len() >= self.limits.max_negentropy_sessions
        {
            return neg_err(
                id,
                format!(
                    "blocked: too many concurrent NEG requests: at most {} per connection",
                    self.limits.max_negentropy_sessions
                ),
            );
        }
        self.negentropy.insert(id.clone());
        Verdict::NegOpen {
            id,
            filter: Box::new(filter),
            initial,
        }
    }

    /// Why a query (REQ, COUNT, NEG-OPEN) of `filters` filters is refused, if it is. A
    /// refused query still takes from the rate budget, so a flood stays a flood.
    fn query_refusal(
        &mut self,
        id: &SubscriptionId,
        filters: usize,
        now: Instant,
    ) -> Option<String> {
        let limits = &self.limits;
        let paced = self.queries.take(now);
        if id.as_str().len() > limits.max_subid_length {
            return Some(format!(
                "invalid: subscription id is longer than {} characters",
                limits.max_subid_length
            ));
        }
        if filters > limits.max_filters {
            return Some(format!(
                "blocked: too many filters: at most {} per request",
                limits.max_filters
            ));
        }
        if !paced {
            return Some(format!(
                "rate-limited: too many queries: at most {} REQ, COUNT and NEG-OPEN per second",
                limits.queries_per_second
            ));
        }
        None
    }
}

fn notice(message: String) -> Verdict {
    Verdict::Answer(RelayMessage::notice(message).as_json())
}

fn closed(id: SubscriptionId, message: String) -> Verdict {
    Verdict::Answer(RelayMessage::closed(id, message).as_json())
}

fn neg_err(id: SubscriptionId, message: String) -> Verdict {
    Verdict::Answer(
        RelayMessage::NegErr {
            subscription_id: std::borrow::Cow::Owned(id),
            message: std::borrow::Cow::Owned(message),
        }
        .as_json(),
    )
}

/// Tokens refilled continuously at `per_second`, up to `capacity`, on injected time.
#[derive(Debug)]
struct TokenBucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    fn full(capacity: u32, per_second: u32, now: Instant) -> TokenBucket {
        let capacity = f64::from(capacity.max(1));
        TokenBucket {
            capacity,
            per_second: f64::from(per_second),
            tokens: capacity,
            at: now,
        }
    }

    /// Takes one token at `now`, if there is one.
    fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = self.at.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests;
