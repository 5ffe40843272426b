//! The per-connection [`SubscriptionLedger`]: B subscription slots shared by live groups and
//! transient permits, with a reserved margin, class caps, generations and the watchdog.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use nostr::SubscriptionId;

use crate::error::LedgerError;
use crate::permit::{ClassCounts, Generation, Permit, PermitClass};

#[cfg(test)]
mod tests;

/// The subscription budget when the relay advertises no NIP-11 `max_subscriptions`.
pub const DEFAULT_SUBSCRIPTION_BUDGET: usize = 20;
/// Slots kept free beyond every permit, for ad-hoc operations and recovery.
pub const RESERVED_MARGIN: usize = 2;
/// At most this many negentropy rounds hold slots at once.
pub const NEGENTROPY_ROUND_CAP: usize = 4;
/// At most this many transient REQs hold slots at once.
pub const TRANSIENT_REQ_CAP: usize = 5;
/// How long a transient subscription may stay unanswered before the watchdog reports it.
pub const WATCHDOG_TIMEOUT: Duration = Duration::from_secs(120);

/// The slot budget of one connection session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBudget {
    slots: usize,
    transient_req_cap: usize,
}

impl SessionBudget {
    /// The budget for a relay advertising `max_subscriptions` (NIP-11), or the default of 20 when
    /// it advertises none. Values below the default are honoured.
    pub fn from_nip11(max_subscriptions: Option<u32>) -> SessionBudget {
        let slots = max_subscriptions.map_or(DEFAULT_SUBSCRIPTION_BUDGET, |advertised| {
            usize::try_from(advertised).unwrap_or(usize::MAX)
        });
        SessionBudget {
            slots,
            transient_req_cap: TRANSIENT_REQ_CAP,
        }
    }

    /// A budget of exactly `slots` slots and the default transient REQ cap.
    pub fn from_slots(slots: usize) -> SessionBudget {
        SessionBudget {
            slots,
            transient_req_cap: TRANSIENT_REQ_CAP,
        }
    }

    /// The same budget with transient REQs serialised (one at a time), as on a connection with a
    /// learned retained-REQ byte cap.
    pub fn serialised(self) -> SessionBudget {
        SessionBudget {
            transient_req_cap: 1,
            ..self
        }
    }

    /// The same budget with the transient REQ cap in force on a connection whose limits are
    /// `limits`.
    pub fn with_learned(self, limits: &crate::LearnedLimits) -> SessionBudget {
        SessionBudget {
            transient_req_cap: limits.transient_req_cap(),
            ..self
        }
    }

    /// B, the connection's subscription budget.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Slots usable by permits: B minus the reserved margin.
    pub fn usable(&self) -> usize {
        self.slots.saturating_sub(RESERVED_MARGIN)
    }

    /// The most live groups that leave the margin and one transient slot.
    pub fn max_live(&self) -> usize {
        self.usable().saturating_sub(1)
    }

    /// The transient REQ class cap in force.
    pub fn transient_req_cap(&self) -> usize {
        self.transient_req_cap
    }
}

impl Default for SessionBudget {
    fn default() -> Self {
        SessionBudget::from_nip11(None)
    }
}

/// Why a held permit is handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReason {
    /// EOSE arrived and the subscription's CLOSE was enqueued.
    EoseCloseEnqueued,
    /// The relay sent CLOSED for the subscription.
    Closed,
    /// The watchdog expired and the subscription's CLOSE was accepted for sending.
    WatchdogCloseAccepted,
    /// The owner closed a live group (retirement, rollback, demotion).
    LiveRetired,
}

impl ReleaseReason {
    fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::EoseCloseEnqueued => "eose_close_enqueued",
            ReleaseReason::Closed => "closed",
            ReleaseReason::WatchdogCloseAccepted => "watchdog_close_accepted",
            ReleaseReason::LiveRetired => "live_retired",
        }
    }
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The slot returned to the current generation.
    Released,
    /// The permit belonged to a retired generation (or was already released): nothing changed.
    Stale,
}

/// A transient subscription whose watchdog expired: send CLOSE for it, then release its permit
/// with [`ReleaseReason::WatchdogCloseAccepted`] once the CLOSE is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogExpiry {
    /// The generation of the permit.
    pub generation: Generation,
    /// The unresponsive subscription.
    pub subscription_id: SubscriptionId,
    /// The class of its permit.
    pub class: PermitClass,
}

