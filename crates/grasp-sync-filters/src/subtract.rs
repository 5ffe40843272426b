//! What of a filter's coverage other filters do not already cover.
//!
//! A filter whose only tag list is one tag's values (`#e`, `#a`, `#d`, ...), with no `ids` or
//! `authors`, matches the union of the filters that each keep one of those values (for a
//! filter with a `limit` above 0, the stored events it returns are a subset of that union; live
//! filters carry `limit: 0`). Other filters with the same fields but that
//! tag's values therefore cover the values they list; what is left is the same filter over the
//! values none of them lists. This lets a planner tell which of the coverage it is asked for a
//! connection already holds, whatever way the held coverage was packed.
//!
//! Filters of any other shape (no tag list, several tag lists, `ids`, `authors`) are only ever
//! covered by an equal filter. `kinds`, `since`, `until`, `limit` and `search` are part of the
//! shape: a held filter covers nothing of a filter they differ in.
//!
//! ```
//! use grasp_sync_filters::subtract::CoveredValues;
//! use nostr::{Alphabet, Filter, Kind, SingleLetterTag};
//!
//! let e = SingleLetterTag::lowercase(Alphabet::E);
//! let held = Filter::new().kind(Kind::TextNote).custom_tags(e, ["a1", "b2"]).limit(0);
//! let asked = Filter::new().kind(Kind::TextNote).custom_tags(e, ["a1", "c3"]).limit(0);
//!
//! let covered = CoveredValues::of([&held]);
//! let left = covered.remainder(&asked).expect("c3 is not held");
//! assert_eq!(left, Filter::new().kind(Kind::TextNote).custom_tags(e, ["c3"]).limit(0));
//! assert_eq!(covered.remainder(&held), None);
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use nostr::{Filter, SingleLetterTag};

use crate::compact::{CompactFilter, TagValue, without_tags};
use crate::tier::{CoverageTier, TieredFilter};

/// A filter that covers coverage: as it is sent, or in compact form.
#[derive(Debug, Clone, Copy)]
pub enum Covering<'a> {
    /// A filter as it is sent.
    Tiered(&'a TieredFilter),
    /// A filter in compact form (a held live group's).
    Compact(&'a CompactFilter),
}

impl<'a> From<&'a TieredFilter> for Covering<'a> {
    fn from(filter: &'a TieredFilter) -> Covering<'a> {
        Covering::Tiered(filter)
    }
}

impl<'a> From<&'a CompactFilter> for Covering<'a> {
    fn from(filter: &'a CompactFilter) -> Covering<'a> {
        Covering::Compact(filter)
    }
}

impl Covering<'_> {
    fn tier(&self) -> CoverageTier {
        match self {
            Covering::Tiered(filter) => filter.tier,
            Covering::Compact(filter) => filter.tier(),
        }
    }
}

/// `incoming` without the coverage `covering` holds in the same tier ([`CoveredValues`]): a
/// filter all of whose values are covered is left out, one with some of them keeps the others.
/// Coverage held under another tier does not count, as that tier may be retired on its own.
pub fn uncovered<'a, C: Into<Covering<'a>>>(
    covering: impl IntoIterator<Item = C>,
    incoming: Vec<TieredFilter>,
) -> Vec<TieredFilter> {
    let mut covered: BTreeMap<CoverageTier, CoveredValues<'a>> = BTreeMap::new();
    for filter in covering {
        let filter = filter.into();
        let values = covered.entry(filter.tier()).or_default();
        match filter {
            Covering::Tiered(filter) => values.insert(&filter.filter),
            Covering::Compact(filter) => values.insert_compact(filter),
        }
    }
    if covered.is_empty() {
        return incoming;
    }
    incoming
        .into_iter()
        .filter_map(|f| match covered.get(&f.tier) {
            None => Some(f),
            Some(covered) => covered
                .remainder(&f.filter)
                .map(|filter| TieredFilter::new(filter, f.tier)),
        })
        .collect()
}

/// The values a set of filters covers, per filter shape: the filter without its one tag list,
/// and that tag.
#[derive(Debug, Clone, Default)]
pub struct CoveredValues<'a> {
    by_shape: BTreeMap<(Filter, SingleLetterTag), BTreeSet<TagValue<'a>>>,
    exact: BTreeSet<Cow<'a, Filter>>,
}

impl<'a> CoveredValues<'a> {
    /// The coverage of `filters`.
    pub fn of(filters: impl IntoIterator<Item = &'a Filter>) -> CoveredValues<'a> {
        let mut covered = CoveredValues::default();
        for filter in filters {
            covered.insert(filter);
        }
        covered
    }

    /// Adds `filter`'s coverage.
    pub fn insert(&mut self, filter: &'a Filter) {
        self.exact.insert(Cow::Borrowed(filter));
        if let Some((shape, tag, values)) = split_axis(filter) {
            self.by_shape
                .entry((shape, tag))
                .or_default()
                .extend(values.iter().map(|value| TagValue::of(value)));
        }
    }

    /// Adds the coverage of `filter`, in compact form. One over a single tag list covers its
    /// values (and so any filter equal to it); any other is kept whole, to cover an equal
    /// filter.
    pub fn insert_compact(&mut self, filter: &'a CompactFilter) {
        match filter.axis() {
            Some((shape, tag, values)) => self
                .by_shape
                .entry((shape.clone(), tag))
                .or_default()
                .extend(values.values()),
            None => {
                self.exact.insert(Cow::Owned(filter.to_filter()));
            }
        }
    }

    /// Whether nothing is covered.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.by_shape.is_empty()
    }

    /// `filter` over the values the coverage does not hold, or `None` when it holds all of
    /// `filter`'s coverage. A filter of another shape is returned whole unless an equal filter
    /// is covered.
    pub fn remainder(&self, filter: &Filter) -> Option<Filter> {
        if self.exact.contains(filter) {
            return None;
        }
        let Some((shape, tag, values)) = split_axis(filter) else {
            return Some(filter.clone());
        };
        let Some(held) = self.by_shape.get(&(shape, tag)) else {
            return Some(filter.clone());
        };
        let left: BTreeSet<String> = values
            .iter()
            .filter(|value| !held.contains(&TagValue::of(value)))
            .cloned()
            .collect();
        if left.is_empty() {
            return None;
        }
        if left.len() == values.len() {
            return Some(filter.clone());
        }
        let mut reduced = filter.clone();
        reduced.generic_tags.insert(tag, left);
        Some(reduced)
    }
}

/// A filter whose only list of values is one non-empty tag list: the filter without it, the
/// tag, and its values.
fn split_axis(filter: &Filter) -> Option<(Filter, SingleLetterTag, &BTreeSet<String>)> {
    if filter.ids.is_some() || filter.authors.is_some() || filter.generic_tags.len() != 1 {
        return None;
    }
    let (tag, values) = filter.generic_tags.iter().next()?;
    if values.is_empty() {
        return None;
    }
    Some((without_tags(filter), *tag, values))
}

#[cfg(test)]
mod tests;
