//! `Gate`: the sans-IO state of one proxied connection. It reads each client message and
//! decides to forward it, refuse it with a real relay's text, or drop the connection, and it
//! reads the relay's messages to learn which subscriptions ended. Time comes in as an
//! argument.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use nostr::{ClientMessage, Filter, JsonUtil};
use serde_json::Value;
use tokio::time::Instant;

use super::ServeById;
use super::auth::{self, AuthRefusal, ConnectionAuth};
use super::texts::{self, Reply};
use super::{RefusalKind, StartKind, StrictLimits};

/// What to do with one client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Pass it to the relay unchanged.
    Forward,
    /// Answer the client with `frames`, in order, instead. When the refused REQ reused the ID
    /// of an open subscription, that subscription is over too (a `CLOSED` ends the ID), and
    /// `close_upstream` is the `CLOSE` that ends it at the relay.
    Refuse {
        frames: Vec<String>,
        refusal: RefusalKind,
        close_upstream: Option<String>,
    },
    /// Drop the connection without handling the message.
    Disconnect,
    /// Drop the message: neither forwarded nor answered.
    Ignore,
    /// Answer the message here (an `AUTH` the proxy checks) without forwarding it.
    Answer(String),
}

/// The verdict on one client message and the query start it was, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientOutcome {
    pub(crate) verdict: Verdict,
    pub(crate) start: Option<(StartKind, String, Vec<Filter>)>,
    /// The subscription ID a CLOSE ends.
    pub(crate) closes: Option<String>,
}

impl ClientOutcome {
    fn forward(start: Option<(StartKind, String, Vec<Filter>)>) -> Self {
        Self {
            verdict: Verdict::Forward,
            start,
            closes: None,
        }
    }

    /// The refusal kind, if the message was refused.
    pub(crate) fn refusal(&self) -> Option<RefusalKind> {
        match &self.verdict {
            Verdict::Refuse { refusal, .. } => Some(*refusal),
            _ => None,
        }
    }
}

/// Per-connection limit state.
#[derive(Debug)]
pub(crate) struct Gate {
    limits: Arc<StrictLimits>,
    /// Open REQ subscriptions and the bytes of the REQ that opened each.
    subscriptions: HashMap<String, usize>,
    /// Open negentropy sessions.
    negentropy: HashSet<String>,
    /// Sum of `subscriptions` values.
    retained_bytes: usize,
    /// Accepted query starts within the last `query_window`.
    window: VecDeque<Instant>,
    /// Client text messages read.
    messages: u64,
    /// Open subscriptions asking only for exact IDs (see `serve_by_id_percent`).
    by_id: HashSet<String>,
    /// NIP-42, when the proxy enforces it.
    auth: Option<ConnectionAuth>,
}

impl Gate {
    pub(crate) fn new(limits: Arc<StrictLimits>) -> Self {
        Self {
            subscriptions: HashMap::new(),
            negentropy: HashSet::new(),
            retained_bytes: 0,
            window: VecDeque::new(),
            messages: 0,
            by_id: HashSet::new(),
            auth: limits.auth.as_ref().map(|_| ConnectionAuth::new()),
            limits,
        }
    }