/// The subscription ledger of one relay connection (see the crate docs for the rules).
#[derive(Debug)]
pub struct SubscriptionLedger {
    generation: Generation,
    open: bool,
    budget: SessionBudget,
    held: BTreeMap<u64, Held>,
    by_subscription: HashMap<SubscriptionId, u64>,
    counts: ClassCounts,
    next_serial: u64,
}

#[derive(Debug)]
struct Held {
    class: PermitClass,
    subscription_id: SubscriptionId,
    deadline: Option<Instant>,
    expired: bool,
}

impl SubscriptionLedger {
    /// A ledger for the first session of a connection.
    pub fn new(_now: Instant, budget: SessionBudget) -> SubscriptionLedger {
        SubscriptionLedger {
            generation: Generation::FIRST,
            open: true,
            budget,
            held: BTreeMap::new(),
            by_subscription: HashMap::new(),
            counts: ClassCounts::default(),
            next_serial: 0,
        }
    }

    /// The current generation.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// The budget of the current session.
    pub fn budget(&self) -> SessionBudget {
        self.budget
    }

    /// Held permits per class.
    pub fn counts(&self) -> ClassCounts {
        self.counts
    }

    /// Slots free for transient permits now: usable slots minus every held permit.
    pub fn residual(&self) -> usize {
        self.budget.usable().saturating_sub(self.counts.total())
    }

    /// Whether the session is open (not torn down).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The connection reconnected: every permit of the old generation is retired and a new
    /// generation starts with `budget` (re-read from NIP-11 for the new session).
    pub fn handle_reconnect(&mut self, now: Instant, budget: SessionBudget) -> Generation {
        self.handle_teardown(now);
        self.open = true;
        self.budget = budget;
        self.generation
    }

    /// The connection was torn down: every permit is released and the generation retired.
    /// Acquisitions fail until [`handle_reconnect`](Self::handle_reconnect).
    pub fn handle_teardown(&mut self, _now: Instant) {
        self.held.clear();
        self.by_subscription.clear();
        self.counts = ClassCounts::default();
        if self.open {
            self.generation = self.generation.next();
        }
        self.open = false;
    }

    /// Tightens (or restores) the transient REQ cap mid-session, e.g. once a retained-byte cap is
    /// learned. Permits already held stay held.
    pub fn handle_transient_req_cap(&mut self, _now: Instant, cap: usize) {
        self.budget.transient_req_cap = cap;
    }

    /// Admits live groups atomically: either every subscription gets a live permit or none does.
    /// At least one transient slot must remain after admission.
    pub fn admit_live(
        &mut self,
        now: Instant,
        generation: Generation,
        subscriptions: Vec<SubscriptionId>,
    ) -> Result<Vec<Permit>, LedgerError> {
        self.check_generation(generation)?;
        if subscriptions.is_empty() {
            return Err(LedgerError::EmptyAdmission);
        }
        self.check_live_admission(0, subscriptions.len())?;
        let mut seen = std::collections::HashSet::new();
        for id in &subscriptions {
            if self.by_subscription.contains_key(id) || !seen.insert(id) {
                return Err(LedgerError::DuplicateSubscription(id.clone()));
            }
        }
        Ok(subscriptions
            .into_iter()
            .map(|id| self.insert(now, PermitClass::Live, id))
            .collect())
    }

    /// Whether [`SubscriptionLedger::admit_live`] of `requested` live groups would pass the
    /// budget once `released` of the live permits held now are released: the same checks,
    /// nothing changed. A caller replacing live groups asks this before it closes any, so a
    /// refusal costs the relay no CLOSE and no REQ sent again.
    pub fn check_live_admission(
        &self,
        released: usize,
        requested: usize,
    ) -> Result<(), LedgerError> {
        let held_live = self.counts.live().saturating_sub(released);
        if held_live + requested > self.budget.max_live() {
            return Err(LedgerError::NoTransientSlotLeft {
                requested,
                held_live,
                usable: self.budget.usable(),
            });
        }
        if held_live + requested + self.counts.transient() > self.budget.usable() {
            return Err(LedgerError::SlotsHeldByTransients {
                requested,
                held_transient: self.counts.transient(),
            });
        }
        Ok(())
    }

