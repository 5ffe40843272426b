//! Refusal classification: any NOTICE, CLOSED, NEG-ERR or OK-false text becomes a bounded
//! [`RefusalCategory`], with the submitted filter count or retained-byte cap when the text states
//! them. Unknown text is [`RefusalCategory::Unknown`]; nothing here can panic on relay input.
//!
//! The NIP-01 machine-readable prefix gives the family; known texts of real relays refine it,
//! because relays reuse prefixes for unrelated limits (rust-nostr reports a subscription-count
//! limit as `rate-limited: too many REQs` and a filter-count limit as `blocked: too many filters`).

/// The bounded kinds of refusal a relay can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefusalCategory {
    /// Query or message rate exceeded ("rate-limited", "too many queries").
    RateLimited,
    /// Too many concurrent negentropy sessions.
    TooManyConcurrentNeg,
    /// Too many subscriptions open on the connection.
    TooManySubscriptions,
    /// Too many filters in one REQ.
    TooManyFilters,
    /// The connection's retained subscription bytes would exceed the relay's cap.
    RetainedBytesExceeded,
    /// NIP-01 `blocked:` (or `mute:`).
    Blocked,
    /// NIP-01 `restricted:`.
    Restricted,
    /// NIP-42 `auth-required:`.
    AuthRequired,
    /// NIP-01 `invalid:` not about a filter.
    Invalid,
    /// A filter the relay cannot serve: invalid filter, oversized filter item, limit rules.
    InvalidFilter,
    /// NIP-01 `duplicate:`.
    Duplicate,
    /// NIP-13 `pow:`.
    Pow,
    /// NIP-01 `error:`.
    Error,
    /// Anything else, including empty text.
    Unknown,
}

impl RefusalCategory {
    /// Every category, in declaration order.
    pub const ALL: [RefusalCategory; 14] = [
        RefusalCategory::RateLimited,
        RefusalCategory::TooManyConcurrentNeg,
        RefusalCategory::TooManySubscriptions,
        RefusalCategory::TooManyFilters,
        RefusalCategory::RetainedBytesExceeded,
        RefusalCategory::Blocked,
        RefusalCategory::Restricted,
        RefusalCategory::AuthRequired,
        RefusalCategory::Invalid,
        RefusalCategory::InvalidFilter,
        RefusalCategory::Duplicate,
        RefusalCategory::Pow,
        RefusalCategory::Error,
        RefusalCategory::Unknown,
    ];

    /// A stable lowercase label, safe as a metric label value.
    pub fn metric_label(self) -> &'static str {
        match self {
            RefusalCategory::RateLimited => "rate_limited",
            RefusalCategory::TooManyConcurrentNeg => "too_many_concurrent_neg",
            RefusalCategory::TooManySubscriptions => "too_many_subscriptions",
            RefusalCategory::TooManyFilters => "too_many_filters",
            RefusalCategory::RetainedBytesExceeded => "retained_bytes_exceeded",
            RefusalCategory::Blocked => "blocked",
            RefusalCategory::Restricted => "restricted",
            RefusalCategory::AuthRequired => "auth_required",
            RefusalCategory::Invalid => "invalid",
            RefusalCategory::InvalidFilter => "invalid_filter",
            RefusalCategory::Duplicate => "duplicate",
            RefusalCategory::Pow => "pow",
            RefusalCategory::Error => "error",
            RefusalCategory::Unknown => "unknown",
        }
    }

    /// Position in [`RefusalCategory::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A classified refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// What kind of refusal this is.
    pub category: RefusalCategory,
    /// The number of filters the relay says were submitted, when it says so (strfry does;
    /// relays that state their configured ceiling instead give `None`).
    pub submitted_filters: Option<u32>,
    /// The retained-subscription byte cap the relay states, when it does.
    pub byte_cap: Option<u64>,
}

impl Refusal {
    /// A refusal of `category` with no numbers.
    pub fn new(category: RefusalCategory) -> Self {
        Self {
            category,
            submitted_filters: None,
            byte_cap: None,
        }
    }
}

/// Largest filter count believed when a relay states one; larger numbers are ignored.
pub const MAX_PLAUSIBLE_FILTERS: u32 = 4096;
/// Largest retained-byte cap believed when a relay states one (4 GiB); larger numbers and zero
/// are ignored.
pub const MAX_PLAUSIBLE_BYTE_CAP: u64 = 1 << 32;

/// Only this much of a relay's text is examined.
const MAX_EXAMINED: usize = 1024;

/// Classifies the text of a NOTICE, CLOSED, NEG-ERR or OK-false message.
pub fn classify(text: &str) -> Refusal {
    let lower = examined(text).to_ascii_lowercase();
    let lower = lower.trim();
    let prefixed = prefix_category(lower);
    for known in KNOWN_TEXTS {
        if let Some(at) = lower.find(known.needle) {
            let after = &lower[at + known.needle.len()..];
            return match known.category {
                RefusalCategory::TooManyFilters if known.states_submitted => Refusal {
                    submitted_filters: first_number(after)
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|n| (1..=MAX_PLAUSIBLE_FILTERS).contains(n)),
                    ..Refusal::new(RefusalCategory::TooManyFilters)
                },
                RefusalCategory::RetainedBytesExceeded => Refusal {
                    byte_cap: first_number(after)
                        .filter(|n| (1..=MAX_PLAUSIBLE_BYTE_CAP).contains(n)),
                    ..Refusal::new(RefusalCategory::RetainedBytesExceeded)
                },
                category => Refusal::new(category),
            };
        }
    }
    Refusal::new(prefixed.unwrap_or(RefusalCategory::Unknown))
}

