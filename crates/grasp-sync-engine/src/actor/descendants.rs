//! Direct-member descendants, driven: the actor records members as events arrive, and those
//! the store holds when the self feed brings their roots (a background read, so a restart
//! keeps covering them), and on each maintenance tick opens live coverage and a historic batch
//! for the members new to each relay, and the paced fallback's next group on a constrained
//! relay. Which members, when a
//! batch uncovers them and when the fallback sweeps are decided in
//! [`crate::machine::descendant_coverage`]. Recovered descendants never become members
//! themselves.

use std::collections::HashSet;
use std::sync::Arc;

use grasp_sync_filters::{Coverage, CoverageTier, FilterBudget, Window, descendant_filters};
use grasp_sync_model::{BatchId, PendingItems, RelayUrl};
use nostr::nips::nip01::Coordinate;
use nostr::{Event, EventId, Timestamp};
use tokio::sync::mpsc;

use super::Actor;
use super::negentropy::JobReport;
use crate::boundary::EventStore;
use crate::machine::descendant_coverage::{
    DescendantCoverage, MAX_MEMBERS, MemberRecord, Members, Recorded,
};

/// Roots whose stored members one store query reads.
const MEMBER_READ_CHUNK: usize = 500;
/// Stored events one store query reads at most, so a root with very many replies is read a
/// page at a time.
const MEMBER_READ_PAGE: usize = 1_000;

impl Actor {
    /// Remembers `event` as a direct member if it tags one of our roots.
    pub(super) fn note_direct_member(&mut self, event: &Event) {
        let Some(member) = MemberRecord::of(event, self.targets.root_ids()) else {
            return;
        };
        if self.members.contains(&event.id) {
            return;
        }
        // The session hands events on before the store verifies them: a forged reply must not
        // take a member's or a participant's place.
        if event.verify().is_err() {
            return;
        }
        self.record_member(member);
    }

    /// Reads, off the actor, the direct members the store holds of `roots` (roots the self
    /// feed brought that are ours), up to as many as the members' cap leaves room for; see
    /// [`read_members`]. After a restart, relays do not deliver the members the store holds
    /// again, so this is how their descendants stay covered.
    pub(super) fn read_stored_members(&self, mut roots: Vec<EventId>) {
        let room = MAX_MEMBERS.saturating_sub(self.members.len());
        if roots.is_empty() || room == 0 {
            return;
        }
        roots.sort_unstable();
        roots.dedup();
        let store = self.ingestor.store();
        let jobs = self.jobs_tx.clone();
        tokio::spawn(read_members(store, roots, room, jobs));
    }

    /// Remembers the direct members the store holds of roots the self feed brought (read by
    /// [`Actor::read_stored_members`]), those whose root is still ours; the next maintenance
    /// tick covers their descendants on every relay that syncs their root.
    pub(super) fn handle_stored_members(&mut self, members: Vec<MemberRecord>) {
        for member in members {
            if self.targets.root_ids().contains(&member.root)
                && !self.targets.root_ids().contains(&member.id)
                && !self.members.contains(&member.id)
            {
                self.record_member(member);
            }
        }
    }

    /// Remembers `member`, unless the cap is reached, and its author as a participant.
    fn record_member(&mut self, member: MemberRecord) {
        let MemberRecord {
            id,
            coordinate,
            root,
            author,
        } = member;
        match self.members.record(id, coordinate, root) {
            Recorded::New => {}
            Recorded::Full { first } => {
                if first {
                    tracing::warn!(
                        "direct-member cap reached; later members get no descendant sync"
                    );
                }
                return;
            }
        }
        self.note_reply_author(author, root);
    }

    /// The maintenance tick: descendant coverage for members new to each relay, and the paced
    /// fallback on constrained relays.
    pub(super) fn sync_descendants(&mut self) {
        let relays: Vec<RelayUrl> = self
            .runtimes
            .iter()
            .filter(|(_, r)| r.machine.session.is_some())
            .map(|(url, _)| url.clone())
            .collect();
        for relay in relays {
            let new = match (self.targets.get(&relay), self.runtimes.get_mut(&relay)) {
                (Some(target), Some(runtime)) => runtime
                    .machine
                    .descendants
                    .take_uncovered(&self.members, &target.root_events),
                _ => Members::default(),
            };
            if !new.is_empty() {
                self.cover_new_members(&relay, new);
            }
            self.run_descendant_fallback(&relay);
        }
    }

