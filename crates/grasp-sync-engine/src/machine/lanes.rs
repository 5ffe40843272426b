//! Extra live connections (lever 4), as a sans-IO machine: when the core live coverage of a
//! relay does not fit one connection's subscription budget, up to three more connections to the
//! same relay hold the rest, each with its own ledger of the same budget ([`LiveLanes`]).
//!
//! - **Live only.** An extra connection carries nothing but live (`limit: 0`) groups. History,
//!   pagination, NIP-77 and catch-up stay on the relay's session, so the background pacing the
//!   relay sees is the session's alone, as with one connection.
//! - **Core coverage only.** The tiers that cover tracked repositories and roots (essential,
//!   uppercase root references, compatibility references) overflow onto extra connections
//!   ([`lane_tier`]); descendant coverage that does not fit keeps its paced fallback.
//! - **Deterministic assignment.** Waiting coverage is offered to the open connections in
//!   order, each taking the longest prefix of it (tier, then filter order) its budget holds
//!   (`plan_live_fitting`); one more is dialled ([`LaneStep::Dial`]) only when those open are
//!   full and none is dialling, so the relay gets the fewest connections the coverage needs, one
//!   handshake at a time.
//! - **Its own NIP-42.** Each connection authenticates on its own, as the design asks: with a
//!   key, a live group the relay refuses with `auth-required:` is parked on its connection
//!   ([`LiveLanes::handle_auth_refusal`], by the connection's
//!   [`SessionAuth`]) and its REQ sent again, once,
//!   when the relay accepts that connection's `AUTH` ([`LiveLanes::handle_authenticated`]).
//!   Without a key, after a failed `AUTH`, or with no outcome within
//!   [`AUTH_WAIT`](crate::machine::session_auth::AUTH_WAIT) ([`LiveLanes::poll_auth_expired`]),
//!   it is a refusal like any other.
//! - **Polite failure.** A refusal of what one group asks for ([`refusal_spares_connection`]:
//!   blocked, restricted or invalid coverage) costs only that group
//!   ([`LiveLanes::handle_refused_group`]): its coverage is paused by policy like the
//!   session's, and the connection keeps the rest. A connection that fails or is refused for
//!   anything else is closed ([`LiveLanes::close`]) and no other opens until the session
//!   reconnects; its coverage, and whatever no connection may hold ([`LaneStep::CatchUp`]),
//!   goes to the session's paced catch-up.
//! - **Lifetime.** The connections belong to the session: [`LiveLanes::close_all`] ends them when
//!   the session ends, restarts its coverage or holds all of it again. A live set rebuilt from
//!   scratch that still overflows keeps the open connections and repacks them
//!   ([`LiveLanes::handle_repack`]): no handshake is spent, and a relay that bans quick
//!   reconnects (chorus) sees none.
//!
//! The driver owns the connections themselves: it dials when asked, reports the outcome to
//! [`LiveLanes::handle_dialled`], and performs each open connection's queued REQs, CLOSEs and
//! disconnect ([`LiveLanes::transmits_mut`], and the queue a closed connection hands back).

use std::collections::BTreeMap;
use std::time::Instant;

use grasp_sync_filters::{
    CompactFilter, CompactGroup, Compactor, CoverageTier, Covering, PackLimits, TieredFilter,
    uncovered,
};
use grasp_sync_health::RefusalCategory;
use grasp_sync_ledger::{
    HeldGroup, LearnedLimits, LedgerError, LiveBudget, Permit, ReleaseReason, SessionBudget,
    SubscriptionLedger, plan_live_fitting,
};
use nostr::{Filter, SubscriptionId};

use crate::machine::refused::without_bounds;
use crate::machine::session_auth::{AuthVerdict, SessionAuth};
use crate::machine::transmit::{Outbound, SessionKey, Transmits};
use crate::machine::unanswered::{NoticeTarget, UnansweredReqs};

#[cfg(test)]
mod tests;

/// Connections per relay at most: the session and three extra live connections. chorus, the
/// tightest relay known, allows five per address.
pub const MAX_CONNECTIONS_PER_RELAY: usize = 4;

