//! `RejectedIndex`: the rejected-events index, so sync neither downloads a refused event again
//! nor loses one that a later event makes acceptable. Pure: no I/O, no clock; every input
//! carries `now` (unix time), and the writes its cold tier needs are drained with
//! [`RejectedIndex::poll_persist`].
//!
//! Two tiers. The hot cache keeps full copies of dependency-resolvable rejections for a short
//! time, bounded by count and bytes. The cold index keeps every rejection's ID, reason and what
//! it waits for, for a long time, bounded by count; the store persists it. When an accepted
//! event satisfies a dependency, a waiting event still in the hot cache is queued for
//! re-processing ([`RejectedIndex::poll_reprocess`]); one whose hot copy expired is released
//! (no longer in the "have" set) and reported for fetching by ID
//! ([`RejectedIndex::poll_refetch`]).

mod config;
mod dependency;
mod fifo;
mod record;
mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Timestamp};

pub use config::{
    DEFAULT_COLD_CAPACITY, DEFAULT_COLD_TTL, DEFAULT_HOT_CAPACITY, DEFAULT_HOT_MAX_BYTES,
    DEFAULT_HOT_TTL, DEFAULT_REFETCH_REPORTS, DEFAULT_REFETCH_RETRY, MAX_DEPENDENCIES, MAX_SOURCES,
    RejectedConfig,
};
pub(crate) use dependency::Dependency;
use fifo::Fifo;
use record::record;
pub(crate) use record::{ColdChange, ColdRecord};
pub use usage::RejectedUsage;

/// The two tiers, the dependency links between them and the queued outputs.
#[derive(Debug)]
pub(crate) struct RejectedIndex {
    config: RejectedConfig,
    hot: Fifo<HotEntry>,
    hot_bytes: usize,
    cold: Fifo<ColdEntry>,
    waiters: HashMap<Dependency, HashSet<EventId>>,
    due: BTreeSet<(Timestamp, EventId)>,
    reprocess: [VecDeque<Event>; 3],
    pending: HashMap<EventId, Option<ColdRecord>>,
    hot_evicted: u64,
    cold_evicted: u64,
}

#[derive(Debug)]
struct HotEntry {
    event: Event,
    expires_at: Timestamp,
    bytes: usize,
}

#[derive(Debug)]
struct ColdEntry {
    kind: u16,
    reason: String,
    recorded_at: Timestamp,
    expires_at: Timestamp,
    waits: Vec<Dependency>,
    sources: Vec<RelayUrl>,
    release: Option<Release>,
}

/// A released entry: its dependency arrived and it waits to be processed again.
#[derive(Debug)]
struct Release {
    /// When it is next reported through `poll_refetch`; `None` once reported often enough.
    due: Option<Timestamp>,
    reports: u32,
}

impl RejectedIndex {
    /// An empty index.
    pub(crate) fn new(config: RejectedConfig) -> Self {
        Self {
            config,
            hot: Fifo::new(),
            hot_bytes: 0,
            cold: Fifo::new(),
            waiters: HashMap::new(),
            due: BTreeSet::new(),
            reprocess: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
            pending: HashMap::new(),
            hot_evicted: 0,
            cold_evicted: 0,
        }
    }