    /// Live coverage, where it fits, and one historic batch for members new to `relay`.
    fn cover_new_members(&mut self, relay: &RelayUrl, new: Members) {
        let (ids, coordinates) = (&new.ids[..], &new.coordinates[..]);
        let budget = FilterBudget::default();
        let constrained = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.machine.descendants.is_constrained());
        if !constrained {
            match descendant_filters(ids, coordinates, Window::Live, &budget) {
                Ok(filters) => {
                    let deferred = self.open_live(relay, filters);
                    if deferred.iter().any(|tier| {
                        matches!(
                            tier,
                            CoverageTier::DescendantCanonical | CoverageTier::DescendantQuote
                        )
                    }) {
                        tracing::info!(%relay, "descendant live coverage does not fit; using paced history");
                        if let Some(runtime) = self.runtimes.get_mut(relay) {
                            runtime.machine.descendants.set_constrained();
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%relay, %error, "descendant filters could not be built")
                }
            }
        }
        // History for the new members, whatever happened to live coverage.
        let batch = self.open_member_history(relay, ids, coordinates);
        if let (Some(batch), Some(runtime)) = (batch, self.runtimes.get_mut(relay))
            && self
                .pending
                .batches(relay)
                .iter()
                .any(|b| b.batch_id == batch)
        {
            runtime.machine.descendants.handle_batch_opened(batch, new);
        }
        self.drive_queue(relay);
    }

    /// The history of new members' descendants on `relay`: the round over its kept holdings
    /// where its session started over them (that round fetches every event the relay holds
    /// and the store lacks, descendants too); else, where the relay reconciles (the store held
    /// events at start, or the relay completed a sync), NIP-77 rounds where it allows them, so
    /// a restart downloads no stored descendant again; else REQ+EOSE (a first sync). The
    /// batch, if one is pending.
    fn open_member_history(
        &mut self,
        relay: &RelayUrl,
        ids: &[nostr::EventId],
        coordinates: &[Coordinate],
    ) -> Option<BatchId> {
        if let Some(placement) = self
            .runtimes
            .get(relay)
            .and_then(|runtime| runtime.machine.place_over_holdings())
        {
            return self.put_over_holdings(relay, placement, PendingItems::default());
        }
        let coverage = Coverage {
            direct_members: ids,
            addressable_members: coordinates,
            ..Coverage::default()
        };
        let budget = FilterBudget::default();
        let filters = match coverage.historic_filters(None, None, &budget) {
            Ok(filters) => filters.into_iter().map(|f| f.filter).collect(),
            Err(error) => {
                tracing::warn!(%relay, %error, "descendant filters could not be built");
                return None;
            }
        };
        if self.reconciling(relay) {
            self.open_reconciled_batch(relay, PendingItems::default(), filters)
        } else {
            self.open_historic_batch(relay, PendingItems::default(), filters)
        }
    }

    /// On a constrained relay, the next group of the descendant sweep: one REQ+EOSE group of
    /// covered members per tick, through the ordinary historic queue.
    fn run_descendant_fallback(&mut self, relay: &RelayUrl) {
        let unix = self.clock.unix_now();
        // The fallback yields to ordinary history: it runs only on an otherwise idle relay.
        if self.pending.has_pending(relay) {
            return;
        }
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(group) = runtime
            .machine
            .descendants
            .poll_fallback(unix, &self.members)
        else {
            return;
        };
        let query = Coverage {
            direct_members: &group.ids,
            addressable_members: &group.coordinates,
            ..Coverage::default()
        };
        let budget = FilterBudget::default();
        let filters = match query.historic_filters(Some(group.since), None, &budget) {
            Ok(filters) => filters.into_iter().map(|f| f.filter).collect(),
            Err(error) => {
                tracing::warn!(%relay, %error, "descendant fallback filters could not be built");
                return;
            }
        };
        let batch = self
            .open_historic_batch(relay, PendingItems::default(), filters)
            .filter(|batch| {
                self.pending
                    .batches(relay)
                    .iter()
                    .any(|b| b.batch_id == *batch)
            });
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime
                .machine
                .descendants
                .handle_fallback_sent(&group, batch);
        }
        self.drive_queue(relay);
    }

    /// A new session re-derives the descendant mode from its own capacity: every member is
    /// covered again.
    pub(super) fn reset_descendant_mode(&mut self, relay: &RelayUrl) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.descendants = DescendantCoverage::default();
        }
    }
}