/// Whether coverage of `tier` may overflow onto extra connections: the core tiers, which
/// cover tracked repositories and roots. Descendant coverage has its own paced fallback.
pub fn lane_tier(tier: CoverageTier) -> bool {
    matches!(
        tier,
        CoverageTier::Essential | CoverageTier::RootUppercase | CoverageTier::CoreCompat
    )
}

/// Whether a refusal of `category` of a group an extra connection holds concerns only what
/// that group asks for (the relay blocks, restricts or cannot serve its filters), so the
/// connection keeps its other groups. Any other refusal (a limit, a rate, an unanswered or
/// failed AUTH, an error) closes the connection.
pub fn refusal_spares_connection(category: RefusalCategory) -> bool {
    matches!(
        category,
        RefusalCategory::Blocked
            | RefusalCategory::Restricted
            | RefusalCategory::InvalidFilter
            | RefusalCategory::Invalid
    )
}

/// One relay's extra live connections and the coverage waiting for one.
#[derive(Default)]
pub struct LiveLanes {
    /// In assignment order; at most [`MAX_CONNECTIONS_PER_RELAY`] − 1.
    lanes: Vec<Lane>,
    /// Core live coverage no connection holds yet, waiting for a lane to connect.
    unplaced: Vec<TieredFilter>,
    /// An extra connection failed or was refused: none is opened again until the session
    /// reconnects.
    stopped: bool,
}

/// What the driver does once the waiting coverage was offered to the open connections.
#[derive(Debug, Clone, PartialEq)]
pub enum LaneStep {
    /// Nothing: no coverage waits, or a connection is being dialled and will be offered it.
    Wait,
    /// Dial one more extra connection, then report its attempt to
    /// [`LiveLanes::handle_dial_started`].
    Dial,
    /// No more connections may open: this coverage, without its bounds, goes to the paced
    /// catch-up.
    CatchUp(Vec<Filter>),
}

/// An extra connection that connected: its session, the subscription budget of the relay's
/// session, and whether it answers NIP-42 challenges (holds a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneSession {
    /// The connection's session.
    pub key: SessionKey,
    /// The subscription budget of the relay's session: each extra connection's own ledger
    /// gets the same.
    pub budget: SessionBudget,
    /// It answers NIP-42 challenges (holds a key).
    pub answers_auth: bool,
}

/// How a dial report was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialled {
    /// Not an attempt of these connections: the driver drops the connection.
    Unknown,
    /// The connection is open as extra connection number `connection` (the session is 1).
    Opened {
        /// Its number.
        connection: usize,
    },
    /// The attempt failed: no other opens until the session reconnects. The driver asks
    /// [`LiveLanes::next_step`] what becomes of the waiting coverage.
    Failed,
}

/// What an `auth-required:` NOTICE on an extra connection comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthNotice {
    /// The connection's oldest unanswered live group is parked for its `AUTH`.
    Parked,
    /// The NOTICE answers a live REQ the connection closed since, or none awaits an answer
    /// (one already parked), and the connection may still authenticate: nothing more is
    /// refused.
    Unmatched,
    /// A refusal: the connection holds no key, or its `AUTH` already succeeded or failed.
    Refused,
}

/// What one [`LiveLanes::fill`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneFill {
    /// Live REQs queued, over every connection.
    pub opened: usize,
    /// Connections whose ledger refused a plan made within its budget; their coverage waits
    /// again.
    pub refused: Vec<LedgerError>,
}

/// An extra connection that was closed: what is left to perform on it and, when it was closed
/// alone, the coverage it held (without bounds), for the catch-up.
pub struct ClosedLane {
    /// The closed connection's session.
    pub key: SessionKey,
    /// What it still had queued, to perform before it ends.
    pub transmit: Transmits,
    /// The coverage it held, without bounds, for the catch-up.
    pub coverage: Vec<Filter>,
}

/// One extra connection.
struct Lane {
    /// The dial attempt in flight.
    dialing: Option<u64>,
    open: Option<OpenLane>,
}

