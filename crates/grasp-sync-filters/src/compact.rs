//! [`CompactGroup`]: a filter group kept in less memory, for coverage held for a long time
//! (the live groups a connection holds).
//!
//! Live coverage names every repository and root event by its tag values, three times per
//! relay (`#e`, `#E`, `#q`), so the groups a daemon holds are mostly tag values. `nostr`'s
//! [`Filter`] keeps each value as its own `String` in a `BTreeSet`: about 90 bytes for an event
//! ID's 64 hex characters. A [`CompactFilter`] keeps a value of 64 lowercase hex characters as
//! its 32 bytes, a coordinate (`kind:pubkey:identifier`) as its kind, the public key's 32 bytes
//! and the identifier, and any other value as a boxed string, in sorted slices, and gives back
//! the exact filter it was made from.
//!
//! The three filters of one chunk of roots (`#e`, `#E`, `#q`) list the same values. Filters
//! compacted through one [`Compactor`] share one copy of each list of values they have in
//! common.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use nostr::{EventId, Filter, SingleLetterTag};

use crate::pack::FilterGroup;
use crate::tier::{CoverageTier, TieredFilter};

/// A [`TieredFilter`] in compact form; [`CompactFilter::to_tiered`] gives it back exactly.
///
/// ```
/// use grasp_sync_filters::{CompactFilter, CoverageTier, TieredFilter};
/// use nostr::{Alphabet, EventId, Filter, SingleLetterTag};
///
/// let root = EventId::from_byte_array([7; 32]);
/// let filter = Filter::new()
///     .custom_tag(SingleLetterTag::lowercase(Alphabet::E), root.to_hex())
///     .limit(0);
/// let tiered = TieredFilter::new(filter, CoverageTier::Essential);
/// let compact = CompactFilter::new(&tiered);
/// assert_eq!(compact.to_tiered(), tiered);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactFilter {
    /// The filter without its tag lists.
    shape: Filter,
    /// Each tag list, in tag order; equal lists of filters compacted together are shared.
    tags: Box<[(SingleLetterTag, Arc<CompactValues>)]>,
    tier: CoverageTier,
}

/// One tag list's values: those of 64 lowercase hex characters as bytes, coordinates in parts,
/// the others as text, each part in ascending order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CompactValues {
    pub(crate) ids: Box<[[u8; 32]]>,
    pub(crate) coordinates: Box<[CompactCoordinate]>,
    pub(crate) text: Box<[Box<str>]>,
}

/// A coordinate value, `kind:pubkey:identifier`, in parts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct CompactCoordinate {
    kind: u16,
    author: [u8; 32],
    identifier: Box<str>,
}

