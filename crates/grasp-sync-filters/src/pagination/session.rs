//! `RelayPageSession`: the adaptive page threshold of one relay connection session.

/// The lowest page threshold ever used: below the smallest relay default page size found (100).
pub const MIN_PAGE_THRESHOLD: usize = 90;

/// What one page says about its filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The page reached the threshold: fetch the next one.
    More,
    /// The page fell short: the filter is exhausted.
    Exhausted,
    /// Only the unverified hint calls it exhausted: fetch one verification page.
    Verify,
}

/// What the relay's advertised `default_limit` is worth at the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    /// No usable hint was advertised.
    Absent,
    /// Advertised, trusted, never yet decisive.
    Unverified(usize),
    /// Trusted while its first decisive page is being verified.
    Verifying(usize),
    /// Survived its verification page.
    Verified(usize),
    /// A verification page found events the hint would have missed; learned-only from now on.
    Dropped,
}

/// The page threshold of one relay connection session.
///
/// `threshold = max(90, floor(0.9 × estimated_cap))`, where `estimated_cap` is the largest raw
/// page seen on this session, raised to the advertised NIP-11 `default_limit` while that hint
/// is trusted. `max_limit` is never used: it bounds explicit limits, and pages here are
/// requested without one. Create a new session on every reconnect, so a lowered relay cap
/// never leaves a stale threshold behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayPageSession {
    largest_page: usize,
    hint: Hint,
}

impl RelayPageSession {
    /// A fresh session; `advertised_default_limit` is the NIP-11 `limitation.default_limit`, if
    /// the relay advertised one.
    pub fn new(advertised_default_limit: Option<usize>) -> Self {
        let hint = match advertised_default_limit {
            Some(limit) if limit > 0 => Hint::Unverified(limit),
            _ => Hint::Absent,
        };
        Self {
            largest_page: 0,
            hint,
        }
    }

    /// The largest raw page (events delivered for one filter before one EOSE) seen so far.
    pub fn largest_page(&self) -> usize {
        self.largest_page
    }

    /// The advertised `default_limit` while it is still trusted.
    pub fn trusted_hint(&self) -> Option<usize> {
        match self.hint {
            Hint::Unverified(limit) | Hint::Verifying(limit) | Hint::Verified(limit) => Some(limit),
            Hint::Absent | Hint::Dropped => None,
        }
    }

    /// Whether the hint was advertised and later dropped by a verification page.
    pub fn hint_dropped(&self) -> bool {
        self.hint == Hint::Dropped
    }

    /// The estimated per-filter page size: the largest page seen, or the trusted hint if larger.
    pub fn estimated_cap(&self) -> usize {
        self.largest_page.max(self.trusted_hint().unwrap_or(0))
    }

    /// Events a page must reach for its filter to get a next page.
    pub fn threshold(&self) -> usize {
        threshold_for(self.estimated_cap())
    }

    /// The threshold from observed pages alone, ignoring any hint.
    pub fn learned_threshold(&self) -> usize {
        threshold_for(self.largest_page)
    }

    /// Records one filter's raw page size.
    pub(crate) fn observe_page(&mut self, raw_events: usize) {
        self.largest_page = self.largest_page.max(raw_events);
    }

    /// Decides what a page of `raw_events` (already observed) says about its filter.
    ///
    /// A page the hint alone would declare exhausted is never trusted to the hint before the
    /// hint survived a verification page: the first such page starts the verification, and
    /// any other such page while it runs is verified too.
    pub(crate) fn decide(&mut self, raw_events: usize) -> Decision {
        if raw_events >= self.threshold() {
            return Decision::More;
        }
        if raw_events < self.learned_threshold() {
            return Decision::Exhausted;
        }
        match self.hint {
            Hint::Verified(_) => Decision::Exhausted,
            Hint::Unverified(limit) => {
                self.hint = Hint::Verifying(limit);
                Decision::Verify
            }
            Hint::Verifying(_) => Decision::Verify,
            // Without a trusted hint the threshold is the learned one; unreachable.
            Hint::Absent | Hint::Dropped => Decision::More,
        }
    }

    /// The verification page found nothing new: the hint stays trusted.
    pub(crate) fn confirm_hint(&mut self) {
        if let Hint::Verifying(limit) = self.hint {
            self.hint = Hint::Verified(limit);
        }
    }

    /// The verification page found new events: the hint is dropped for the session.
    pub(crate) fn drop_hint(&mut self) {
        if self.hint != Hint::Absent {
            self.hint = Hint::Dropped;
        }
    }
}

/// `max(90, floor(0.9 × cap))`, without overflow.
fn threshold_for(cap: usize) -> usize {
    let ninety_percent = cap / 10 * 9 + cap % 10 * 9 / 10;
    ninety_percent.max(MIN_PAGE_THRESHOLD)
}
