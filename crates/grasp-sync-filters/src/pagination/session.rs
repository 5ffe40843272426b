//! `RelayPageSession`: what one relay connection session taught about paging: the explicit
//! `limit` every page carries, the adaptive page threshold, and the relay's learned quirks
//! (result order, `until` semantics, whether the result cap is per filter or per REQ).

/// The lowest page threshold ever used: below the smallest relay default page size found (100).
pub const MIN_PAGE_THRESHOLD: usize = 90;

/// The `limit` a page carries when the relay advertised none.
pub const DEFAULT_PAGE_LIMIT: usize = 500;

/// The largest `limit` a page ever carries, whatever the relay advertises.
pub const MAX_PAGE_LIMIT: usize = 5_000;

/// What the relay's NIP-11 document says about result sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageHints {
    /// `limitation.max_limit`: the largest explicit `limit` the relay honours.
    pub max_limit: Option<usize>,
    /// `limitation.default_limit`: what a filter without `limit` gets.
    pub default_limit: Option<usize>,
}

/// Whether the relay's result cap applies to each filter or to a whole REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapScope {
    /// Not learned yet: a short filter of a full multi-filter REQ is verified, by reading on
    /// past what it got (with the REQ's other suspects) or by sending it again alone.
    Unknown,
    /// One REQ delivered more than a single filter's cap: each filter has its own allowance.
    PerFilter,
    /// A verified filter found events its multi-filter REQ had cut: the relay caps the sum
    /// of a REQ's filters (about `cap` events), so pages go one filter per REQ.
    PerRequest {
        /// The REQ total seen when the cap was learned, in distinct events.
        cap: usize,
    },
}

/// What the relay's pages showed about its behaviour, learned per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayQuirks {
    /// A full page came oldest first: the relay returns the oldest matches, so walks go
    /// forward with `since`.
    pub oldest_first: bool,
    /// `until: T` was answered without the events at `T` it must include: `until` is
    /// exclusive, so pages ask for `until: T + 1`.
    pub exclusive_until: bool,
    /// The scope of the result cap.
    pub cap_scope: CapScope,
}

impl Default for RelayQuirks {
    fn default() -> Self {
        Self {
            oldest_first: false,
            exclusive_until: false,
            cap_scope: CapScope::Unknown,
        }
    }
}

impl RelayQuirks {
    /// Labels of the quirks learned, for logs, status and metrics (a bounded set).
    pub fn labels(&self) -> Vec<&'static str> {
        let mut labels = Vec::new();
        if self.oldest_first {
            labels.push("oldest_first");
        }
        if self.exclusive_until {
            labels.push("exclusive_until");
        }
        if let CapScope::PerRequest { .. } = self.cap_scope {
            labels.push("cap_per_request");
        }
        labels
    }
}

/// Paging knowledge of one relay connection session.
///
/// Every page carries `limit` = [`page_limit`](Self::page_limit): the advertised `max_limit`,
/// else the advertised `default_limit`, else [`DEFAULT_PAGE_LIMIT`], at most
/// [`MAX_PAGE_LIMIT`]. A relay may still answer with fewer, so whether a page is full is
/// decided by the design's threshold, `max(90, floor(0.9 × estimated_cap))`, where
/// `estimated_cap` is the largest page (in distinct events) seen on this session, never above
/// the limit sent nor a learned per-REQ cap. An advertised size never raises the threshold: a relay may cap
/// pages below what it advertises, and no follow-up page can tell a filter that ran out from a
/// lower cap. Create a new session on every reconnect, so a lowered relay cap or a changed
/// implementation leaves nothing stale behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayPageSession {
    page_limit: usize,
    largest_page: usize,
    quirks: RelayQuirks,
    /// The largest REQ total (all filters, distinct events) seen.
    largest_request: usize,
    /// The largest single-filter page later proven cut by the relay's cap.
    proven_cap: usize,
    /// A full page came newest first.
    newest_first_seen: bool,
    /// A page asked `until: T` brought events at `T`.
    inclusive_until_seen: bool,
}

impl RelayPageSession {
    /// A fresh session from the relay's advertised hints.
    pub fn new(hints: PageHints) -> Self {
        let advertised = hints
            .max_limit
            .or(hints.default_limit)
            .filter(|limit| *limit > 0);
        let page_limit = advertised
            .unwrap_or(DEFAULT_PAGE_LIMIT)
            .clamp(1, MAX_PAGE_LIMIT);
        Self {
            page_limit,
            largest_page: 0,
            quirks: RelayQuirks::default(),
            largest_request: 0,
            proven_cap: 0,
            newest_first_seen: false,
            inclusive_until_seen: false,
        }
    }

    /// The `limit` every page of this session carries.
    pub fn page_limit(&self) -> usize {
        self.page_limit
    }

    /// What the session learned about the relay's behaviour.
    pub fn quirks(&self) -> RelayQuirks {
        self.quirks
    }

    /// The most filters one paging REQ may carry: one once the relay is known to cap whole
    /// REQs.
    pub fn filters_per_request(&self) -> Option<usize> {
        match self.quirks.cap_scope {
            CapScope::PerRequest { .. } => Some(1),
            CapScope::Unknown | CapScope::PerFilter => None,
        }
    }

