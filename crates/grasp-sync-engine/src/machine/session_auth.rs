//! `SessionAuth`: what one session knows about NIP-42 authentication, and the work a relay
//! refused with `auth-required:` while the session's AUTH was still to come.
//!
//! Pure bookkeeping, time passed in, generic over what is parked (the actor parks repository
//! coverage, NIP-77 rounds and participant-discovery requests). A session that holds no key
//! refuses nothing here: its `auth-required:` refusals are policy refusals at once. A session
//! with a key parks refused work until the relay accepts its AUTH (then the work is sent again,
//! once, through the ledger like any other work: coverage derived again, a discovery request
//! in its batch), until the AUTH fails, or until [`AUTH_WAIT`] has passed without an outcome
//! (then the parked work is refused by policy). Once the session has authenticated, or failed
//! to, every later `auth-required:` refusal is a policy refusal, so no work is retried twice.

use std::time::{Duration, Instant};

/// How long refused coverage waits for the session's AUTH to succeed: the client library
/// waits up to 10 s for the relay's `OK`, and a relay may send its challenge only with a
/// refusal.
pub const AUTH_WAIT: Duration = Duration::from_secs(15);

/// Refused requests parked per session at most; one more is refused by policy at once. A
/// session holds far fewer requests than this (its subscription budget).
pub const MAX_PARKED: usize = 1_024;

/// Where a session's NIP-42 authentication stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthState {
    /// No challenge answered yet.
    Unchallenged,
    /// A challenge arrived and the session's AUTH is on its way.
    Authenticating,
    /// The relay accepted the session's AUTH.
    Authenticated,
    /// The AUTH failed or never got an answer: nothing more is retried on this session.
    Failed,
}

impl AuthState {
    /// A stable lowercase label, for the status snapshot.
    pub fn label(self) -> &'static str {
        match self {
            AuthState::Unchallenged => "unchallenged",
            AuthState::Authenticating => "authenticating",
            AuthState::Authenticated => "authenticated",
            AuthState::Failed => "failed",
        }
    }
}

/// What to do with an `auth-required:` refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthVerdict {
    /// Parked: release the refused work without a pause; it is sent again once the session
    /// authenticated.
    Park,
    /// Refused for want of an AUTH the relay has accepted since the request was sent: send it
    /// again now, once.
    Resend,
    /// A policy refusal of the refused coverage.
    Refuse,
}

/// One session's NIP-42 state and the work `W` parked for it.
#[derive(Debug)]
pub struct SessionAuth<W> {
    answers: bool,
    state: AuthState,
    parked: Vec<W>,
    deadline: Option<Instant>,
}

impl<W> SessionAuth<W> {
    /// A fresh session; `answers` when it holds a key and answers challenges.
    pub fn new(answers: bool) -> Self {
        Self {
            answers,
            state: AuthState::Unchallenged,
            parked: Vec::new(),
            deadline: None,
        }
    }

    /// Where the session stands.
    pub fn state(&self) -> AuthState {
        self.state
    }

    /// The relay refused the request doing `work` with `auth-required:` at `now`.
    pub fn handle_refusal(&mut self, now: Instant, work: W) -> AuthVerdict {
        let waiting = matches!(
            self.state,
            AuthState::Unchallenged | AuthState::Authenticating
        );
        if !self.answers || !waiting || self.parked.len() >= MAX_PARKED {
            return AuthVerdict::Refuse;
        }
        self.parked.push(work);
        self.deadline.get_or_insert(now + AUTH_WAIT);
        AuthVerdict::Park
    }

    /// Like [`SessionAuth::handle_refusal`], for a request sent before the session
    /// authenticated whose refusal is read only now (a NIP-77 round reports on its own
    /// channel, so its refusal may come after the relay's `OK` to the AUTH): once the session
    /// has authenticated, the request is sent again rather than refused.
    pub fn handle_refusal_sent_before(&mut self, now: Instant, work: W) -> AuthVerdict {
        if self.answers && self.state == AuthState::Authenticated {
            return AuthVerdict::Resend;
        }
        self.handle_refusal(now, work)
    }

    /// Whether the session may still authenticate: it holds a key, and its AUTH has neither
    /// succeeded nor failed yet.
    pub fn may_authenticate(&self) -> bool {
        self.answers
            && matches!(
                self.state,
                AuthState::Unchallenged | AuthState::Authenticating
            )
    }

    /// The relay sent a challenge the session answers.
    pub fn handle_challenge(&mut self) {
        if self.answers && self.state == AuthState::Unchallenged {
            self.state = AuthState::Authenticating;
        }
    }

    /// The relay accepted the AUTH: returns the parked work, to be sent again. A session
    /// that already failed stays failed.
    pub fn handle_authenticated(&mut self) -> Vec<W> {
        if self.state == AuthState::Failed {
            return Vec::new();
        }
        self.state = AuthState::Authenticated;
        self.deadline = None;
        std::mem::take(&mut self.parked)
    }

    /// The AUTH failed: returns the parked work, to be refused by policy.
    pub fn handle_failed(&mut self) -> Vec<W> {
        if self.state == AuthState::Authenticated {
            return Vec::new();
        }
        self.state = AuthState::Failed;
        self.deadline = None;
        std::mem::take(&mut self.parked)
    }

    /// Past the deadline without an outcome: the session counts as failed; returns the parked
    /// coverage, to be refused by policy.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<W> {
        match self.deadline {
            Some(deadline) if now >= deadline => self.handle_failed(),
            _ => Vec::new(),
        }
    }

    /// The deadline of the parked coverage, while any is parked: retries of refused work
    /// wait for it (or for the outcome of the AUTH, whichever comes first).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }
}

#[cfg(test)]
mod tests;