/// A known relay text: a lowercase substring and what it means.
struct KnownText {
    needle: &'static str,
    category: RefusalCategory,
    /// The number after the needle is the submitted filter count.
    states_submitted: bool,
}

const fn known(needle: &'static str, category: RefusalCategory) -> KnownText {
    KnownText {
        needle,
        category,
        states_submitted: false,
    }
}

/// Known texts, checked in order before the prefix decides. The relay each comes from is in the
/// test table next to its verbatim text.
const KNOWN_TEXTS: &[KnownText] = &[
    // strfry: negentropy views share the subscription budget.
    known(
        "too many concurrent neg requests",
        RefusalCategory::TooManyConcurrentNeg,
    ),
    // strfry.
    known(
        "too many concurrent reqs",
        RefusalCategory::TooManySubscriptions,
    ),
    // rust-nostr relay builder: a subscription-count limit behind a rate-limited prefix.
    known("too many reqs", RefusalCategory::TooManySubscriptions),
    // rnostr.
    known(
        "number of subscriptions exceeds limit",
        RefusalCategory::TooManySubscriptions,
    ),
    // nostream.
    known(
        "too many subscriptions",
        RefusalCategory::TooManySubscriptions,
    ),
    // nostr-rs-relay.
    known(
        "maximum concurrent subscription count reached",
        RefusalCategory::TooManySubscriptions,
    ),
    // rust-nostr relay builder, with the cap in bytes.
    known(
        "active subscriptions exceed max size",
        RefusalCategory::RetainedBytesExceeded,
    ),
    // strfry filter validation, with the submitted count.
    KnownText {
        needle: "invalid number of filters",
        category: RefusalCategory::TooManyFilters,
        states_submitted: true,
    },
    // rust-nostr relay builder (no number) and nostream (its ceiling, not the submitted count).
    known("too many filters", RefusalCategory::TooManyFilters),
    // rnostr (its ceiling).
    known("limitation.max_filters", RefusalCategory::TooManyFilters),
    // rust-nostr relay builder query-rate limit.
    known("too many queries", RefusalCategory::RateLimited),
    // nostream NOTICE, no prefix.
    known("rate limited", RefusalCategory::RateLimited),
    // strfry filter parsing and validation.
    known("filter item too large", RefusalCategory::InvalidFilter),
    known("filter item too small", RefusalCategory::InvalidFilter),
    known(
        "total filter items too large",
        RefusalCategory::InvalidFilter,
    ),
    known("too many tags in filter", RefusalCategory::InvalidFilter),
    known("unindexed tag filter", RefusalCategory::InvalidFilter),
    known("unrecognised filter item", RefusalCategory::InvalidFilter),
    known("too many kinds in filter", RefusalCategory::InvalidFilter),
    known("kind not allowed", RefusalCategory::InvalidFilter),
    known(
        "filter must have exactly one author",
        RefusalCategory::InvalidFilter,
    ),
    // rust-nostr relay builder: an ids filter above the relay's result cap.
    known(
        "requested too many event ids",
        RefusalCategory::InvalidFilter,
    ),
    // khatru filter policies.
    known(
        "too many things to filter for",
        RefusalCategory::InvalidFilter,
    ),
    known("can't handle empty filters", RefusalCategory::InvalidFilter),
    // nostream.
    known("limit too high", RefusalCategory::InvalidFilter),
    // rnostr.
    known("limitation.max_limit", RefusalCategory::InvalidFilter),
];

/// The NIP-01 machine-readable prefix before the first colon, if it is one.
fn prefix_category(lower: &str) -> Option<RefusalCategory> {
    let (prefix, _) = lower.split_once(':')?;
    Some(match prefix.trim() {
        "rate-limited" => RefusalCategory::RateLimited,
        "blocked" | "mute" => RefusalCategory::Blocked,
        "restricted" => RefusalCategory::Restricted,
        "auth-required" => RefusalCategory::AuthRequired,
        "invalid" => RefusalCategory::Invalid,
        "duplicate" => RefusalCategory::Duplicate,
        "pow" => RefusalCategory::Pow,
        "error" => RefusalCategory::Error,
        _ => return None,
    })
}

/// The first run of ASCII digits in `text`, if it fits in a `u64` (at most 19 digits).
fn first_number(text: &str) -> Option<u64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits = &text[start..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    if end > 19 {
        return None;
    }
    digits[..end].bytes().try_fold(0u64, |acc, b| {
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// At most [`MAX_EXAMINED`] bytes of `text`, cut on a character boundary.
fn examined(text: &str) -> &str {
    if text.len() <= MAX_EXAMINED {
        return text;
    }
    let mut end = MAX_EXAMINED;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Refusals counted per category.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefusalCounts {
    counts: [u64; RefusalCategory::ALL.len()],
}

impl RefusalCounts {
    /// The count for one category.
    pub fn get(&self, category: RefusalCategory) -> u64 {
        self.counts[category.index()]
    }

    /// Every category with its count, in [`RefusalCategory::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (RefusalCategory, u64)> + '_ {
        RefusalCategory::ALL
            .iter()
            .map(|category| (*category, self.get(*category)))
    }

    /// The sum over all categories.
    pub fn total(&self) -> u64 {
        self.counts
            .iter()
            .fold(0u64, |sum, n| sum.saturating_add(*n))
    }

    pub(crate) fn record(&mut self, category: RefusalCategory) {
        let slot = &mut self.counts[category.index()];
        *slot = slot.saturating_add(1);
    }
}

#[cfg(test)]
mod tests;
