//! The strict relay: per-connection limits a message proxy enforces in front of the relay,
//! answered with the texts real relays send, and the counters it keeps for assertions.
//!
//! Every limit is off by default ([`StrictLimits::default`] passes every message through).
//! Each refusal copies a named implementation: strfry, the rust-nostr relay builder,
//! nostream or rnostr (see [`Dialect`]). [`QueryQuirks`] change how accepted REQs are
//! answered, as relays that read NIP-01 differently answer them.

mod auth;
pub(crate) mod gate;
pub(crate) mod proxy;
mod quirks;
mod stats;
mod stored;
mod texts;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use nostr::{Filter, Kind};

pub use auth::{AuthAccepts, AuthRefusal, StrictAuth};
pub use quirks::{FilterCaps, QueryQuirks};
pub use stats::{
    ConnectionStats, FRAME_VERBS, QueryStart, RefusalKind, StartKind, StrictStats, frame_verb,
};

pub(crate) use stats::Recorder;

/// The rust-nostr relay builder's query window, [`StrictLimits::query_window`]'s default.
const DEFAULT_QUERY_WINDOW: Duration = Duration::from_secs(60);

/// Limits the proxy enforces on each client connection. Build it with struct update syntax
/// from `Default`, which enforces nothing.
///
/// When a REQ breaks several limits, the first in this order answers: query rate, open
/// subscriptions, filters per REQ, retained REQ bytes, policies; a REQ that passes them all
/// is answered with [`quirks`](Self::quirks). A NEG-OPEN is checked for being ignored, NIP-77
/// support, query rate, concurrent negentropy sessions, the shared subscription budget, then
/// policies. [`auth`](Self::auth) is checked just before the policies, for both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrictLimits {
    /// Open REQ subscriptions per connection.
    pub subscriptions: Option<SubscriptionLimit>,
    /// Filters in one REQ.
    pub filters_per_req: Option<FilterLimit>,
    /// Bytes of REQ messages the open subscriptions may hold together, as the rust-nostr
    /// relay builder counts them (the whole REQ frame). Refused with `CLOSED
    /// "rate-limited: active subscriptions exceed max size N bytes"`. Never advertised:
    /// NIP-11 has no field for it.
    pub retained_req_bytes: Option<usize>,
    /// REQ and NEG-OPEN starts allowed in any [`query_window`](Self::query_window) per
    /// connection (a minute unless changed, hence the name), as the rust-nostr relay builder's
    /// query allowance. A REQ past it gets `CLOSED "rate-limited: too many queries"`, a
    /// NEG-OPEN `NEG-ERR` with the same text. A start refused by this check does not use the
    /// allowance; one refused by a later check does, as in the rust-nostr relay builder. Never
    /// advertised. The window runs on the tokio clock, so paused time moves it.
    pub queries_per_minute: Option<u32>,
    /// The sliding window [`queries_per_minute`](Self::queries_per_minute) counts starts in
    /// (default 60 s, the rust-nostr relay builder's). Each accepted start leaves the window
    /// this long after it was read, freeing one start. A shorter window lets an end-to-end test
    /// reach the allowance and see it refill in seconds.
    pub query_window: Duration,
    /// Negentropy sessions open at once per connection. One more NEG-OPEN gets strfry's
    /// `NOTICE "ERROR: too many concurrent NEG requests"`. Never advertised.
    pub concurrent_negentropy: Option<usize>,
    /// Whether NIP-77 is served. When not, every NEG-OPEN, NEG-MSG and NEG-CLOSE gets
    /// strfry's `NOTICE "ERROR: bad msg: negentropy disabled"`, which nostr-sdk 0.44 reports
    /// as `NegentropyNotSupported` at once (it needs "bad msg" and "negentropy", "NEG-" or
    /// "unknown cmd" in the NOTICE). NIP-11 still lists NIP-77 unless
    /// `TestRelayConfig::advertise_negentropy` is false.
    pub negentropy_enabled: bool,
    /// Every NEG-OPEN, NEG-MSG and NEG-CLOSE is dropped without an answer: no NEG-MSG, no
    /// NEG-ERR, no NOTICE, ever. khatru does this with a NEG-OPEN whose filter routes to a
    /// sub-relay that has NIP-77 off; a relay that lists NIP-77 in NIP-11 but runs behind a
    /// proxy that filters unknown verbs looks the same. The NEG-OPEN still counts as a start
    /// ([`StrictStats::neg_opens`]). Takes precedence over
    /// [`negentropy_enabled`](Self::negentropy_enabled); NIP-11 still lists NIP-77 unless
    /// `TestRelayConfig::advertise_negentropy` is false. Off by default.
    pub ignore_neg_open: bool,
    /// REQs and NEG-OPENs with a filter matching a rule are refused with the rule's text.
    pub policies: Vec<PolicyRule>,
    /// NIP-42 enforced by the proxy (strfry's read restriction; see [`StrictAuth`]): the
    /// proxy issues the challenge, answers the client's `AUTH` itself and refuses restricted
    /// requests until it accepted one. Leave the relay's own `RelayAuth` off with it. `None`
    /// by default.
    pub auth: Option<StrictAuth>,
    /// The connection is dropped, without a close frame, when client message number `n + 1`
    /// arrives; the first `n` are handled normally.
    pub disconnect_after_messages: Option<u64>,
    /// Share of the events asked for by exact ID (a REQ whose every filter has `ids`) that
    /// are delivered; the rest are silently withheld, deterministically by event ID. Models a
    /// relay that advertises inventory in negentropy but cannot serve it by ID. The share can
    /// be changed while the relay runs (keep a clone). `None` serves everything.
    pub serve_by_id: Option<ServeById>,
    /// How accepted REQs are answered where real relays differ from the usual reading of
    /// NIP-01 (oldest first, exclusive `until`, a per-REQ cap, no EOSE for `limit: 0`).
    /// With `oldest_first_without_limit`, `exclusive_until` or `per_req_cap` on, the proxy
    /// answers a REQ's stored events itself from the relay's store, as
    /// [`QueryQuirks::answer`] says, then sends EOSE; the relay gets the same REQ with every
    /// `limit` set to 0 and serves its live events. Such an answer never ends with the
    /// rust-nostr relay builder's `CLOSED ""` after a REQ whose every ID was found. Events
    /// the proxy sends are counted and withheld (`serve_by_id`) like the relay's; a live
    /// event its answer already carried is not sent again. Off by default.
    pub quirks: QueryQuirks,
}