/// A tag value as the compact form classifies it: the bytes of 64 lowercase hex characters, a
/// coordinate's parts, or the text of any other value. Two values are equal exactly when their
/// strings are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TagValue<'a> {
    Id([u8; 32]),
    Coordinate(u16, [u8; 32], &'a str),
    Text(&'a str),
}

impl<'a> TagValue<'a> {
    /// The value `value` as the compact form keeps it.
    pub(crate) fn of(value: &'a str) -> TagValue<'a> {
        if let Some(id) = lower_hex_bytes(value) {
            return TagValue::Id(id);
        }
        if let Some((kind, author, identifier)) = coordinate_parts(value) {
            return TagValue::Coordinate(kind, author, identifier);
        }
        TagValue::Text(value)
    }
}

/// The 32 bytes `value` spells in 64 lowercase hex characters, if it does.
fn lower_hex_bytes(value: &str) -> Option<[u8; 32]> {
    let lower_hex = value.len() == 64
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !lower_hex {
        return None;
    }
    EventId::from_hex(value).ok().map(EventId::to_bytes)
}

/// The parts of a coordinate, `kind:pubkey:identifier`, whose kind is written as the number
/// alone (no sign, no leading zero) and whose public key is 64 lowercase hex characters: the
/// only form the parts give back exactly.
fn coordinate_parts(value: &str) -> Option<(u16, [u8; 32], &str)> {
    let (kind_text, rest) = value.split_once(':')?;
    let plain_number = kind_text.bytes().all(|b| b.is_ascii_digit())
        && (kind_text == "0" || !kind_text.starts_with('0'));
    if !plain_number {
        return None;
    }
    let kind: u16 = kind_text.parse().ok()?;
    let author = lower_hex_bytes(rest.get(..64)?)?;
    let identifier = rest.get(64..)?.strip_prefix(':')?;
    Some((kind, author, identifier))
}

/// The filter with its tag conditions left out: the shape a compact filter keeps beside them.
pub(crate) fn without_tags(filter: &Filter) -> Filter {
    // Destructured whole, so that a field added to `Filter` is not left out of the shape.
    let Filter {
        ids,
        authors,
        kinds,
        search,
        since,
        until,
        limit,
        generic_tags: _,
    } = filter;
    Filter {
        ids: ids.clone(),
        authors: authors.clone(),
        kinds: kinds.clone(),
        search: search.clone(),
        since: *since,
        until: *until,
        limit: *limit,
        generic_tags: Default::default(),
    }
}

impl CompactFilter {
    /// The compact form of `filter`.
    pub fn new(filter: &TieredFilter) -> CompactFilter {
        CompactFilter::with_lists(filter, Arc::new)
    }

    /// The compact form of `filter`, each list of values kept as `keep` gives it back.
    fn with_lists(
        filter: &TieredFilter,
        mut keep: impl FnMut(CompactValues) -> Arc<CompactValues>,
    ) -> CompactFilter {
        CompactFilter {
            shape: without_tags(&filter.filter),
            tags: filter
                .filter
                .generic_tags
                .iter()
                .map(|(tag, values)| (*tag, keep(CompactValues::new(values))))
                .collect(),
            tier: filter.tier,
        }
    }

    /// The tier the filter is admitted in.
    pub fn tier(&self) -> CoverageTier {
        self.tier
    }

    /// The filter as it is sent.
    pub fn to_filter(&self) -> Filter {
        let mut filter = self.shape.clone();
        for (tag, values) in self.tags.iter() {
            filter.generic_tags.insert(*tag, values.to_set());
        }
        filter
    }

    /// The filter it was made from.
    pub fn to_tiered(&self) -> TieredFilter {
        TieredFilter::new(self.to_filter(), self.tier)
    }

    /// Whether `other` is the compact form of the same filter, in whatever tier.
    pub fn same_filter(&self, other: &CompactFilter) -> bool {
        self.shape == other.shape && self.tags == other.tags
    }

    /// The filter without its tag lists, its one tag, and that tag's values, when the filter
    /// lists the values of exactly one tag (not empty) and neither `ids` nor `authors`: the
    /// shape [`crate::CoveredValues`] covers value by value.
    pub(crate) fn axis(&self) -> Option<(&Filter, SingleLetterTag, &CompactValues)> {
        let [(tag, values)] = &*self.tags else {
            return None;
        };
        let plain = self.shape.ids.is_none() && self.shape.authors.is_none();
        (plain && !values.is_empty()).then_some((&self.shape, *tag, values))
    }
}

impl From<TieredFilter> for CompactFilter {
    fn from(filter: TieredFilter) -> CompactFilter {
        CompactFilter::new(&filter)
    }
}

impl CompactValues {
    fn new(values: &BTreeSet<String>) -> CompactValues {
        let mut ids = Vec::new();
        let mut coordinates = Vec::new();
        let mut text = Vec::new();
        for value in values {
            match TagValue::of(value) {
                TagValue::Id(bytes) => ids.push(bytes),
                TagValue::Coordinate(kind, author, identifier) => {
                    coordinates.push(CompactCoordinate {
                        kind,
                        author,
                        identifier: Box::from(identifier),
                    });
                }
                TagValue::Text(value) => text.push(Box::from(value)),
            }
        }
        // In one fixed order (by kind, key, identifier), so equal value sets give equal parts.
        coordinates.sort();
        CompactValues {
            ids: ids.into_boxed_slice(),
            coordinates: coordinates.into_boxed_slice(),
            text: text.into_boxed_slice(),
        }
    }

    fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.coordinates.is_empty() && self.text.is_empty()
    }

    /// Every value, as [`TagValue`]s.
    pub(crate) fn values(&self) -> impl Iterator<Item = TagValue<'_>> {
        let ids = self.ids.iter().map(|id| TagValue::Id(*id));
        let coordinates = self
            .coordinates
            .iter()
            .map(|c| TagValue::Coordinate(c.kind, c.author, &c.identifier));
        ids.chain(coordinates)
            .chain(self.text.iter().map(|value| TagValue::Text(value)))
    }

    fn to_set(&self) -> BTreeSet<String> {
        let ids = self
            .ids
            .iter()
            .map(|id| EventId::from_byte_array(*id).to_hex());
        let coordinates = self.coordinates.iter().map(|c| {
            let author = EventId::from_byte_array(c.author).to_hex();
            format!("{}:{author}:{}", c.kind, c.identifier)
        });
        ids.chain(coordinates)
            .chain(self.text.iter().map(|value| value.to_string()))
            .collect()
    }
}