/// A connected extra connection and the live groups it holds.
struct OpenLane {
    key: SessionKey,
    ledger: SubscriptionLedger,
    live: BTreeMap<SubscriptionId, LaneGroup>,
    /// Its REQs, CLOSEs and disconnect not yet performed.
    transmit: Transmits,
    /// Its NIP-42 state, and the live groups parked for its `AUTH`.
    auth: SessionAuth<SubscriptionId>,
    /// Its live REQs the relay has not answered yet (no `EOSE`, no `CLOSED`), including
    /// those closed since: what a refusal in a `NOTICE`, which names no subscription, answers.
    unanswered: UnansweredReqs,
}

/// A live group held on an extra connection.
struct LaneGroup {
    group: CompactGroup,
    permit: Permit,
    /// Parked for the connection's `AUTH`.
    parked: bool,
}

impl OpenLane {
    /// Queues live group `id`'s REQ, awaiting the relay's answer.
    fn send(&mut self, id: SubscriptionId, filters: Vec<Filter>) {
        self.unanswered.sent(&id, filters.len());
        self.transmit.push(Outbound::Req {
            subscription_id: id,
            filters,
        });
    }

    /// The relay answered live REQ `id` (an `EOSE` or a `CLOSED`).
    fn answered(&mut self, id: &SubscriptionId) {
        self.unanswered.answered(id);
    }

    /// Parks live group `id` for the connection's `AUTH` at `now`; true when it is parked
    /// (now or already), false when it must be refused.
    fn park(&mut self, now: Instant, id: &SubscriptionId) -> bool {
        let Some(group) = self.live.get_mut(id) else {
            return false;
        };
        if group.parked {
            return true;
        }
        group.parked = self.auth.handle_refusal(now, id.clone()) == AuthVerdict::Park;
        group.parked
    }
}

impl LiveLanes {
    /// Extra connections open now.
    pub fn connected(&self) -> usize {
        self.open().count()
    }

    /// Live groups held on the extra connections.
    pub fn live_groups(&self) -> usize {
        self.open().map(|l| l.live.len()).sum()
    }

    /// Whether `key` is one of the extra connections' sessions.
    pub fn owns_session(&self, key: &SessionKey) -> bool {
        self.position_of(key).is_some()
    }

    /// Whether `attempt` is an extra connection's dial.
    pub fn owns_attempt(&self, attempt: u64) -> bool {
        self.lanes.iter().any(|l| l.dialing == Some(attempt))
    }

    /// Whether the extra connection `key` holds `subscription` live.
    pub fn holds(&self, key: &SessionKey, subscription: &SubscriptionId) -> bool {
        self.open()
            .find(|l| l.key == *key)
            .is_some_and(|l| l.live.contains_key(subscription))
    }

    /// Whether connection `key` holds live group `subscription` parked for its `AUTH`.
    pub fn is_parked(&self, key: &SessionKey, subscription: &SubscriptionId) -> bool {
        self.open()
            .find(|l| l.key == *key)
            .and_then(|l| l.live.get(subscription))
            .is_some_and(|group| group.parked)
    }

    /// Whether coverage waits for a connection.
    pub fn has_waiting(&self) -> bool {
        !self.unplaced.is_empty()
    }

    /// Every open extra connection's session and the messages queued for it, for the driver
    /// to perform.
    pub fn transmits_mut(&mut self) -> impl Iterator<Item = (&SessionKey, &mut Transmits)> {
        self.lanes
            .iter_mut()
            .filter_map(|l| l.open.as_mut())
            .map(|l| (&l.key, &mut l.transmit))
    }

    /// Core live coverage the session cannot hold. Keeps the core tiers no connection holds
    /// or waits for already; returns whether any of it is new.
    pub fn handle_overflow(&mut self, overflow: Vec<TieredFilter>) -> bool {
        let core: Vec<TieredFilter> = overflow.into_iter().filter(|f| lane_tier(f.tier)).collect();
        let new = uncovered(
            self.held_filters()
                .map(Covering::from)
                .chain(self.unplaced.iter().map(Covering::from)),
            core,
        );
        let any = !new.is_empty();
        self.unplaced.extend(new);
        any
    }

