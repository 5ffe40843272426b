//! [`LearnedLimits`]: what a relay's refusals and answers taught one connection. The filter-count
//! ceiling lives for a session, with whether it is known (the relay stated it, or accepted a REQ
//! that large) or a guess, and the largest filter count an accepted REQ proved; the
//! retained-REQ byte cap survives reconnects. [`RememberedLimits`] is what a process keeps for
//! the next one: the lowest ceiling a refusal taught (the first ceiling of every session after a
//! restart), whether that ceiling was known, and the byte cap.

use std::time::{Duration, Instant};

use grasp_sync_filters::PackLimits;

use crate::ledger::TRANSIENT_REQ_CAP;

#[cfg(test)]
mod tests;

/// The filter-count ceiling a session starts with.
pub const INITIAL_FILTER_CEILING: usize = 10;
/// How often coverage that does not fit a byte-capped connection is caught up.
pub const CATCH_UP_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// How far each catch-up overlaps the previous one.
pub const CATCH_UP_OVERLAP: Duration = Duration::from_secs(60);

/// The geometric ladder of filter-count ceilings.
const CEILING_LADDER: [usize; 4] = [10, 5, 2, 1];

/// What a filter-count refusal means for the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterCountOutcome {
    /// Regroup the rejected coverage with at most `ceiling` filters per REQ.
    Regroup {
        /// The new filter-count ceiling.
        ceiling: usize,
    },
    /// A one-filter REQ was refused: regrouping cannot help, so this is a policy refusal
    /// (the long `filter_incompatible` pause), and the ceiling is unchanged.
    Policy,
}

/// Limits learned from one connection's refusals and answers.
///
/// The session's filter-count ceiling is *known* when the relay stated it — it advertised
/// `max_filters` in this session (the ceiling is at most that), or a refusal named the size it
/// refused and the ceiling is one below that size — or when a REQ of that many filters was
/// accepted in this session (it reached EOSE with no filter-count refusal). Otherwise it is a
/// guess: the initial ceiling, or a rung of the ladder a refusal that named no size stepped
/// down to, which may still be above the relay's hidden cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnedLimits {
    initial_ceiling: usize,
    /// The initial ceiling is a remembered one that was known when it was kept.
    initial_known: bool,
    filter_ceiling: usize,
    /// The relay stated the session's ceiling (see the type's docs), or it was restored known.
    ceiling_stated: bool,
    /// The most filters a REQ the relay accepted carried, in this session (0: none yet).
    proven_filters: usize,
    retained_byte_cap: Option<usize>,
    /// The lowest ceiling a filter-count refusal taught, in any session.
    refused_ceiling: Option<usize>,
    /// `refused_ceiling` is known: stated by the refusal that taught it, or proven by an
    /// accepted REQ of at least that many filters, in any session.
    refused_ceiling_known: bool,
}

/// What a relay's refusals taught, in the form kept across restarts: the lowest filter-count
/// ceiling a refusal taught, whether that ceiling is known, and the retained-REQ byte cap. None
/// of them holds a NIP-11 value, which every session reads again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RememberedLimits {
    /// Filters per REQ a refusal brought the ceiling down to.
    pub filter_ceiling: Option<usize>,
    /// Whether `filter_ceiling` is known to be within the relay's cap: the refusal that taught
    /// it named the size one above it, or a REQ of that many filters was accepted later. When
    /// `false` the ceiling is a rung of the ladder, an upper bound the relay's cap may lie
    /// below: the sessions that start at it treat it as a guess until a REQ that large is
    /// accepted.
    pub filter_ceiling_known: bool,
    /// The retained-REQ byte cap N.
    pub retained_byte_cap: Option<usize>,
}

impl RememberedLimits {
    /// Whether nothing was learned.
    pub fn is_empty(&self) -> bool {
        self.filter_ceiling.is_none() && self.retained_byte_cap.is_none()
    }
}

impl Default for LearnedLimits {
    fn default() -> Self {
        LearnedLimits::new()
    }
}

impl LearnedLimits {
    /// Nothing learned yet: ceiling [`INITIAL_FILTER_CEILING`], no byte cap.
    pub fn new() -> LearnedLimits {
        LearnedLimits::with_initial_ceiling(INITIAL_FILTER_CEILING)
    }