impl Default for StrictLimits {
    fn default() -> Self {
        Self {
            subscriptions: None,
            filters_per_req: None,
            retained_req_bytes: None,
            queries_per_minute: None,
            query_window: DEFAULT_QUERY_WINDOW,
            concurrent_negentropy: None,
            negentropy_enabled: true,
            ignore_neg_open: false,
            policies: Vec::new(),
            auth: None,
            disconnect_after_messages: None,
            serve_by_id: None,
            quirks: QueryQuirks::default(),
        }
    }
}

/// The share (0–100 %) of by-ID requested events a strict relay delivers; shared by its clones,
/// so a test can change it while the relay runs.
#[derive(Debug, Clone)]
pub struct ServeById(std::sync::Arc<std::sync::atomic::AtomicU8>);

impl ServeById {
    /// Delivers `percent` % of by-ID requested events (capped at 100).
    pub fn new(percent: u8) -> Self {
        Self(std::sync::Arc::new(std::sync::atomic::AtomicU8::new(
            percent.min(100),
        )))
    }

    /// Changes the share for every connection, from the next event on.
    pub fn set(&self, percent: u8) {
        self.0
            .store(percent.min(100), std::sync::atomic::Ordering::SeqCst);
    }

    /// The current share.
    pub fn percent(&self) -> u8 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl PartialEq for ServeById {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ServeById {}

/// The relay implementation whose refusal text a limit copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// strfry: `NOTICE "ERROR: too many concurrent REQs"` for subscriptions (no subscription
    /// ID), `CLOSED "ERROR: bad req: filter validation failed: invalid number of filters: N"`
    /// with `N` the submitted count for filters.
    Strfry,
    /// The rust-nostr relay builder: `CLOSED "rate-limited: too many REQs"` and `CLOSED
    /// "blocked: too many filters"`.
    RustNostr,
    /// nostream: `NOTICE "Subscription rejected: Too many subscriptions: Number of
    /// subscriptions must be less than or equal to MAX"` and `NOTICE "Subscription rejected:
    /// Too many filters: Number of filters per susbscription must be less then or equal to
    /// MAX"` (its spelling).
    Nostream,
    /// rnostr: `CLOSED "Number of subscriptions exceeds limit"` and `CLOSED "invalid:
    /// limitation.max_filters MAX"`, naming the refused REQ (rnostr sends `CLOSED` since
    /// August 2024; earlier releases sent both texts as a `NOTICE`).
    Rnostr,
}

/// A cap on open REQ subscriptions per connection. A REQ reusing an open subscription's ID
/// replaces it and needs no new slot; `CLOSE` from the client and `CLOSED` from the relay
/// free the slot, `EOSE` does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionLimit {
    /// Subscriptions allowed open at once.
    pub max: usize,
    /// Whose refusal text a REQ past the cap gets.
    pub dialect: Dialect,
    /// Whether open negentropy sessions take slots too (strfry shares the budget). A
    /// NEG-OPEN past the shared cap gets strfry's `NOTICE "ERROR: too many concurrent NEG
    /// requests"`.
    pub counts_negentropy: bool,
    /// Whether NIP-11 `limitation.max_subscriptions` states `max`.
    pub advertised: bool,
}

