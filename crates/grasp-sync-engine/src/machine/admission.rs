//! StartAdmission of the next queued background start, one rule for history pages and NIP-77
//! rounds alike: nothing starts during a health pause; a start needs a free slot and room
//! under its kind's cap; then it passes the background gate (one start per second from the
//! session's start) and the reactive gate (a query-rate refusal's cooldown and spacing), in
//! that order, so a start the reactive gate defers costs a background interval rather than a
//! live start's turn. Pure: the actor reads the room from its ledger and acts on the answer.

use std::time::Instant;

use grasp_sync_ledger::{BackgroundGate, GateRejection, ReactiveGate, StartDecision, StartKind};

#[cfg(test)]
mod tests;

/// Room in the connection's ledger for one more start of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Subscription slots not held.
    pub residual: usize,
    /// Starts of the kind held now (transient REQs, or NIP-77 rounds).
    pub held: usize,
    /// The most starts of the kind held at once.
    pub cap: usize,
}

/// What the head of a queue may do at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAdmission {
    /// Start now; both gates counted the start.
    Ready,
    /// Ask again at this instant: the end of a health pause, or a gate's next start. Nothing
    /// was counted.
    WaitUntil(Instant),
    /// Ask again once a slot is released: none is free, or the kind's cap is held.
    WaitForRelease,
    /// Do not start: the reactive gate rejects it (a cooldown, or NIP-77 off for the session);
    /// its work is re-derived.
    Rejected(GateRejection),
}

/// Whether the health pause (`paused_until`) and the `room` let a start wait only for the
/// gates; `None` when they do.
pub fn wait_for_room(
    now: Instant,
    paused_until: Option<Instant>,
    room: Room,
) -> Option<StartAdmission> {
    if let Some(until) = paused_until.filter(|until| *until > now) {
        return Some(StartAdmission::WaitUntil(until));
    }
    (room.residual == 0 || room.held >= room.cap).then_some(StartAdmission::WaitForRelease)
}

/// The two gates, background first: `Ready` when both count the start.
pub fn pass_gates(
    now: Instant,
    kind: StartKind,
    background: &mut BackgroundGate,
    reactive: &mut ReactiveGate,
) -> StartAdmission {
    let decision = match background.poll_start(now, kind) {
        StartDecision::Ready => reactive.poll_start(now, kind),
        other => other,
    };
    match decision {
        StartDecision::Ready => StartAdmission::Ready,
        StartDecision::NotBefore(at) => StartAdmission::WaitUntil(at),
        StartDecision::Rejected(reason) => StartAdmission::Rejected(reason),
    }
}

/// The whole admission of a start of `kind`: [`wait_for_room`], then [`pass_gates`].
pub fn admit(
    now: Instant,
    kind: StartKind,
    paused_until: Option<Instant>,
    room: Room,
    background: &mut BackgroundGate,
    reactive: &mut ReactiveGate,
) -> StartAdmission {
    wait_for_room(now, paused_until, room)
        .unwrap_or_else(|| pass_gates(now, kind, background, reactive))
}
