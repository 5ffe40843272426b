//! The three-layer filter builders: announcements, repository state, references to
//! repositories (Layer 2), to roots (Layer 3) and to direct thread members.
//!
//! Every builder sorts and deduplicates its inputs, then fills each filter up to the byte
//! budget, so equivalent inputs always yield identical filters.

use std::collections::BTreeSet;

use grasp_sync_model::RepoCoordinate;
use nostr::nips::nip01::Coordinate;
use nostr::{Alphabet, EventId, Filter, Kind, SingleLetterTag, Timestamp};

use crate::budget::{FilterBudget, WireValue, chunk_by_bytes};
use crate::error::FilterError;
use crate::pack::filter_payload_bytes;
use crate::tier::{CoverageTier, TieredFilter};

/// Kind of a NIP-34 repository announcement.
pub use grasp_sync_model::REPO_ANNOUNCEMENT_KIND as ANNOUNCEMENT_KIND;
/// Kind of a NIP-34 repository state event.
pub use grasp_sync_model::REPO_STATE_KIND as STATE_KIND;

/// Whether filters are live subscriptions or historic queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    /// A persistent subscription for new events only: `limit: 0`.
    Live,
    /// A query for stored events, optionally bounded; no `limit`, so the relay's default
    /// page size applies and pagination follows.
    Historic {
        /// Lower bound (`since`), if any.
        since: Option<Timestamp>,
        /// Upper bound (`until`), if any.
        until: Option<Timestamp>,
    },
}

impl Window {
    /// A historic window from `since` (if any) to now.
    pub fn since(since: Option<Timestamp>) -> Self {
        Window::Historic { since, until: None }
    }

    /// The empty filter carrying this window's bounds.
    pub fn base(self) -> Filter {
        match self {
            Window::Live => Filter::new().limit(0),
            Window::Historic { since, until } => {
                let mut filter = Filter::new();
                filter.since = since;
                filter.until = until;
                filter
            }
        }
    }
}

/// Layer 1: every repository announcement (kind 30617) on the relay.
///
/// Repository state (30618) is deliberately not part of Layer 1: a generic 30618 filter would
/// pull every state event on the relay. State comes through [`state_filters`].
pub fn announcement_filter(window: Window) -> TieredFilter {
    TieredFilter::new(
        window.base().kind(Kind::from(ANNOUNCEMENT_KIND)),
        CoverageTier::Essential,
    )
}

/// Repository state: kind 30618 with `#d` identifiers, for Full and StateOnly repositories.
pub fn state_filters<S: AsRef<str>>(
    identifiers: &[S],
    window: Window,
    budget: &FilterBudget,
) -> Result<Vec<TieredFilter>, FilterError> {
    let values = sorted_unique(identifiers.iter().map(|i| i.as_ref().to_owned()));
    let base = window.base().kind(Kind::from(STATE_KIND));
    tag_filters(
        &base,
        tag('d', false),
        &values,
        budget,
        CoverageTier::Essential,
    )
}

/// Layer 2 (Full repositories only): `#a`, `#A` and `#q` references to repository coordinates.
pub fn repo_tag_filters(
    repos: &[RepoCoordinate],
    window: Window,
    budget: &FilterBudget,
) -> Result<Vec<TieredFilter>, FilterError> {
    let values = sorted_unique(repos.iter().map(ToString::to_string));
    reference_filters(&values, window, budget, COORDINATE_TIERS)
}

/// Layer 3 (Full repositories only): `#e`, `#E` and `#q` references to root event IDs.
pub fn root_event_tag_filters(
    roots: &[EventId],
    window: Window,
    budget: &FilterBudget,
) -> Result<Vec<TieredFilter>, FilterError> {
    let values = sorted_unique(roots.iter().copied());
    reference_filters(&values, window, budget, ROOT_TIERS)
}

