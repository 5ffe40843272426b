//! NIP-42 enforced by the strict proxy itself: which filters need an authenticated
//! connection ([`StrictAuth`]), how a refused request is answered ([`AuthRefusal`], after the
//! relays that answer that way), and the per-connection state that issues the challenge and
//! checks the client's `AUTH`.
//!
//! The model is strfry's NIP-42 read restriction: a REQ or NEG-OPEN whose filters are all
//! restricted, from a connection not authenticated yet, is refused with
//! `auth-required: requested filter requires authentication`; the first such refusal on a
//! connection is preceded by `["AUTH", challenge]` (strfry sends its challenge once per
//! connection). An `AUTH` naming that challenge, of kind 22242 and validly signed, is answered
//! `OK` true (or `OK` false when the relay accepts nobody's key) and never reaches the relay
//! behind the proxy.

use nostr::{Event, JsonUtil, Kind, RelayMessage, TagKind, TagStandard};

use super::FilterPredicate;

/// strfry's refusal of a restricted filter from a connection not authenticated.
pub(super) const AUTH_REQUIRED: &str = "auth-required: requested filter requires authentication";

/// NIP-42 enforced by the proxy. Build it with [`StrictAuth::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrictAuth {
    /// Filters served to authenticated connections only (strfry: its restricted kinds). A
    /// request is refused when every one of its filters matches.
    pub restricted: FilterPredicate,
    /// How a refused REQ is answered (a NEG-OPEN always gets `NEG-ERR`, as strfry and khatru
    /// answer it).
    pub refusal: AuthRefusal,
    /// Whether a valid `AUTH` is accepted.
    pub accepts: AuthAccepts,
}

impl StrictAuth {
    /// Filters matching `restricted` need authentication; REQs refused by `CLOSED`; any
    /// valid `AUTH` accepted.
    pub fn new(restricted: FilterPredicate) -> Self {
        Self {
            restricted,
            refusal: AuthRefusal::Closed,
            accepts: AuthAccepts::Anyone,
        }
    }
}

/// How a REQ refused for want of authentication is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthRefusal {
    /// strfry and khatru: `["CLOSED", id, "auth-required: ..."]`.
    Closed,
    /// `["NOTICE", "auth-required: ..."]` and nothing else: no CLOSED, no EOSE, the
    /// subscription is never opened. A relay that reports the refusal in a NOTICE instead of
    /// the CLOSED NIP-42 asks for.
    Notice,
    /// nostrcheck-server: `["NOTICE", "auth-required: ..."]`, then `["CLOSED", id, ...]` with
    /// the same text (it then also closes the connection; the proxy keeps it open).
    NoticeThenClosed,
}

/// Whose `AUTH` the relay accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthAccepts {
    /// Any valid `AUTH` (strfry, khatru without an allow list).
    Anyone,
    /// No key: a members-only relay where the client is no member. A valid `AUTH` gets `OK`
    /// false `"restricted: not a member of this relay"`.
    Nobody,
}

/// One connection's NIP-42 state.
#[derive(Debug)]
pub(super) struct ConnectionAuth {
    challenge: String,
    challenged: bool,
    authenticated: bool,
}

impl ConnectionAuth {
    /// A connection not authenticated, with a fresh random challenge.
    pub(super) fn new() -> Self {
        Self {
            // A fresh key's public half: 32 random bytes in hex.
            challenge: nostr::Keys::generate().public_key().to_hex(),
            challenged: false,
            authenticated: false,
        }
    }

    /// Whether a request with `filters` is refused on this connection now.
    pub(super) fn refuses(&self, rules: &StrictAuth, filters: &[nostr::Filter]) -> bool {
        !self.authenticated
            && !filters.is_empty()
            && filters.iter().all(|f| rules.restricted.matches(f))
    }

    /// The frames sent before a refusal: the challenge, the first time only.
    pub(super) fn challenge_frames(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.challenged, true) {
            return Vec::new();
        }
        vec![
            RelayMessage::Auth {
                challenge: std::borrow::Cow::Owned(self.challenge.clone()),
            }
            .as_json(),
        ]
    }

    /// The client's `AUTH`: the `OK` frame answering it.
    pub(super) fn handle_auth(&mut self, rules: &StrictAuth, event: &Event) -> String {
        let (status, message) = match self.check(event) {
            Err(why) => (false, format!("auth-required: {why}")),
            Ok(()) if rules.accepts == AuthAccepts::Nobody => {
                (false, "restricted: not a member of this relay".to_owned())
            }
            Ok(()) => {
                self.authenticated = true;
                (true, String::new())
            }
        };
        RelayMessage::ok(event.id, status, message).as_json()
    }

    fn check(&self, event: &Event) -> Result<(), &'static str> {
        if event.kind != Kind::Authentication {
            return Err("wrong event kind, expected 22242");
        }
        if event.verify().is_err() {
            return Err("invalid signature");
        }
        let named = matches!(
            event.tags.find_standardized(TagKind::Challenge),
            Some(TagStandard::Challenge(c)) if *c == self.challenge
        );
        if !self.challenged || !named {
            return Err("challenge string mismatch");
        }
        Ok(())
    }
}