    /// Offers the waiting coverage to the open connections in order: each takes the longest
    /// prefix its budget holds, next to what it holds, under the relay's `learned` limits.
    /// `next_id` names each new live group. Then [`LiveLanes::next_step`] says what becomes
    /// of the rest.
    pub fn fill(
        &mut self,
        now: Instant,
        learned: &LearnedLimits,
        mut next_id: impl FnMut() -> SubscriptionId,
    ) -> LaneFill {
        let mut fill = LaneFill {
            opened: 0,
            refused: Vec::new(),
        };
        // Compacted together, the groups opened keep each list of values they share once.
        let mut compactor = Compactor::default();
        for lane in self.lanes.iter_mut().filter_map(|l| l.open.as_mut()) {
            if self.unplaced.is_empty() {
                break;
            }
            let held: Vec<HeldGroup> = lane
                .live
                .iter()
                .map(|(id, live)| HeldGroup {
                    subscription_id: id.clone(),
                    group: live.group.clone(),
                })
                .collect();
            let budget = LiveBudget::new(&lane.ledger.budget(), learned, PackLimits::default());
            let fitted = plan_live_fitting(&held, std::mem::take(&mut self.unplaced), &budget);
            let ids: Vec<SubscriptionId> = fitted.plan.open.iter().map(|_| next_id()).collect();
            self.unplaced = fitted.rest;
            for id in &fitted.plan.close {
                if let Some(held) = lane.live.remove(id) {
                    let _ =
                        lane.ledger
                            .handle_release(now, &held.permit, ReleaseReason::LiveRetired);
                    lane.transmit.push(Outbound::Close(id.clone()));
                }
            }
            if ids.is_empty() {
                // Nothing more fits this connection: the next one is offered the rest.
                continue;
            }
            let generation = lane.ledger.generation();
            match lane.ledger.admit_live(now, generation, ids.clone()) {
                Ok(permits) => {
                    for ((id, group), permit) in ids.into_iter().zip(fitted.plan.open).zip(permits)
                    {
                        lane.send(id.clone(), group.to_filters());
                        lane.live.insert(
                            id,
                            LaneGroup {
                                group: compactor.group(&group),
                                permit,
                                parked: false,
                            },
                        );
                        fill.opened += 1;
                    }
                }
                Err(error) => {
                    // The plan stayed within this ledger's budget; a refusal means it is not
                    // the connection's to hold: it waits again.
                    fill.refused.push(error);
                    self.unplaced.extend(
                        fitted
                            .plan
                            .open
                            .into_iter()
                            .flat_map(|g| g.filters.into_iter()),
                    );
                }
            }
        }
        fill
    }

    /// What becomes of the coverage left after every open connection took its share: nothing
    /// while a connection is dialling, one more connection while fewer than
    /// [`MAX_CONNECTIONS_PER_RELAY`] are open, none has failed this session and `may_dial`
    /// (the relay is not paused), else the catch-up.
    pub fn next_step(&mut self, may_dial: bool) -> LaneStep {
        if self.unplaced.is_empty() || self.lanes.iter().any(|l| l.dialing.is_some()) {
            return LaneStep::Wait;
        }
        if !self.stopped && self.lanes.len() < MAX_CONNECTIONS_PER_RELAY - 1 && may_dial {
            return LaneStep::Dial;
        }
        LaneStep::CatchUp(
            std::mem::take(&mut self.unplaced)
                .into_iter()
                .map(|f| without_bounds(&f.filter))
                .collect(),
        )
    }

    /// The driver dials the connection [`LaneStep::Dial`] asked for as `attempt`. Returns its
    /// number (the session is 1) and how much coverage waits for it.
    pub fn handle_dial_started(&mut self, attempt: u64) -> (usize, usize) {
        self.lanes.push(Lane {
            dialing: Some(attempt),
            open: None,
        });
        (self.lanes.len() + 1, self.unplaced.len())
    }

    /// The dial `attempt` finished: `opened` when it connected and the relay's session is
    /// still up, `None` when it failed or no session is left to serve. An opened connection
    /// is offered the waiting coverage by the next [`LiveLanes::fill`].
    pub fn handle_dialled(
        &mut self,
        now: Instant,
        attempt: u64,
        opened: Option<LaneSession>,
    ) -> Dialled {
        let Some(index) = self.lanes.iter().position(|l| l.dialing == Some(attempt)) else {
            return Dialled::Unknown;
        };
        let lane = &mut self.lanes[index];
        lane.dialing = None;
        match opened {
            Some(session) => {
                lane.open = Some(OpenLane {
                    key: session.key,
                    ledger: SubscriptionLedger::new(now, session.budget),
                    live: BTreeMap::new(),
                    transmit: Transmits::default(),
                    auth: SessionAuth::new(session.answers_auth),
                    unanswered: UnansweredReqs::default(),
                });
                Dialled::Opened {
                    connection: index + 2,
                }
            }
            None => {
                self.lanes.remove(index);
                self.stopped = true;
                Dialled::Failed
            }
        }
    }