    /// Nothing learned yet, with a session ceiling of `ceiling` (at least 1) filters per REQ.
    pub fn with_initial_ceiling(ceiling: usize) -> LearnedLimits {
        let ceiling = ceiling.max(1);
        LearnedLimits {
            initial_ceiling: ceiling,
            initial_known: false,
            filter_ceiling: ceiling,
            ceiling_stated: false,
            proven_filters: 0,
            retained_byte_cap: None,
            refused_ceiling: None,
            refused_ceiling_known: false,
        }
    }

    /// What an earlier process learned: every session starts at the remembered ceiling (when
    /// below [`INITIAL_FILTER_CEILING`]) and with the remembered byte cap, so neither costs a
    /// refusal again. A remembered ceiling that was known starts every session known; one that
    /// was a guess stays a guess until a REQ that large is accepted.
    pub fn remembered(remembered: RememberedLimits) -> LearnedLimits {
        let ceiling = remembered
            .filter_ceiling
            .map_or(INITIAL_FILTER_CEILING, |c| {
                c.clamp(1, INITIAL_FILTER_CEILING)
            });
        let known = remembered.filter_ceiling.is_some() && remembered.filter_ceiling_known;
        LearnedLimits {
            initial_known: known,
            ceiling_stated: known,
            retained_byte_cap: remembered.retained_byte_cap,
            refused_ceiling: remembered.filter_ceiling.map(|c| c.max(1)),
            refused_ceiling_known: known,
            ..LearnedLimits::with_initial_ceiling(ceiling)
        }
    }

    /// What to keep for the next process.
    pub fn to_remember(&self) -> RememberedLimits {
        RememberedLimits {
            filter_ceiling: self.refused_ceiling,
            filter_ceiling_known: self.refused_ceiling.is_some() && self.refused_ceiling_known,
            retained_byte_cap: self.retained_byte_cap,
        }
    }

    /// A new connection session: the filter-count ceiling resets, with what proved it; the
    /// byte cap is kept.
    pub fn new_session(&mut self, _now: Instant) {
        self.filter_ceiling = self.initial_ceiling;
        self.ceiling_stated = self.initial_known;
        self.proven_filters = 0;
    }

    /// The relay advertises `max_filters` (NIP-11 `limitation.max_filters`) for this session:
    /// the ceiling drops to it (never below one filter), never rises for it, and is known.
    pub fn handle_advertised_filter_limit(&mut self, max_filters: usize) {
        self.filter_ceiling = self.filter_ceiling.min(max_filters.max(1));
        self.ceiling_stated = true;
    }

    /// The relay answered a REQ of `filters` filters with EOSE, with no filter-count refusal
    /// before it: it takes at least that many per REQ in this session. The largest such count
    /// is kept for the session; it may make the ceiling known, and a ceiling a refusal taught
    /// is known from then on (also for later processes, through [`Self::to_remember`]).
    pub fn handle_accepted_req(&mut self, filters: usize) {
        self.proven_filters = self.proven_filters.max(filters);
        if self
            .refused_ceiling
            .is_some_and(|ceiling| ceiling <= self.proven_filters)
        {
            self.refused_ceiling_known = true;
        }
    }

    /// The most filters a REQ the relay accepted carried in this session (0 before the first
    /// such REQ).
    pub fn proven_filters(&self) -> usize {
        self.proven_filters
    }

    /// The current filter-count ceiling (filters per REQ).
    pub fn filter_ceiling(&self) -> usize {
        self.filter_ceiling
    }

    /// Whether the ceiling is known to be within the relay's cap: the relay stated it in this
    /// session (advertised `max_filters`, or a refusal named the size one above it), it was
    /// restored known from an earlier process, or a REQ of at least that many filters was
    /// accepted in this session. Otherwise the ceiling is a guess, and a REQ of several filters
    /// may be refused for its filter count.
    pub fn ceiling_known(&self) -> bool {
        self.ceiling_stated || self.proven_filters >= self.filter_ceiling
    }

    /// The most filters per REQ the relay is known to take in this session: the ceiling when
    /// it is known, else the largest count an accepted REQ proved (never above the ceiling).
    /// `None` when neither is known yet.
    pub fn trusted_filter_ceiling(&self) -> Option<usize> {
        if self.ceiling_known() {
            Some(self.filter_ceiling)
        } else {
            Some(self.proven_filters.min(self.filter_ceiling)).filter(|n| *n > 0)
        }
    }