/// The background job of [`Actor::read_stored_members`]: the stored members of `roots`, at
/// most `room`, [`MEMBER_READ_CHUNK`] roots and [`MEMBER_READ_PAGE`] events per store query,
/// each page's members reported as a [`JobReport::StoredMembers`]. A full page is followed by
/// the next, older one, from the oldest second of the page (its events there come again and
/// are skipped); a full page all of one second moves past that second, so members beyond a
/// page in a single second are left to the relays. A read that fails ends the job:
/// the members it did not read are learned as relays deliver them.
async fn read_members(
    store: Arc<dyn EventStore>,
    roots: Vec<EventId>,
    room: usize,
    jobs: mpsc::Sender<JobReport>,
) {
    let mut left = room;
    for chunk in roots.chunks(MEMBER_READ_CHUNK) {
        let of: HashSet<EventId> = chunk.iter().copied().collect();
        let mut until: Option<Timestamp> = None;
        // The events of the previous page's oldest second, which the next page reads again.
        let mut boundary: HashSet<EventId> = HashSet::new();
        while left > 0 {
            let limit = MEMBER_READ_PAGE.min(left + boundary.len());
            let page = match store.events_tagging(chunk, until, limit).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, "the stored members of roots were not read; their descendants are covered once relays deliver them");
                    return;
                }
            };
            let oldest = page.last().map(|event| event.created_at);
            let full = page.len() == limit;
            let members: Vec<MemberRecord> = page
                .iter()
                .filter(|event| !boundary.contains(&event.id))
                .filter_map(|event| MemberRecord::of(event, &of))
                .take(left)
                .collect();
            boundary = page
                .iter()
                .filter(|event| Some(event.created_at) == oldest)
                .map(|event| event.id)
                .collect();
            left = left.saturating_sub(members.len());
            if !members.is_empty() && jobs.send(JobReport::StoredMembers(members)).await.is_err() {
                return;
            }
            let Some(oldest) = oldest.filter(|_| full) else {
                break;
            };
            until = if until == Some(oldest) {
                match oldest.as_secs().checked_sub(1) {
                    Some(earlier) => Some(Timestamp::from_secs(earlier)),
                    None => break,
                }
            } else {
                Some(oldest)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use async_trait::async_trait;
    use grasp_sync_model::RelayUrl;
    use nostr::{Event, EventBuilder, Filter, Keys, Kind, Tag};

    use super::*;
    use crate::boundary::IngestOutcome;
    use crate::error::StoreError;

    /// A store holding `events` that answers only `events_tagging`, newest first.
    struct Held(Vec<Event>);

    #[async_trait]
    impl EventStore for Held {
        async fn ingest(&self, _: Event, _: &RelayUrl) -> Result<IngestOutcome, StoreError> {
            Ok(IngestOutcome::Duplicate)
        }

        async fn contains(&self, _: &EventId) -> Result<bool, StoreError> {
            Ok(false)
        }

        async fn negentropy_items(
            &self,
            _: Filter,
        ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
            Ok(Vec::new())
        }

        async fn events_tagging(
            &self,
            _: &[EventId],
            until: Option<Timestamp>,
            limit: usize,
        ) -> Result<Vec<Event>, StoreError> {
            let mut page: Vec<Event> = self
                .0
                .iter()
                .filter(|e| until.is_none_or(|until| e.created_at <= until))
                .cloned()
                .collect();
            page.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
            page.truncate(limit);
            Ok(page)
        }
    }

    /// `count` replies to `root`, the n-th created at `at(n)`.
    fn replies(root: EventId, count: usize, at: impl Fn(usize) -> u64) -> Vec<Event> {
        let keys = Keys::generate();
        (0..count)
            .map(|n| {
                EventBuilder::new(Kind::from(1111), format!("reply {n}"))
                    .tags([Tag::parse(["E", &root.to_hex()]).expect("tag")])
                    .custom_created_at(Timestamp::from_secs(at(n)))
                    .sign_with_keys(&keys)
                    .expect("signed")
            })
            .collect()
    }

    /// The distinct members `read_members` reports for `events` of `root`, with `room`, and
    /// how many reports it sent.
    async fn read(events: Vec<Event>, root: EventId, room: usize) -> (BTreeSet<EventId>, usize) {
        let (jobs, mut reports) = mpsc::channel(64);
        read_members(Arc::new(Held(events)), vec![root], room, jobs).await;
        let mut members = BTreeSet::new();
        let mut sent = 0;
        while let Ok(JobReport::StoredMembers(page)) = reports.try_recv() {
            sent += 1;
            members.extend(page.into_iter().map(|m| m.id));
        }
        (members, sent)
    }

    #[tokio::test]
    async fn stored_members_are_read_a_page_at_a_time_up_to_the_room_left() {
        let root = EventId::from_byte_array([1; 32]);
        let events = replies(root, 2_500, |n| 1_000 + n as u64);
        let all: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
        let (members, sent) = read(events.clone(), root, MAX_MEMBERS).await;
        assert_eq!(members, all, "every member, over pages");
        assert!(sent >= 3, "{sent} pages");
        let (members, _) = read(events, root, 1_500).await;
        assert_eq!(members.len(), 1_500, "no more than the room left");
    }

    #[tokio::test]
    async fn a_full_page_of_one_second_moves_past_that_second() {
        let root = EventId::from_byte_array([1; 32]);
        let mut events = replies(root, MEMBER_READ_PAGE + 200, |_| 5_000);
        events.extend(replies(root, 10, |n| 4_000 + n as u64));
        let (members, _) = read(events, root, MAX_MEMBERS).await;
        assert_eq!(
            members.len(),
            MEMBER_READ_PAGE + 10,
            "one page of the crowded second, then the older members"
        );
    }
}
