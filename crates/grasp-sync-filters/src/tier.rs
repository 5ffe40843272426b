//! Coverage tiers: the admission priority every produced filter carries.

use nostr::Filter;

/// Priority order of coverage; `Ord` follows admission priority (`Essential` first).
///
/// The ledger admits whole tiers: a tier stays live only if it and every tier before it fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CoverageTier {
    /// Announcements, repository state, canonical `#a` repository and `#e` root references.
    /// Never demoted.
    Essential,
    /// Uppercase `#E` references to roots.
    RootUppercase,
    /// Compatibility references: `#q` to repositories and roots, `#A` to repositories.
    CoreCompat,
    /// Canonical `#e`/`#a` references to direct thread members.
    DescendantCanonical,
    /// `#q` references to direct thread members.
    DescendantQuote,
    /// Coverage that is only ever fetched historically: uppercase `#E`/`#A` references to
    /// direct thread members, and exact-ID fetches.
    HistoricOnly,
}

impl CoverageTier {
    /// Every tier, in admission order.
    pub const ALL: [CoverageTier; 6] = [
        CoverageTier::Essential,
        CoverageTier::RootUppercase,
        CoverageTier::CoreCompat,
        CoverageTier::DescendantCanonical,
        CoverageTier::DescendantQuote,
        CoverageTier::HistoricOnly,
    ];

    /// Whether filters of this tier may be held as live (`limit: 0`) subscriptions.
    pub fn may_be_live(self) -> bool {
        self != CoverageTier::HistoricOnly
    }
}

/// A filter together with the coverage tier it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TieredFilter {
    /// The filter as it is sent.
    pub filter: Filter,
    /// The tier the filter is admitted in.
    pub tier: CoverageTier,
}

impl TieredFilter {
    /// Pairs a filter with its tier.
    pub fn new(filter: Filter, tier: CoverageTier) -> Self {
        Self { filter, tier }
    }
}