/// Direct-member descendants, one generation: `#e`/`#E`/`#q` over the IDs of events that
/// directly tag a root, and `#a`/`#A`/`#q` over the coordinates of addressable members.
///
/// Uppercase `#E`/`#A` descendant filters are historic-only, so a [`Window::Live`] build leaves
/// them out.
pub fn descendant_filters(
    members: &[EventId],
    addressable_members: &[Coordinate],
    window: Window,
    budget: &FilterBudget,
) -> Result<Vec<TieredFilter>, FilterError> {
    let ids = sorted_unique(members.iter().copied());
    let coordinates = sorted_unique(addressable_members.iter().map(ToString::to_string));
    let mut filters = reference_filters(&ids, window, budget, DESCENDANT_ID_TIERS)?;
    filters.extend(reference_filters(
        &coordinates,
        window,
        budget,
        DESCENDANT_COORDINATE_TIERS,
    )?);
    if window == Window::Live {
        filters.retain(|f| f.tier.may_be_live());
    }
    Ok(filters)
}

/// Everything one relay is asked about for a set of repositories.
#[derive(Debug, Clone, Copy, Default)]
pub struct Coverage<'a> {
    /// Repositories synced fully: state, Layer 2 and Layer 3.
    pub full_repos: &'a [RepoCoordinate],
    /// Repositories whose state only is synced (purgatory announcements).
    pub state_only_repos: &'a [RepoCoordinate],
    /// Root events of the Full repositories.
    pub roots: &'a [EventId],
    /// Direct thread members: events found by Layer 3 that directly tag a root.
    pub direct_members: &'a [EventId],
    /// Coordinates of the addressable direct thread members.
    pub addressable_members: &'a [Coordinate],
}

impl Coverage<'_> {
    /// Live (`limit: 0`) filters: state, Layer 2, Layer 3 and the live descendant tiers, each
    /// tag family built separately so whole tiers can be admitted or retired.
    pub fn live_filters(&self, budget: &FilterBudget) -> Result<Vec<TieredFilter>, FilterError> {
        let window = Window::Live;
        let mut filters = state_filters(&self.state_identifiers(), window, budget)?;
        filters.extend(repo_tag_filters(self.full_repos, window, budget)?);
        filters.extend(root_event_tag_filters(self.roots, window, budget)?);
        filters.extend(descendant_filters(
            self.direct_members,
            self.addressable_members,
            window,
            budget,
        )?);
        Ok(filters)
    }

    /// Historic filters for one batch: state, then root and member IDs unioned into one
    /// `#e`/`#E`/`#q` family and repository and addressable-member coordinates unioned into
    /// one `#a`/`#A`/`#q` family, before byte grouping.
    ///
    /// A union filter carries the tier of the highest-priority source present in the batch
    /// (root or repository tiers when there are any, descendant tiers otherwise).
    pub fn historic_filters(
        &self,
        since: Option<Timestamp>,
        until: Option<Timestamp>,
        budget: &FilterBudget,
    ) -> Result<Vec<TieredFilter>, FilterError> {
        let window = Window::Historic { since, until };
        let mut filters = state_filters(&self.state_identifiers(), window, budget)?;

        let ids = sorted_unique(self.roots.iter().chain(self.direct_members).copied());
        let id_tiers = if self.roots.is_empty() {
            DESCENDANT_ID_TIERS
        } else {
            ROOT_TIERS
        };
        filters.extend(reference_filters(&ids, window, budget, id_tiers)?);

        let coordinates = sorted_unique(
            self.full_repos
                .iter()
                .map(ToString::to_string)
                .chain(self.addressable_members.iter().map(ToString::to_string)),
        );
        let coordinate_tiers = if self.full_repos.is_empty() {
            DESCENDANT_COORDINATE_TIERS
        } else {
            COORDINATE_TIERS
        };
        filters.extend(reference_filters(
            &coordinates,
            window,
            budget,
            coordinate_tiers,
        )?);
        Ok(filters)
    }

    /// `#d` identifiers of every Full and StateOnly repository.
    fn state_identifiers(&self) -> Vec<&str> {
        self.full_repos
            .iter()
            .chain(self.state_only_repos)
            .map(RepoCoordinate::identifier)
            .collect()
    }
}

/// The three tags of a reference family and the tier each is admitted in.
type FamilyTiers = [(char, bool, CoverageTier); 3];