    /// The relay refused live group `subscription` of connection `key` for what it asks
    /// ([`refusal_spares_connection`]) at `now`: the group leaves the connection, its slot
    /// freed (the relay already closed it). Returns its coverage, for the policy pause and to
    /// be offered again without what the pause holds; `None` if the connection does not hold
    /// it.
    pub fn handle_refused_group(
        &mut self,
        now: Instant,
        key: &SessionKey,
        subscription: &SubscriptionId,
    ) -> Option<Vec<TieredFilter>> {
        let lane = self.open_mut(key)?;
        let group = lane.live.remove(subscription)?;
        lane.answered(subscription);
        let _ = lane
            .ledger
            .handle_release(now, &group.permit, ReleaseReason::Closed);
        Some(group.group.to_tiered())
    }

    /// The relay sent connection `key` a challenge it answers.
    pub fn handle_auth_challenge(&mut self, key: &SessionKey) {
        if let Some(lane) = self.open_mut(key) {
            lane.auth.handle_challenge();
        }
    }

    /// The relay closed live group `subscription` of connection `key` with `auth-required:`
    /// at `now`. Returns true when the group is parked for the connection's `AUTH`: it keeps
    /// its slot, and its REQ is sent again once the relay accepts the `AUTH`. False when it
    /// is a refusal: the connection holds no key, its `AUTH` already failed or succeeded, or
    /// it is not the connection's group.
    pub fn handle_auth_refusal(
        &mut self,
        now: Instant,
        key: &SessionKey,
        subscription: &SubscriptionId,
    ) -> bool {
        let Some(lane) = self.open_mut(key) else {
            return false;
        };
        lane.answered(subscription);
        lane.park(now, subscription)
    }

    /// The relay refused on connection `key` with an `auth-required:` `NOTICE` at `now`,
    /// which names no subscription: it answers the connection's oldest live REQ not answered
    /// yet, as the session's NOTICE matching takes it (a relay that wants an `AUTH` before it
    /// serves reads refuses each REQ until then, in order; see [`UnansweredReqs`]). A group
    /// it still holds is parked for the connection's `AUTH`, as
    /// [`LiveLanes::handle_auth_refusal`] parks one; one closed since needs nothing.
    pub fn handle_auth_notice(&mut self, now: Instant, key: &SessionKey) -> AuthNotice {
        let Some(lane) = self.open_mut(key) else {
            return AuthNotice::Unmatched;
        };
        let live = &lane.live;
        match lane.unanswered.take_oldest(|id| live.contains_key(id)) {
            Some(NoticeTarget::Held(oldest)) if lane.park(now, &oldest) => AuthNotice::Parked,
            Some(NoticeTarget::Held(..)) => AuthNotice::Refused,
            Some(NoticeTarget::Retired(..)) | None if lane.auth.may_authenticate() => {
                AuthNotice::Unmatched
            }
            Some(NoticeTarget::Retired(..)) | None => AuthNotice::Refused,
        }
    }

    /// The relay sent `EOSE` for live group `subscription` of connection `key`: it was not
    /// refused.
    pub fn handle_eose(&mut self, key: &SessionKey, subscription: &SubscriptionId) {
        if let Some(lane) = self.open_mut(key) {
            lane.answered(subscription);
        }
    }

    /// The relay accepted connection `key`'s `AUTH`: the REQs of its parked groups are
    /// queued again, once. Returns how many.
    pub fn handle_authenticated(&mut self, key: &SessionKey) -> usize {
        let Some(lane) = self.open_mut(key) else {
            return 0;
        };
        let mut sent = 0;
        for id in lane.auth.handle_authenticated() {
            let Some(held) = lane.live.get_mut(&id) else {
                continue;
            };
            held.parked = false;
            let filters = held.group.to_filters();
            lane.send(id, filters);
            sent += 1;
        }
        sent
    }