    /// Acquires a transient permit of `class` for `subscription_id`, within the shared residual
    /// and the class caps. Register it before the REQ is sent.
    pub fn acquire(
        &mut self,
        now: Instant,
        generation: Generation,
        class: PermitClass,
        subscription_id: SubscriptionId,
    ) -> Result<Permit, LedgerError> {
        self.check_generation(generation)?;
        if !class.is_transient() {
            return Err(LedgerError::LiveIsNotTransient);
        }
        if self.by_subscription.contains_key(&subscription_id) {
            return Err(LedgerError::DuplicateSubscription(subscription_id));
        }
        if self.residual() == 0 {
            return Err(LedgerError::NoResidualSlot { class });
        }
        if class == PermitClass::NegentropyRound {
            if self.counts.negentropy_rounds() >= NEGENTROPY_ROUND_CAP {
                return Err(LedgerError::ClassCapReached {
                    class,
                    cap: NEGENTROPY_ROUND_CAP,
                });
            }
        } else if self.counts.transient_reqs() >= self.budget.transient_req_cap {
            return Err(LedgerError::ClassCapReached {
                class,
                cap: self.budget.transient_req_cap,
            });
        }
        Ok(self.insert(now, class, subscription_id))
    }

    /// Hands a permit back. A permit of a retired generation is a no-op ([`Release::Stale`]).
    /// A watchdog release is only valid once that permit's watchdog expired.
    pub fn handle_release(
        &mut self,
        _now: Instant,
        permit: &Permit,
        reason: ReleaseReason,
    ) -> Result<Release, LedgerError> {
        if permit.generation != self.generation {
            return Ok(Release::Stale);
        }
        let Some(held) = self.held.get(&permit.serial) else {
            return Ok(Release::Stale);
        };
        let applies = match reason {
            ReleaseReason::LiveRetired => !held.class.is_transient(),
            ReleaseReason::EoseCloseEnqueued | ReleaseReason::WatchdogCloseAccepted => {
                held.class.is_transient()
            }
            ReleaseReason::Closed => true,
        };
        if !applies {
            return Err(LedgerError::ReasonDoesNotApply {
                class: held.class,
                reason: reason.as_str(),
            });
        }
        if reason == ReleaseReason::WatchdogCloseAccepted && !held.expired {
            return Err(LedgerError::WatchdogNotExpired(
                permit.subscription_id.clone(),
            ));
        }
        self.remove(permit.serial);
        Ok(Release::Released)
    }

    /// The earliest watchdog deadline not yet reported.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.held
            .values()
            .filter(|held| !held.expired)
            .filter_map(|held| held.deadline)
            .min()
    }

    /// The next transient subscription whose watchdog expired by `now`; each is reported once.
    /// Its permit stays held until the CLOSE is accepted (or the connection tears down).
    pub fn poll_watchdog(&mut self, now: Instant) -> Option<WatchdogExpiry> {
        let generation = self.generation;
        let held = self
            .held
            .values_mut()
            .filter(|held| !held.expired && held.deadline.is_some_and(|d| d <= now))
            .min_by_key(|held| held.deadline)?;
        held.expired = true;
        Some(WatchdogExpiry {
            generation,
            subscription_id: held.subscription_id.clone(),
            class: held.class,
        })
    }

    fn check_generation(&self, generation: Generation) -> Result<(), LedgerError> {
        if generation != self.generation {
            return Err(LedgerError::StaleGeneration {
                requested: generation,
                current: self.generation,
            });
        }
        if !self.open {
            return Err(LedgerError::SessionClosed);
        }
        Ok(())
    }

    fn insert(
        &mut self,
        now: Instant,
        class: PermitClass,
        subscription_id: SubscriptionId,
    ) -> Permit {
        let serial = self.next_serial;
        self.next_serial += 1;
        let deadline = if class.is_transient() {
            now.checked_add(WATCHDOG_TIMEOUT)
        } else {
            None
        };
        self.held.insert(
            serial,
            Held {
                class,
                subscription_id: subscription_id.clone(),
                deadline,
                expired: false,
            },
        );
        self.by_subscription.insert(subscription_id.clone(), serial);
        self.counts.add(class);
        Permit {
            generation: self.generation,
            class,
            subscription_id,
            serial,
            acquired_at: now,
        }
    }

    fn remove(&mut self, serial: u64) {
        if let Some(held) = self.held.remove(&serial) {
            self.by_subscription.remove(&held.subscription_id);
            self.counts.remove(held.class);
        }
    }
}
