//! Permits and what identifies them: the session [`Generation`], the [`PermitClass`] and the
//! [`Permit`] a borrower holds until its subscription ends.

use std::fmt;
use std::time::Instant;

use nostr::SubscriptionId;

/// One connection session of the ledger. A reconnect retires the ledger's generation and starts
/// the next one; permits and borrowers from a retired generation are stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(u64);

impl Generation {
    /// The first generation of a connection.
    pub const FIRST: Generation = Generation(1);

    /// The generation that follows this one.
    pub fn next(self) -> Generation {
        Generation(self.0.saturating_add(1))
    }

    /// The generation number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a permit's slot is used for. Every class but [`PermitClass::Live`] is transient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PermitClass {
    /// A persistent live subscription group.
    Live,
    /// A page of historic sync.
    HistoricPage,
    /// A follow-up page of a paginated query.
    PaginationPage,
    /// A query that verifies a relay hint.
    HintVerification,
    /// An `ids` REQ that hydrates events found by negentropy.
    NegentropyHydration,
    /// A retry of failed work.
    Retry,
    /// A REQ+EOSE fallback for coverage that is not held live.
    SemanticFallback,
    /// An exact-ID dependency fetch (purgatory polling).
    ExactIdFetch,
    /// One NIP-77 negentropy round.
    NegentropyRound,
}

impl PermitClass {
    /// Every class, in declaration order.
    pub const ALL: [PermitClass; 9] = [
        PermitClass::Live,
        PermitClass::HistoricPage,
        PermitClass::PaginationPage,
        PermitClass::HintVerification,
        PermitClass::NegentropyHydration,
        PermitClass::Retry,
        PermitClass::SemanticFallback,
        PermitClass::ExactIdFetch,
        PermitClass::NegentropyRound,
    ];

    /// Whether the permit is transient (released on EOSE, CLOSED, watchdog or teardown).
    pub fn is_transient(self) -> bool {
        self != PermitClass::Live
    }

    /// Whether the permit counts against the transient REQ class cap.
    pub fn is_transient_req(self) -> bool {
        !matches!(self, PermitClass::Live | PermitClass::NegentropyRound)
    }

    /// A stable label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            PermitClass::Live => "live",
            PermitClass::HistoricPage => "historic_page",
            PermitClass::PaginationPage => "pagination_page",
            PermitClass::HintVerification => "hint_verification",
            PermitClass::NegentropyHydration => "negentropy_hydration",
            PermitClass::Retry => "retry",
            PermitClass::SemanticFallback => "semantic_fallback",
            PermitClass::ExactIdFetch => "exact_id_fetch",
            PermitClass::NegentropyRound => "negentropy_round",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            PermitClass::Live => 0,
            PermitClass::HistoricPage => 1,
            PermitClass::PaginationPage => 2,
            PermitClass::HintVerification => 3,
            PermitClass::NegentropyHydration => 4,
            PermitClass::Retry => 5,
            PermitClass::SemanticFallback => 6,
            PermitClass::ExactIdFetch => 7,
            PermitClass::NegentropyRound => 8,
        }
    }
}

impl fmt::Display for PermitClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A held subscription slot. It is not `Clone`, so one subscription has one permit; releasing it
/// twice, or releasing a permit of a retired generation, is a no-op.
#[derive(Debug, PartialEq, Eq)]
pub struct Permit {
    pub(crate) generation: Generation,
    pub(crate) class: PermitClass,
    pub(crate) subscription_id: SubscriptionId,
    pub(crate) serial: u64,
    pub(crate) acquired_at: Instant,
}

impl Permit {
    /// The session generation that issued the permit.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// What the slot is used for.
    pub fn class(&self) -> PermitClass {
        self.class
    }

    /// The subscription holding the slot.
    pub fn subscription_id(&self) -> &SubscriptionId {
        &self.subscription_id
    }

    /// When the permit was issued.
    pub fn acquired_at(&self) -> Instant {
        self.acquired_at
    }
}

/// Held permits per class, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounts([usize; 9]);

impl ClassCounts {
    /// Held permits of one class.
    pub fn get(&self, class: PermitClass) -> usize {
        self.0[class.index()]
    }

    /// Every class with its held count, in [`PermitClass::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (PermitClass, usize)> + '_ {
        PermitClass::ALL
            .iter()
            .map(|class| (*class, self.get(*class)))
    }

    /// Held live permits.
    pub fn live(&self) -> usize {
        self.get(PermitClass::Live)
    }

    /// Held transient permits of every class.
    pub fn transient(&self) -> usize {
        self.total() - self.live()
    }

    /// Held negentropy round permits.
    pub fn negentropy_rounds(&self) -> usize {
        self.get(PermitClass::NegentropyRound)
    }

    /// Held transient REQ permits (every transient class but negentropy rounds).
    pub fn transient_reqs(&self) -> usize {
        self.transient() - self.negentropy_rounds()
    }

    /// Every held permit.
    pub fn total(&self) -> usize {
        self.0.iter().sum()
    }

    pub(crate) fn add(&mut self, class: PermitClass) {
        self.0[class.index()] += 1;
    }

    pub(crate) fn remove(&mut self, class: PermitClass) {
        let slot = &mut self.0[class.index()];
        *slot = slot.saturating_sub(1);
    }
}