    /// The largest page (distinct events delivered for one filter before one EOSE) seen so far.
    pub fn largest_page(&self) -> usize {
        self.largest_page
    }

    /// The estimated page size: the largest page seen, never above the limit sent nor above a
    /// learned per-REQ cap.
    pub fn estimated_cap(&self) -> usize {
        let per_request = match self.quirks.cap_scope {
            CapScope::PerRequest { cap } => cap,
            CapScope::Unknown | CapScope::PerFilter => usize::MAX,
        };
        self.largest_page.min(self.page_limit).min(per_request)
    }

    /// Events a page must reach for its filter to get a next page.
    pub fn threshold(&self) -> usize {
        self.threshold_for(self.estimated_cap())
    }

    /// Records one filter's page size, in distinct events.
    pub(crate) fn observe_page(&mut self, distinct_events: usize) {
        self.largest_page = self.largest_page.max(distinct_events);
    }

    /// Records one REQ's distinct events; a multi-filter REQ that delivered more distinct
    /// events than a proven single-filter page's raw deliveries shows each filter has its own
    /// allowance. (Distinct against raw holds whether or not the relay counts repeats against
    /// its cap: events sent twice never pass for a wider allowance.)
    pub(crate) fn observe_request(&mut self, distinct_events: usize, filters: usize) {
        self.largest_request = self.largest_request.max(distinct_events);
        // A single-filter cap equal to our own limit says nothing about a REQ's cap.
        if filters > 1
            && self.proven_cap > 0
            && self.proven_cap < self.page_limit
            && distinct_events > self.proven_cap
            && self.quirks.cap_scope == CapScope::Unknown
        {
            self.quirks.cap_scope = CapScope::PerFilter;
        }
    }

    /// Whether a multi-filter REQ of `total` raw deliveries may have been cut as a whole, so
    /// its short filters prove nothing. (Raw, so repeats only make a REQ more suspect.)
    pub(crate) fn request_may_be_cut(&self, total: usize) -> bool {
        match self.quirks.cap_scope {
            CapScope::PerFilter => false,
            // A REQ planned before the cap was learned.
            CapScope::PerRequest { cap } => total >= ninety_percent(cap),
            CapScope::Unknown => {
                total >= self.threshold().max(ninety_percent(self.largest_request))
            }
        }
    }

    /// A single-filter page of `raw_events` was followed by a page with events it had cut.
    pub(crate) fn observe_proven_cap(&mut self, raw_events: usize) {
        self.proven_cap = self.proven_cap.max(raw_events);
    }

    /// A verified filter found events its multi-filter REQ of `distinct_events` had cut.
    pub(crate) fn learn_per_request_cap(&mut self, distinct_events: usize) {
        if let CapScope::PerRequest { cap } = self.quirks.cap_scope {
            self.quirks.cap_scope = CapScope::PerRequest {
                cap: cap.min(distinct_events),
            };
        } else {
            self.quirks.cap_scope = CapScope::PerRequest {
                cap: distinct_events,
            };
        }
    }

    /// A full page came oldest first.
    pub(crate) fn learn_oldest_first(&mut self) {
        self.quirks.oldest_first = true;
    }

    /// A full page came newest first.
    pub(crate) fn learn_newest_first(&mut self) {
        self.newest_first_seen = true;
    }

    /// The order full pages came in, if the session saw one: [`Order::Mixed`] when it saw
    /// both.
    ///
    /// [`Order::Mixed`]: super::page::Order::Mixed
    pub(crate) fn known_order(&self) -> super::page::Order {
        use super::page::Order;
        match (self.quirks.oldest_first, self.newest_first_seen) {
            (true, true) => Order::Mixed,
            (true, false) => Order::OldestFirst,
            (false, true) => Order::NewestFirst,
            (false, false) => Order::Unknown,
        }
    }

    /// Whether the session knows how the relay reads `until`.
    pub(crate) fn until_known(&self) -> bool {
        self.quirks.exclusive_until || self.inclusive_until_seen
    }

    /// A page asked `until: T` brought events at `T`.
    pub(crate) fn learn_inclusive_until(&mut self) {
        if !self.quirks.exclusive_until {
            self.inclusive_until_seen = true;
        }
    }

    /// `until` proved exclusive.
    pub(crate) fn learn_exclusive_until(&mut self) {
        if !self.inclusive_until_seen {
            self.quirks.exclusive_until = true;
        }
    }

    /// Whether a page of `raw_events` (already observed) calls for a next page.
    pub(crate) fn is_full(&self, raw_events: usize) -> bool {
        raw_events >= self.threshold()
    }

    /// `min(limit, max(90, floor(0.9 × cap)))`.
    fn threshold_for(&self, cap: usize) -> usize {
        ninety_percent(cap)
            .max(MIN_PAGE_THRESHOLD)
            .min(self.page_limit)
    }
}

/// `floor(0.9 × n)`, without overflow.
fn ninety_percent(n: usize) -> usize {
    n / 10 * 9 + n % 10 * 9 / 10
}