    /// Records a rejection. `waits` names what could make the event acceptable (empty for a
    /// final rejection, which keeps no hot copy); `source` is the relay that sent it. A repeat
    /// rejection replaces the entry, keeping the relays that sent it before.
    pub(crate) fn handle_rejected(
        &mut self,
        now: Timestamp,
        event: &Event,
        reason: &str,
        mut waits: Vec<Dependency>,
        source: Option<&RelayUrl>,
    ) {
        self.handle_timeout(now);
        let id = event.id;
        self.drop_hot(&id);
        let mut sources = self
            .unlink_cold(&id)
            .map(|old| old.sources)
            .unwrap_or_default();
        if let Some(source) = source
            && !sources.contains(source)
        {
            if sources.len() >= MAX_SOURCES {
                sources.remove(0);
            }
            sources.push(source.clone());
        }
        waits.sort_unstable();
        waits.dedup();
        waits.truncate(MAX_DEPENDENCIES);
        while self.cold.len() >= self.config.cold_capacity.max(1) {
            let Some((oldest, _)) = self.cold.oldest() else {
                break;
            };
            self.forget(&oldest);
            self.cold_evicted = self.cold_evicted.saturating_add(1);
        }
        if !waits.is_empty() {
            self.keep_hot(now, event);
        }
        for dependency in &waits {
            self.waiters
                .entry(dependency.clone())
                .or_default()
                .insert(id);
        }
        let entry = ColdEntry {
            kind: event.kind.as_u16(),
            reason: reason.to_owned(),
            recorded_at: now,
            expires_at: after(now, self.config.cold_ttl),
            waits,
            sources,
            release: None,
        };
        self.pending.insert(id, Some(record(&id, &entry)));
        self.cold.insert(id, entry);
    }

    /// An event was accepted: forgets it in both tiers and releases every entry waiting for
    /// one of `satisfies` (see `GraspPolicy::satisfied_by`).
    pub(crate) fn handle_accepted(
        &mut self,
        now: Timestamp,
        id: &EventId,
        satisfies: &[Dependency],
    ) {
        self.handle_timeout(now);
        self.forget(id);
        for dependency in satisfies {
            let Some(waiting) = self.waiters.remove(dependency) else {
                continue;
            };
            let mut waiting: Vec<EventId> = waiting.into_iter().collect();
            waiting.sort_unstable();
            for id in waiting {
                self.release(now, id);
            }
        }
    }

    /// A relay still holds these events (a NIP-77 round found them there): each one the cold
    /// index remembers, not released, with less than half its lifetime left, is remembered for
    /// another `cold_ttl` from `now`, as the newest entry. So a refused event that relays keep
    /// offering stays known as long as they do, and is not downloaded again when its first
    /// lifetime ends; the count bound still applies. Returns how many were renewed.
    pub(crate) fn handle_still_held(&mut self, now: Timestamp, ids: &[EventId]) -> usize {
        self.handle_timeout(now);
        let renew_before = after(now, self.config.cold_ttl / 2);
        let mut renewed = 0;
        for id in ids {
            let due = self
                .cold
                .get(id)
                .is_some_and(|entry| entry.release.is_none() && entry.expires_at <= renew_before);
            if !due {
                continue;
            }
            let Some(mut entry) = self.cold.remove(id) else {
                continue;
            };
            entry.expires_at = after(now, self.config.cold_ttl);
            self.pending.insert(*id, Some(record(id, &entry)));
            self.cold.insert(*id, entry);
            renewed += 1;
        }
        renewed
    }

    /// The event is stored (it was saved, or offered again as a duplicate): forgets it in both
    /// tiers.
    pub(crate) fn handle_stored(&mut self, id: &EventId) {
        self.forget(id);
    }

    /// Forgets what expired by `now`.
    pub(crate) fn handle_timeout(&mut self, now: Timestamp) {
        while let Some((id, entry)) = self.hot.oldest() {
            if entry.expires_at > now {
                break;
            }
            self.drop_hot(&id);
        }
        while let Some((id, entry)) = self.cold.oldest() {
            if entry.expires_at > now {
                break;
            }
            self.forget(&id);
        }
    }

    /// Whether sync should treat the ID as had: in the hot cache, or in the cold index and not
    /// released.
    pub(crate) fn contains(&self, now: Timestamp, id: &EventId) -> bool {
        self.hot.get(id).is_some_and(|entry| entry.expires_at > now)
            || self
                .cold
                .get(id)
                .is_some_and(|entry| entry.expires_at > now && entry.release.is_none())
    }