    /// The connections whose parked groups waited [`AUTH_WAIT`](crate::machine::session_auth::AUTH_WAIT)
    /// with no outcome of their `AUTH` by `now`, and still hold one of them: to be closed as
    /// refused. A connection whose parked groups all left it (repacked, refused) keeps going,
    /// its AUTH counted as failed.
    pub fn poll_auth_expired(&mut self, now: Instant) -> Vec<SessionKey> {
        self.lanes
            .iter_mut()
            .filter_map(|l| l.open.as_mut())
            .filter_map(|l| {
                let expired = l.auth.handle_timeout(now);
                let held = expired.iter().any(|id| l.live.contains_key(id));
                held.then(|| l.key.clone())
            })
            .collect()
    }

    /// The earliest deadline of the connections' parked groups.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.open().filter_map(|l| l.auth.poll_timeout()).min()
    }

    /// Closes the extra connection `key` (it failed or was refused on) and opens no other
    /// this session. Returns its last messages, a disconnect included, and its coverage for
    /// the catch-up; the driver then asks [`LiveLanes::next_step`] about what still waits.
    pub fn close(&mut self, key: &SessionKey) -> Option<ClosedLane> {
        let index = self.position_of(key)?;
        let lane = self.lanes.remove(index);
        self.stopped = true;
        let mut open = lane.open?;
        let coverage = open
            .live
            .values()
            .flat_map(|g| g.group.to_tiered())
            .map(|f| without_bounds(&f.filter))
            .collect();
        open.transmit.push(Outbound::Disconnect);
        Some(ClosedLane {
            key: open.key,
            transmit: open.transmit,
            coverage,
        })
    }

    /// The session's live set is rebuilt from scratch and still overflows: every open
    /// connection closes its live groups (their CLOSEs queued, their slots freed) but stays
    /// open, what waited is forgotten, and the rebuilt overflow is offered anew to the same
    /// connections, in order, by [`LiveLanes::handle_overflow`] and [`LiveLanes::fill`].
    /// Groups parked for an `AUTH` are closed with the rest.
    pub fn handle_repack(&mut self, now: Instant) {
        self.unplaced.clear();
        for lane in self.lanes.iter_mut().filter_map(|l| l.open.as_mut()) {
            for (id, held) in std::mem::take(&mut lane.live) {
                let _ = lane
                    .ledger
                    .handle_release(now, &held.permit, ReleaseReason::LiveRetired);
                lane.transmit.push(Outbound::Close(id));
            }
        }
    }

    /// Closes every extra connection and forgets their coverage and what waits (the session
    /// ended, restarts its coverage, or holds all of it now). Each closed connection's last
    /// messages close its live groups and disconnect; no coverage is handed back.
    pub fn close_all(&mut self) -> Vec<ClosedLane> {
        let lanes = std::mem::take(self);
        lanes
            .lanes
            .into_iter()
            .filter_map(|l| l.open)
            .map(|mut open| {
                for id in open.live.keys() {
                    open.transmit.push(Outbound::Close(id.clone()));
                }
                open.transmit.push(Outbound::Disconnect);
                ClosedLane {
                    key: open.key,
                    transmit: open.transmit,
                    coverage: Vec::new(),
                }
            })
            .collect()
    }

    fn open(&self) -> impl Iterator<Item = &OpenLane> {
        self.lanes.iter().filter_map(|l| l.open.as_ref())
    }

    fn open_mut(&mut self, key: &SessionKey) -> Option<&mut OpenLane> {
        self.lanes
            .iter_mut()
            .filter_map(|l| l.open.as_mut())
            .find(|l| l.key == *key)
    }

    fn position_of(&self, key: &SessionKey) -> Option<usize> {
        self.lanes
            .iter()
            .position(|l| l.open.as_ref().is_some_and(|o| o.key == *key))
    }

    /// Every filter held live on the open extra connections.
    pub fn held_filters(&self) -> impl Iterator<Item = &CompactFilter> {
        self.open()
            .flat_map(|l| l.live.values())
            .flat_map(|g| g.group.filters())
    }
}
