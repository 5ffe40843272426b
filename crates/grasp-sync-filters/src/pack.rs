//! REQ packing: sorts, deduplicates and groups tiered filters into REQ-sized groups.
//!
//! A group is what one REQ message carries. Its size is measured on the real serialisation:
//! every filter adds its JSON plus the comma that separates it from what precedes it in
//! `["REQ","<subscription id>",<filter>,<filter>...]`.

use std::io;

use nostr::Filter;

use crate::budget::json_array_bytes;
use crate::error::FilterError;
use crate::tier::{CoverageTier, TieredFilter};

/// Default REQ payload budget: 96 KB of filters per message, a margin under the 128 KB message
/// cap of the tightest relays observed.
pub const DEFAULT_MAX_REQ_BYTES: usize = 96 * 1024;

/// Default ceiling on filters per REQ, before any relay-specific lowering.
pub const DEFAULT_MAX_FILTERS_PER_REQ: usize = 10;

/// Bounds on one REQ message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackLimits {
    /// Largest payload (filters and their separators) one REQ may carry, in bytes.
    pub max_req_bytes: usize,
    /// Largest number of filters one REQ may carry.
    pub max_filters_per_req: usize,
}

impl Default for PackLimits {
    fn default() -> Self {
        Self {
            max_req_bytes: DEFAULT_MAX_REQ_BYTES,
            max_filters_per_req: DEFAULT_MAX_FILTERS_PER_REQ,
        }
    }
}

impl PackLimits {
    /// The same byte budget with a different filter-count ceiling (the ledger lowers it to 5, 2
    /// or 1 for strict relays).
    pub fn with_max_filters(self, max_filters_per_req: usize) -> Self {
        Self {
            max_filters_per_req,
            ..self
        }
    }

    fn validate(&self) -> Result<(), FilterError> {
        if self.max_filters_per_req == 0 {
            return Err(FilterError::InvalidLimits(
                "a REQ must be allowed at least one filter",
            ));
        }
        if self.max_req_bytes == 0 {
            return Err(FilterError::InvalidLimits(
                "a REQ must be allowed some bytes",
            ));
        }
        Ok(())
    }
}

/// The filters of one REQ message, all of one coverage tier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FilterGroup {
    /// The filters, sorted.
    pub filters: Vec<TieredFilter>,
    /// Bytes these filters add to a REQ message: each filter's JSON plus one separating comma.
    pub payload_bytes: usize,
}

impl FilterGroup {
    /// The tier shared by every filter of the group (`None` only for an empty group).
    pub fn tier(&self) -> Option<CoverageTier> {
        self.filters.first().map(|f| f.tier)
    }

    /// The plain filters, in order, ready for a REQ.
    pub fn to_filters(&self) -> Vec<Filter> {
        self.filters.iter().map(|f| f.filter.clone()).collect()
    }

    /// Size of the complete REQ message carrying this group under `subscription_id`.
    pub fn req_message_bytes(&self, subscription_id: &str) -> usize {
        req_envelope_bytes(subscription_id).saturating_add(self.payload_bytes)
    }
}

/// Bytes of the filter's JSON as sent (without the separating comma).
///
/// The tag values, which hold nearly all the bytes, are measured with the wire serialiser's
/// escaping rules; everything else is measured by serialising it.
pub fn filter_payload_bytes(filter: &Filter) -> usize {
    let rest = Filter {
        ids: filter.ids.clone(),
        authors: filter.authors.clone(),
        kinds: filter.kinds.clone(),
        search: filter.search.clone(),
        since: filter.since,
        until: filter.until,
        limit: filter.limit,
        generic_tags: Default::default(),
    };
    let mut counter = ByteCounter(0);
    let rest_bytes = match nostr::serde_json::to_writer(&mut counter, &rest) {
        Ok(()) => counter.0,
        // Unreachable for a filter; an unmeasurable filter must never fit a budget.
        Err(_) => return usize::MAX,
    };
    // `{}` plus, per tag, a separator (none before the first entry of an empty object),
    // `"#x":` and the value array.
    let tags: usize = filter
        .generic_tags
        .values()
        .map(|values| 1 + 5 + json_array_bytes(values.iter()))
        .sum();
    let first_separator = usize::from(rest_bytes == 2 && !filter.generic_tags.is_empty());
    rest_bytes + tags - first_separator
}

/// Bytes of a REQ message around its filters: `["REQ","<subscription id>"` and the closing `]`.
pub fn req_envelope_bytes(subscription_id: &str) -> usize {
    // `["REQ",` + the quoted id + `]`.
    7 + crate::budget::json_string_bytes(subscription_id) + 1
}

/// Packs filters into REQ groups.
///
/// The filters are sorted (by tier, then by tag and value family, then by filter) and exact
/// duplicates removed (a duplicate keeps its highest-priority tier) before grouping, so
/// equivalent coverage yields identical groups whatever the input order. Groups never mix tiers. Within a tier, filters are taken in
/// order and a group is closed when the next filter would exceed either limit.
///
/// A filter that alone exceeds `max_req_bytes` is a [`FilterError::FilterTooLarge`].
pub fn pack_requests(
    filters: Vec<TieredFilter>,
    limits: &PackLimits,
) -> Result<Vec<FilterGroup>, FilterError> {
    limits.validate()?;
    let mut filters = filters;
    // Deduplicate across tiers first, keeping the highest-priority tier of each filter.
    filters.sort_unstable_by(|a, b| a.filter.cmp(&b.filter).then(a.tier.cmp(&b.tier)));
    filters.dedup_by(|later, kept| later.filter == kept.filter);
    // Within a tier, keep each tag and each value family (event IDs, coordinates) together so
    // one family's filters fill consecutive groups.
    let mut keyed: Vec<_> = filters
        .into_iter()
        .map(|f| ((f.tier, family_key(&f.filter)), f))
        .collect();
    keyed.sort_by(|(a_key, a), (b_key, b)| a_key.cmp(b_key).then_with(|| a.filter.cmp(&b.filter)));

    let mut groups = Vec::new();
    let mut current = FilterGroup {
        filters: Vec::new(),
        payload_bytes: 0,
    };
    for (_, filter) in keyed {
        let bytes = filter_payload_bytes(&filter.filter).saturating_add(1);
        if bytes > limits.max_req_bytes {
            return Err(FilterError::FilterTooLarge {
                bytes,
                budget: limits.max_req_bytes,
            });
        }
        let fits = current.tier() == Some(filter.tier)
            && current.filters.len() < limits.max_filters_per_req
            && current.payload_bytes + bytes <= limits.max_req_bytes;
        if !fits && !current.filters.is_empty() {
            groups.push(std::mem::replace(
                &mut current,
                FilterGroup {
                    filters: Vec::new(),
                    payload_bytes: 0,
                },
            ));
        }
        current.payload_bytes += bytes;
        current.filters.push(filter);
    }
    if !current.filters.is_empty() {
        groups.push(current);
    }
    Ok(groups)
}

/// The ordering key that keeps families together: the tags a filter uses, then whether its
/// first tag holds coordinates (`kind:pubkey:identifier`) rather than event IDs.
fn family_key(filter: &Filter) -> (Vec<nostr::SingleLetterTag>, bool) {
    let tags = filter.generic_tags.keys().copied().collect();
    let coordinates = filter
        .generic_tags
        .values()
        .next()
        .and_then(|values| values.first())
        .is_some_and(|value| value.contains(':'));
    (tags, coordinates)
}

/// An `io::Write` that only counts bytes.
struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