    /// Why the event was rejected, while the cold index remembers it.
    pub(crate) fn reason(&self, now: Timestamp, id: &EventId) -> Option<&str> {
        self.cold
            .get(id)
            .filter(|entry| entry.expires_at > now)
            .map(|entry| entry.reason.as_str())
    }

    /// The next released event whose full copy was still hot: announcements first, then
    /// states, then everything else.
    pub(crate) fn poll_reprocess(&mut self) -> Option<Event> {
        self.reprocess.iter_mut().find_map(VecDeque::pop_front)
    }

    /// Released IDs due for fetching, grouped by the relays that sent them (each ID under
    /// every such relay), announcements before states before other kinds. A reported ID is
    /// reported again after `refetch_retry`, at most `refetch_reports` times in all.
    pub(crate) fn poll_refetch(&mut self, now: Timestamp) -> Vec<(RelayUrl, Vec<EventId>)> {
        self.handle_timeout(now);
        let mut by_relay: BTreeMap<RelayUrl, Vec<(u8, EventId)>> = BTreeMap::new();
        while let Some(&(at, id)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            let Some(entry) = self.cold.get_mut(&id) else {
                continue;
            };
            let Some(release) = entry.release.as_mut() else {
                continue;
            };
            for source in &entry.sources {
                by_relay
                    .entry(source.clone())
                    .or_default()
                    .push((priority(entry.kind), id));
            }
            release.reports = release.reports.saturating_add(1);
            release.due = (release.reports < self.config.refetch_reports).then(|| {
                let next = after(now, self.config.refetch_retry);
                self.due.insert((next, id));
                next
            });
        }
        by_relay
            .into_iter()
            .map(|(relay, mut ids)| {
                ids.sort_unstable();
                (relay, ids.into_iter().map(|(_, id)| id).collect())
            })
            .collect()
    }