const COORDINATE_TIERS: FamilyTiers = [
    ('a', false, CoverageTier::Essential),
    ('a', true, CoverageTier::CoreCompat),
    ('q', false, CoverageTier::CoreCompat),
];
const ROOT_TIERS: FamilyTiers = [
    ('e', false, CoverageTier::Essential),
    ('e', true, CoverageTier::RootUppercase),
    ('q', false, CoverageTier::CoreCompat),
];
const DESCENDANT_ID_TIERS: FamilyTiers = [
    ('e', false, CoverageTier::DescendantCanonical),
    ('e', true, CoverageTier::HistoricOnly),
    ('q', false, CoverageTier::DescendantQuote),
];
const DESCENDANT_COORDINATE_TIERS: FamilyTiers = [
    ('a', false, CoverageTier::DescendantCanonical),
    ('a', true, CoverageTier::HistoricOnly),
    ('q', false, CoverageTier::DescendantQuote),
];

fn reference_filters<T: WireValue>(
    values: &[T],
    window: Window,
    budget: &FilterBudget,
    tiers: FamilyTiers,
) -> Result<Vec<TieredFilter>, FilterError> {
    let base = window.base();
    let mut filters = Vec::new();
    // The three tags of a family cost the same, so the chunking is computed once.
    let mut chunked: Option<(usize, Vec<&[T]>)> = None;
    for (letter, uppercase, tier) in tiers {
        let tag = tag(letter, uppercase);
        let array_budget = array_budget(&base, tag, budget)?;
        let chunks = match chunked.take() {
            Some((cached, chunks)) if cached == array_budget => chunks,
            _ => chunk_by_bytes(values, array_budget, usize::MAX, tag.as_char())?,
        };
        filters.extend(tag_chunks(&base, tag, &chunks, tier));
        chunked = Some((array_budget, chunks));
    }
    Ok(filters)
}

/// Fills filters `base + #tag: [values...]` up to the budget. `values` must be sorted and
/// unique.
pub(crate) fn tag_filters(
    base: &Filter,
    tag: SingleLetterTag,
    values: &[String],
    budget: &FilterBudget,
    tier: CoverageTier,
) -> Result<Vec<TieredFilter>, FilterError> {
    if values.is_empty() {
        return Ok(Vec::new());
    }
    let chunks = chunk_by_bytes(
        values,
        array_budget(base, tag, budget)?,
        usize::MAX,
        tag.as_char(),
    )?;
    Ok(tag_chunks(base, tag, &chunks, tier))
}

/// Bytes the value array of `base + #tag` may take.
fn array_budget(
    base: &Filter,
    tag: SingleLetterTag,
    budget: &FilterBudget,
) -> Result<usize, FilterError> {
    let mut empty = base.clone();
    empty.generic_tags.insert(tag, BTreeSet::new());
    Ok(budget.value_bytes(filter_payload_bytes(&empty), base.until.is_none())? + 2)
}

fn tag_chunks<T: WireValue>(
    base: &Filter,
    tag: SingleLetterTag,
    chunks: &[&[T]],
    tier: CoverageTier,
) -> Vec<TieredFilter> {
    chunks
        .iter()
        .map(|chunk| {
            let mut filter = base.clone();
            filter
                .generic_tags
                .insert(tag, chunk.iter().map(WireValue::to_wire).collect());
            TieredFilter::new(filter, tier)
        })
        .collect()
}

/// Sorted, deduplicated values. Event IDs sort by bytes, which is the order of their hex.
pub(crate) fn sorted_unique<T: Ord>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut values: Vec<T> = values.collect();
    values.sort_unstable();
    values.dedup();
    values
}

fn tag(letter: char, uppercase: bool) -> SingleLetterTag {
    let character = match letter {
        'a' => Alphabet::A,
        'd' => Alphabet::D,
        'e' => Alphabet::E,
        _ => Alphabet::Q,
    };
    if uppercase {
        SingleLetterTag::uppercase(character)
    } else {
        SingleLetterTag::lowercase(character)
    }
}

#[cfg(test)]
mod tests;