    /// A REQ of `rejected_group_size` filters (if known) was refused for its filter count.
    ///
    /// The ceiling steps down the ladder 10 → 5 → 2 → 1, or straight to the rejected size minus
    /// one when that is lower; it never rises within a session. A ceiling taken from the
    /// rejected size is known; a rung of the ladder is a guess until a REQ that large is
    /// accepted ([`Self::handle_accepted_req`]).
    pub fn handle_filter_count_refusal(
        &mut self,
        _now: Instant,
        rejected_group_size: Option<usize>,
    ) -> FilterCountOutcome {
        if rejected_group_size.is_some_and(|size| size <= 1) || self.filter_ceiling <= 1 {
            return FilterCountOutcome::Policy;
        }
        let ladder = CEILING_LADDER
            .iter()
            .copied()
            .find(|step| *step < self.filter_ceiling)
            .unwrap_or(1);
        let from_size = rejected_group_size.map_or(usize::MAX, |size| size - 1);
        self.filter_ceiling = ladder.min(from_size).max(1);
        self.ceiling_stated = from_size <= ladder;
        let known = self.ceiling_known();
        match self.refused_ceiling {
            Some(lowest) if lowest < self.filter_ceiling => {}
            Some(lowest) if lowest == self.filter_ceiling => self.refused_ceiling_known |= known,
            _ => {
                self.refused_ceiling = Some(self.filter_ceiling);
                self.refused_ceiling_known = known;
            }
        }
        FilterCountOutcome::Regroup {
            ceiling: self.filter_ceiling,
        }
    }

    /// The relay refused with "active subscriptions exceed max size `bytes` bytes". The smallest
    /// cap seen is kept, across sessions.
    pub fn handle_retained_bytes_refusal(&mut self, _now: Instant, bytes: usize) {
        self.retained_byte_cap = Some(self.retained_byte_cap.map_or(bytes, |cap| cap.min(bytes)));
    }

    /// The learned retained-REQ byte cap N, if any.
    pub fn retained_byte_cap(&self) -> Option<usize> {
        self.retained_byte_cap
    }

    /// Bytes persistent groups may retain: N minus one maximum transient REQ
    /// (`max_transient_req_bytes`), or `None` when no cap was learned.
    pub fn persistent_byte_budget(&self, max_transient_req_bytes: usize) -> Option<usize> {
        self.retained_byte_cap
            .map(|cap| cap.saturating_sub(max_transient_req_bytes))
    }

    /// `base` with its filter-count ceiling lowered to the learned one.
    pub fn pack_limits(&self, base: PackLimits) -> PackLimits {
        base.with_max_filters(base.max_filters_per_req.min(self.filter_ceiling))
    }

    /// `base` with its filter-count ceiling lowered to the trusted one
    /// ([`Self::trusted_filter_ceiling`]; one filter when none is known): REQs packed under it
    /// never exceed what the relay stated or accepted.
    pub fn trusted_pack_limits(&self, base: PackLimits) -> PackLimits {
        let trusted = self.trusted_filter_ceiling().unwrap_or(1);
        base.with_max_filters(base.max_filters_per_req.min(trusted))
    }

    /// Whether transient REQs must be serialised (a byte cap was learned).
    pub fn serialises_transients(&self) -> bool {
        self.retained_byte_cap.is_some()
    }

    /// The transient REQ class cap on this connection: one when serialised, else five.
    pub fn transient_req_cap(&self) -> usize {
        if self.serialises_transients() {
            1
        } else {
            TRANSIENT_REQ_CAP
        }
    }
}

/// Reads N from a CLOSED reason of the form "active subscriptions exceed max size N bytes"
/// (any prefix such as "error: " is allowed). Any other text gives `None`.
pub fn parse_retained_bytes_refusal(reason: &str) -> Option<usize> {
    const MARKER: &str = "active subscriptions exceed max size ";
    let start = reason.find(MARKER)? + MARKER.len();
    let rest = &reason[start..];
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if digits_end == 0 || !rest[digits_end..].trim_start().starts_with("bytes") {
        return None;
    }
    rest[..digits_end].parse().ok()
}