    /// Whether cold-tier writes are waiting for [`RejectedIndex::poll_persist`].
    pub(crate) fn has_pending_writes(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The cold-tier writes since the last call, last write per ID.
    pub(crate) fn poll_persist(&mut self) -> Vec<ColdChange> {
        let mut changes: Vec<ColdChange> = self.pending.drain().collect();
        changes.sort_unstable_by_key(|(id, _)| *id);
        changes
    }

    /// How full the tiers are and how often their bounds bit.
    pub(crate) fn usage(&self) -> RejectedUsage {
        RejectedUsage {
            hot_events: self.hot.len(),
            hot_capacity: self.config.hot_capacity.max(1),
            hot_bytes: self.hot_bytes,
            hot_max_bytes: self.config.hot_max_bytes,
            cold_ids: self.cold.len(),
            cold_capacity: self.config.cold_capacity.max(1),
            hot_evicted: self.hot_evicted,
            cold_evicted: self.cold_evicted,
        }
    }

    /// Number of events in the hot cache, and their estimated bytes.
    #[cfg(test)]
    pub(crate) fn hot_usage(&self) -> (usize, usize) {
        (self.hot.len(), self.hot_bytes)
    }

    /// Number of IDs in the cold index.
    #[cfg(test)]
    pub(crate) fn cold_len(&self) -> usize {
        self.cold.len()
    }

    /// Whether the hot cache holds a full copy of the event (expired or not).
    #[cfg(test)]
    pub(crate) fn is_hot(&self, id: &EventId) -> bool {
        self.hot.get(id).is_some()
    }

    fn keep_hot(&mut self, now: Timestamp, event: &Event) {
        let bytes = estimated_size(event);
        if bytes > self.config.hot_max_bytes {
            return;
        }
        while self.hot.len() >= self.config.hot_capacity.max(1)
            || self.hot_bytes.saturating_add(bytes) > self.config.hot_max_bytes
        {
            let Some((oldest, _)) = self.hot.oldest() else {
                break;
            };
            self.drop_hot(&oldest);
            self.hot_evicted = self.hot_evicted.saturating_add(1);
        }
        self.hot_bytes = self.hot_bytes.saturating_add(bytes);
        let entry = HotEntry {
            event: event.clone(),
            expires_at: after(now, self.config.hot_ttl),
            bytes,
        };
        self.hot.insert(event.id, entry);
    }

    /// Removes the hot copy, returning it if it has not expired by `now`.
    fn take_hot(&mut self, now: Timestamp, id: &EventId) -> Option<Event> {
        let entry = self.hot.remove(id)?;
        self.hot_bytes = self.hot_bytes.saturating_sub(entry.bytes);
        (entry.expires_at > now).then_some(entry.event)
    }

    fn drop_hot(&mut self, id: &EventId) {
        if let Some(entry) = self.hot.remove(id) {
            self.hot_bytes = self.hot_bytes.saturating_sub(entry.bytes);
        }
    }

    /// Removes a cold entry with its dependency links and due slot, without queueing a write.
    fn unlink_cold(&mut self, id: &EventId) -> Option<ColdEntry> {
        let entry = self.cold.remove(id)?;
        for dependency in &entry.waits {
            if let Some(waiting) = self.waiters.get_mut(dependency) {
                waiting.remove(id);
                if waiting.is_empty() {
                    self.waiters.remove(dependency);
                }
            }
        }
        if let Some(due) = entry.release.as_ref().and_then(|release| release.due) {
            self.due.remove(&(due, *id));
        }
        Some(entry)
    }

    /// Forgets an ID in both tiers and deletes its persisted entry.
    fn forget(&mut self, id: &EventId) {
        self.drop_hot(id);
        if self.unlink_cold(id).is_some() {
            self.pending.insert(*id, None);
        }
    }

    /// Marks a waiting entry released: re-processed from its hot copy if there is one,
    /// otherwise reported for fetching.
    fn release(&mut self, now: Timestamp, id: EventId) {
        let Some(waits) = self
            .cold
            .get_mut(&id)
            .filter(|entry| entry.release.is_none())
            .map(|entry| std::mem::take(&mut entry.waits))
        else {
            return;
        };
        for dependency in &waits {
            if let Some(waiting) = self.waiters.get_mut(dependency) {
                waiting.remove(&id);
                if waiting.is_empty() {
                    self.waiters.remove(dependency);
                }
            }
        }
        let hot = self.take_hot(now, &id);
        // A hot copy is re-processed at once; the due slot only matters if that never happens.
        let due = match hot {
            Some(_) => after(now, self.config.refetch_retry),
            None => now,
        };
        let Some(entry) = self.cold.get_mut(&id) else {
            return;
        };
        entry.release = Some(Release {
            due: Some(due),
            reports: 0,
        });
        self.due.insert((due, id));
        if let Some(event) = hot {
            self.reprocess[usize::from(priority(entry.kind))].push_back(event);
        }
        self.pending.insert(id, Some(record(&id, entry)));
    }
}

/// Processing order: announcements, then states, then everything else.
fn priority(kind: u16) -> u8 {
    match kind {
        grasp_sync_model::REPO_ANNOUNCEMENT_KIND => 0,
        grasp_sync_model::REPO_STATE_KIND => 1,
        _ => 2,
    }
}

fn after(now: Timestamp, duration: Duration) -> Timestamp {
    Timestamp::from_secs(now.as_secs().saturating_add(duration.as_secs()))
}

/// Bytes an event takes in memory, roughly: fixed fields, content and tag values.
fn estimated_size(event: &Event) -> usize {
    let tags: usize = event
        .tags
        .iter()
        .map(|tag| {
            tag.as_slice()
                .iter()
                .map(|value| value.len() + 24)
                .sum::<usize>()
                + 24
        })
        .sum();
    256 + event.content.len() + tags
}

#[cfg(test)]
mod tests;