/// A cap on the filters of one REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterLimit {
    /// Filters allowed in one REQ.
    pub max: usize,
    /// Whose refusal text a REQ with more filters gets.
    pub dialect: Dialect,
    /// Whether NIP-11 `limitation.max_filters` states `max`.
    pub advertised: bool,
}

/// A query policy: REQs and NEG-OPENs with any filter matching `matches` are refused with
/// `reason` (`CLOSED` for a REQ, `NEG-ERR` for a NEG-OPEN, as the rust-nostr relay builder
/// answers its query policies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// Which filters the rule refuses.
    pub matches: FilterPredicate,
    /// The whole refusal text, with its NIP-01 prefix, for example `"blocked: no quotes"` or
    /// `"restricted: members only"`.
    pub reason: String,
}

impl PolicyRule {
    /// A rule refusing filters matching `matches` with `reason`.
    pub fn new(matches: FilterPredicate, reason: impl Into<String>) -> Self {
        Self {
            matches,
            reason: reason.into(),
        }
    }
}

/// Which filters a [`PolicyRule`] refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterPredicate {
    /// Filters with a tag condition on this letter (`'q'` matches a `#q` filter; case
    /// matters).
    Tag(char),
    /// Filters listing this kind.
    Kind(u16),
    /// Any filter the function accepts.
    Custom(FilterFn),
}

impl FilterPredicate {
    /// A predicate from a function.
    pub fn custom(f: impl Fn(&Filter) -> bool + Send + Sync + 'static) -> Self {
        Self::Custom(FilterFn(Arc::new(f)))
    }

    /// Whether `filter` matches.
    pub fn matches(&self, filter: &Filter) -> bool {
        match self {
            Self::Tag(letter) => filter
                .generic_tags
                .keys()
                .any(|tag| tag.as_char() == *letter),
            Self::Kind(kind) => filter
                .kinds
                .as_ref()
                .is_some_and(|kinds| kinds.contains(&Kind::from(*kind))),
            Self::Custom(f) => (f.0)(filter),
        }
    }
}

/// A filter predicate function; two are equal when they are the same function object.
#[derive(Clone)]
pub struct FilterFn(Arc<dyn Fn(&Filter) -> bool + Send + Sync>);

impl fmt::Debug for FilterFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FilterFn(..)")
    }
}

impl PartialEq for FilterFn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FilterFn {}