    /// Whether REQ subscription `id` is open.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.subscriptions.contains_key(id)
    }

    /// Open REQ subscriptions and negentropy sessions.
    pub(crate) fn open(&self) -> (usize, usize) {
        (self.subscriptions.len(), self.negentropy.len())
    }

    /// Decides on one client text message read at `now`.
    pub(crate) fn handle_client(&mut self, now: Instant, text: &str) -> ClientOutcome {
        self.messages += 1;
        if let Some(budget) = self.limits.disconnect_after_messages
            && self.messages > budget
        {
            return ClientOutcome {
                verdict: Verdict::Disconnect,
                start: None,
                closes: None,
            };
        }
        // Anything we cannot parse goes to the relay, which answers it its own way.
        let Ok(message) = ClientMessage::from_json(text) else {
            return ClientOutcome::forward(None);
        };
        match message {
            ClientMessage::Req {
                subscription_id,
                filters,
            } => {
                let id = subscription_id.to_string();
                let filters: Vec<Filter> = filters.into_iter().map(|f| f.into_owned()).collect();
                let by_id = !filters.is_empty() && filters.iter().all(|f| f.ids.is_some());
                let outcome = self.handle_req(now, id.clone(), &filters, text.len());
                // After the request's own bookkeeping, which forgets a replaced subscription.
                if by_id && matches!(outcome.verdict, Verdict::Forward) {
                    self.by_id.insert(id);
                } else {
                    self.by_id.remove(&id);
                }
                outcome
            }
            ClientMessage::Close(subscription_id) => {
                self.end_subscription(subscription_id.as_str());
                ClientOutcome {
                    closes: Some(subscription_id.to_string()),
                    ..ClientOutcome::forward(None)
                }
            }
            ClientMessage::NegOpen {
                subscription_id,
                filter,
                ..
            } => self.handle_neg_open(now, subscription_id.to_string(), &filter),
            ClientMessage::NegMsg {
                subscription_id, ..
            } => self.negentropy_message(subscription_id.as_str(), false),
            ClientMessage::NegClose { subscription_id } => {
                self.negentropy_message(subscription_id.as_str(), true)
            }
            ClientMessage::Auth(event) => match (&self.limits.auth, self.auth.as_mut()) {
                (Some(rules), Some(state)) => ClientOutcome {
                    verdict: Verdict::Answer(state.handle_auth(rules, &event)),
                    start: None,
                    closes: None,
                },
                _ => ClientOutcome::forward(None),
            },
            _ => ClientOutcome::forward(None),
        }
    }

    /// Whether an `EVENT` frame from the relay is withheld (`serve_by_id_percent`).
    pub(crate) fn withholds(&self, text: &str) -> bool {
        let Some(percent) = self.limits.serve_by_id.as_ref().map(ServeById::percent) else {
            return false;
        };
        let Ok(serde_json::Value::Array(parts)) = serde_json::from_str::<serde_json::Value>(text)
        else {
            return false;
        };
        let (Some(sub), Some(id)) = (
            parts.get(1).and_then(serde_json::Value::as_str),
            parts
                .get(2)
                .and_then(|e| e.get("id"))
                .and_then(serde_json::Value::as_str),
        ) else {
            return false;
        };
        if !self.by_id.contains(sub) {
            return false;
        }
        // The first byte of the ID spreads events evenly over 0..256.
        let byte = u8::from_str_radix(id.get(..2).unwrap_or("00"), 16).unwrap_or(0);
        u32::from(byte) * 100 >= u32::from(percent) * 256
    }

    /// Reads one relay text message; returns whether it is an `EVENT`.
    pub(crate) fn handle_relay(&mut self, text: &str) -> bool {
        if text.starts_with("[\"EVENT\"") {
            return true;
        }
        if text.starts_with("[\"CLOSED\"") {
            if let Some(id) = subscription_id(text) {
                self.end_subscription(&id);
            }
        } else if text.starts_with("[\"NEG-ERR\"")
            && let Some(id) = subscription_id(text)
        {
            self.negentropy.remove(&id);
        }
        false
    }

    fn handle_req(
        &mut self,
        now: Instant,
        id: String,
        filters: &[Filter],
        size: usize,
    ) -> ClientOutcome {
        let limits = Arc::clone(&self.limits);
        let start = Some((StartKind::Req, id.clone(), filters.to_vec()));
        let replacing = self.subscriptions.get(&id).copied();
        let refuse = |gate: &mut Self, reply: Reply, refusal| {
            let close_upstream = match (&reply, replacing) {
                (Reply::Closed(_), Some(_)) => {
                    gate.end_subscription(&id);
                    Some(ClientMessage::close(nostr::SubscriptionId::new(&id)).as_json())
                }
                _ => None,
            };
            ClientOutcome {
                verdict: Verdict::Refuse {
                    frames: vec![reply.frame(&id)],
                    refusal,
                    close_upstream,
                },
                start: start.clone(),
                closes: None,
            }
        };
        if !self.take_query(now) {
            let reply = Reply::Closed(texts::TOO_MANY_QUERIES.to_owned());
            return refuse(self, reply, RefusalKind::TooManyQueries);
        }
        if let Some(limit) = limits.subscriptions
            && replacing.is_none()
            && self.budget_in_use(limit.counts_negentropy) >= limit.max
        {
            let reply = texts::too_many_subscriptions(limit.dialect, limit.max);
            return refuse(self, reply, RefusalKind::TooManySubscriptions);
        }
        if let Some(limit) = limits.filters_per_req
            && filters.len() > limit.max
        {
            let reply = texts::too_many_filters(limit.dialect, limit.max, filters.len());
            return refuse(self, reply, RefusalKind::TooManyFilters);
        }
        if let Some(max) = limits.retained_req_bytes {
            let held = self.retained_bytes - replacing.unwrap_or(0);
            if held.saturating_add(size) > max {
                let reply = texts::retained_bytes_exceeded(max);
                return refuse(self, reply, RefusalKind::RetainedBytesExceeded);
            }
        }
        if let Some(answer) = self.auth_refusal(filters) {
            let text = auth::AUTH_REQUIRED.to_owned();
            let mut frames = self.pending_frames();
            if answer != AuthRefusal::Closed {
                frames.push(Reply::Notice(text.clone()).frame(&id));
            }
            let mut close_upstream = None;
            if answer != AuthRefusal::Notice {
                frames.push(Reply::Closed(text).frame(&id));
                if replacing.is_some() {
                    self.end_subscription(&id);
                    close_upstream =
                        Some(ClientMessage::close(nostr::SubscriptionId::new(&id)).as_json());
                }
            }
            // With a NOTICE alone the subscription is never opened, and nothing names it.
            return ClientOutcome {
                verdict: Verdict::Refuse {
                    frames,
                    refusal: RefusalKind::AuthRequired,
                    close_upstream,
                },
                start,
                closes: None,
            };
        }
        if let Some(rule) = limits
            .policies
            .iter()
            .find(|rule| filters.iter().any(|f| rule.matches.matches(f)))
        {
            let reply = Reply::Closed(rule.reason.clone());
            return refuse(self, reply, RefusalKind::Policy);
        }
        self.end_subscription(&id);
        self.retained_bytes += size;
        self.subscriptions.insert(id, size);
        ClientOutcome::forward(start)
    }

    fn handle_neg_open(&mut self, now: Instant, id: String, filter: &Filter) -> ClientOutcome {
        let limits = Arc::clone(&self.limits);
        let start = Some((StartKind::NegOpen, id.clone(), vec![filter.clone()]));
        let refuse = |reply: Reply, refusal| ClientOutcome {
            verdict: Verdict::Refuse {
                frames: vec![reply.frame(&id)],
                refusal,
                close_upstream: None,
            },
            start: start.clone(),
            closes: None,
        };
        if limits.ignore_neg_open {
            return ClientOutcome {
                verdict: Verdict::Ignore,
                start,
                closes: None,
            };
        }
        if !limits.negentropy_enabled {
            let reply = Reply::Notice(texts::NEGENTROPY_DISABLED.to_owned());
            return refuse(reply, RefusalKind::NegentropyDisabled);
        }
        if !self.take_query(now) {
            let reply = Reply::NegErr(texts::TOO_MANY_QUERIES.to_owned());
            return refuse(reply, RefusalKind::TooManyQueries);
        }
        let replacing = self.negentropy.contains(&id);
        let over_own_cap = limits
            .concurrent_negentropy
            .is_some_and(|max| self.negentropy.len() >= max);
        let over_shared_cap = limits
            .subscriptions
            .is_some_and(|l| l.counts_negentropy && self.budget_in_use(true) >= l.max);
        if !replacing && (over_own_cap || over_shared_cap) {
            let reply = Reply::Notice(texts::TOO_MANY_CONCURRENT_NEG.to_owned());
            return refuse(reply, RefusalKind::TooManyConcurrentNeg);
        }
        if self.auth_refusal(std::slice::from_ref(filter)).is_some() {
            let mut frames = self.pending_frames();
            frames.push(Reply::NegErr(auth::AUTH_REQUIRED.to_owned()).frame(&id));
            return ClientOutcome {
                verdict: Verdict::Refuse {
                    frames,
                    refusal: RefusalKind::AuthRequired,
                    close_upstream: None,
                },
                start,
                closes: None,
            };
        }
        if let Some(rule) = limits.policies.iter().find(|r| r.matches.matches(filter)) {
            return refuse(Reply::NegErr(rule.reason.clone()), RefusalKind::Policy);
        }
        self.negentropy.insert(id);
        ClientOutcome::forward(start)
    }

    /// NEG-MSG and NEG-CLOSE: dropped when NEG-OPENs are ignored, refused when NIP-77 is off,
    /// else forwarded (a NEG-CLOSE ends the session).
    fn negentropy_message(&mut self, id: &str, closes: bool) -> ClientOutcome {
        if self.limits.ignore_neg_open {
            return ClientOutcome {
                verdict: Verdict::Ignore,
                start: None,
                closes: None,
            };
        }
        if !self.limits.negentropy_enabled {
            return ClientOutcome {
                verdict: Verdict::Refuse {
                    frames: vec![Reply::Notice(texts::NEGENTROPY_DISABLED.to_owned()).frame(id)],
                    refusal: RefusalKind::NegentropyDisabled,
                    close_upstream: None,
                },
                start: None,
                closes: None,
            };
        }
        if closes {
            self.negentropy.remove(id);
        }
        ClientOutcome::forward(None)
    }

    /// How a request with `filters` is refused for want of authentication, if it is.
    fn auth_refusal(&self, filters: &[Filter]) -> Option<AuthRefusal> {
        let rules = self.limits.auth.as_ref()?;
        let state = self.auth.as_ref()?;
        state.refuses(rules, filters).then_some(rules.refusal)
    }

    /// Frames due before a refusal: the NIP-42 challenge, the first time the connection is
    /// refused for want of authentication.
    fn pending_frames(&mut self) -> Vec<String> {
        match (&self.limits.auth, self.auth.as_mut()) {
            (Some(_), Some(state)) => state.challenge_frames(),
            _ => Vec::new(),
        }
    }

    /// Slots in use: REQ subscriptions, plus negentropy sessions when they share the budget.
    fn budget_in_use(&self, counts_negentropy: bool) -> usize {
        let negentropy = if counts_negentropy {
            self.negentropy.len()
        } else {
            0
        };
        self.subscriptions.len() + negentropy
    }

    /// Takes one query start from the allowance at `now`; false when it is used up.
    fn take_query(&mut self, now: Instant) -> bool {
        let Some(allowance) = self.limits.queries_per_minute else {
            return true;
        };
        let span = self.limits.query_window;
        while self
            .window
            .front()
            .is_some_and(|first| now.saturating_duration_since(*first) >= span)
        {
            self.window.pop_front();
        }
        if self.window.len() >= allowance as usize {
            return false;
        }
        self.window.push_back(now);
        true
    }

    /// Forgets subscription `id` and releases its bytes.
    fn end_subscription(&mut self, id: &str) {
        self.by_id.remove(id);
        if let Some(size) = self.subscriptions.remove(id) {
            self.retained_bytes -= size;
        }
    }
}

/// The subscription ID (second element) of a relay message.
fn subscription_id(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text).ok()?;
    value.get(1)?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests;