/// A [`FilterGroup`] in compact form: its filters as [`CompactFilter`]s and its payload size.
///
/// ```
/// use grasp_sync_filters::{CompactGroup, CoverageTier, FilterGroup, TieredFilter, filter_payload_bytes};
/// use nostr::{Filter, Kind};
///
/// let filter = Filter::new().kind(Kind::from(30617_u16)).limit(0);
/// let group = FilterGroup {
///     payload_bytes: filter_payload_bytes(&filter) + 1,
///     filters: vec![TieredFilter::new(filter, CoverageTier::Essential)],
/// };
/// let compact = CompactGroup::from(&group);
/// assert_eq!(compact.len(), 1);
/// assert_eq!(compact.to_group(), group);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactGroup {
    filters: Box<[CompactFilter]>,
    payload_bytes: usize,
}

impl CompactGroup {
    /// The filters.
    pub fn filters(&self) -> &[CompactFilter] {
        &self.filters
    }

    /// How many filters the group has.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether the group has no filter.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Bytes these filters add to a REQ message ([`FilterGroup::payload_bytes`]).
    pub fn payload_bytes(&self) -> usize {
        self.payload_bytes
    }

    /// The tier shared by every filter of the group (`None` only for an empty group).
    pub fn tier(&self) -> Option<CoverageTier> {
        self.filters.first().map(CompactFilter::tier)
    }

    /// The filters as they were, with their tiers.
    pub fn to_tiered(&self) -> Vec<TieredFilter> {
        self.filters.iter().map(CompactFilter::to_tiered).collect()
    }

    /// The plain filters, in order, ready for a REQ.
    pub fn to_filters(&self) -> Vec<Filter> {
        self.filters.iter().map(CompactFilter::to_filter).collect()
    }

    /// The group it was made from.
    pub fn to_group(&self) -> FilterGroup {
        FilterGroup {
            filters: self.to_tiered(),
            payload_bytes: self.payload_bytes,
        }
    }
}

impl From<&FilterGroup> for CompactGroup {
    fn from(group: &FilterGroup) -> CompactGroup {
        Compactor::default().group(group)
    }
}

impl From<FilterGroup> for CompactGroup {
    fn from(group: FilterGroup) -> CompactGroup {
        CompactGroup::from(&group)
    }
}

/// Makes compact filters and groups that share their equal lists of values: the `#e`, `#E`
/// and `#q` filters of one chunk of roots, compacted through one `Compactor`, keep the chunk's
/// IDs once. It remembers every list it made, so keep it for one batch of groups, not longer.
///
/// ```
/// use grasp_sync_filters::{Compactor, CoverageTier, TieredFilter};
/// use nostr::{Alphabet, EventId, Filter, SingleLetterTag};
///
/// let root = EventId::from_byte_array([7; 32]).to_hex();
/// let filter = |tag| {
///     let filter = Filter::new().custom_tag(tag, root.clone()).limit(0);
///     TieredFilter::new(filter, CoverageTier::Essential)
/// };
/// let replies = filter(SingleLetterTag::lowercase(Alphabet::E));
/// let comments = filter(SingleLetterTag::uppercase(Alphabet::E));
///
/// let mut compactor = Compactor::default();
/// let compact = [compactor.filter(&replies), compactor.filter(&comments)];
/// assert_eq!(compactor.lists(), 1, "one list of values, shared by both filters");
/// assert_eq!(compact[1].to_tiered(), comments);
/// ```
#[derive(Debug, Default)]
pub struct Compactor {
    lists: HashSet<Arc<CompactValues>>,
}

impl Compactor {
    /// The compact form of `filter`, sharing the lists of values this compactor made before.
    pub fn filter(&mut self, filter: &TieredFilter) -> CompactFilter {
        CompactFilter::with_lists(filter, |values| self.shared(values))
    }

    /// The compact form of `group`, sharing the lists of values this compactor made before.
    pub fn group(&mut self, group: &FilterGroup) -> CompactGroup {
        CompactGroup {
            filters: group.filters.iter().map(|f| self.filter(f)).collect(),
            payload_bytes: group.payload_bytes,
        }
    }

    /// How many distinct lists of values the filters made so far hold.
    pub fn lists(&self) -> usize {
        self.lists.len()
    }

    fn shared(&mut self, values: CompactValues) -> Arc<CompactValues> {
        if let Some(list) = self.lists.get(&values) {
            return Arc::clone(list);
        }
        let list = Arc::new(values);
        self.lists.insert(Arc::clone(&list));
        list
    }
}

#[cfg(test)]
mod tests;
