//! Direct-member descendants, driven: the actor records members as events arrive, and on
//! each maintenance tick opens live coverage and a historic batch for the members new to each
//! relay, and the paced fallback's next group on a constrained relay. Which members, when a
//! batch uncovers them and when the fallback sweeps are decided in
//! [`crate::machine::descendant_coverage`]. Recovered descendants never become members
//! themselves.

use grasp_sync_filters::{Coverage, CoverageTier, FilterBudget, Window, descendant_filters};
use grasp_sync_model::{BatchId, PendingItems, RelayUrl};
use nostr::Event;
use nostr::nips::nip01::Coordinate;
use std::collections::HashSet;

use nostr::EventId;

use super::Actor;
use super::negentropy::JobReport;
use crate::machine::descendant_coverage::{
    DescendantCoverage, MAX_MEMBERS, MemberRecord, Members, Recorded,
};

/// Roots whose stored members one store query reads.
const MEMBER_READ_CHUNK: usize = 500;

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
    /// feed brought that are ours), one chunk of roots per store query; each chunk's members
    /// come back as a [`JobReport::StoredMembers`]. After a restart, relays do not deliver the
    /// members the store holds again, so this is how their descendants stay covered.
    pub(super) fn read_stored_members(&self, mut roots: Vec<EventId>) {
        let room = MAX_MEMBERS.saturating_sub(self.members.len());
        if roots.is_empty() || room == 0 {
            return;
        }
        roots.sort_unstable();
        roots.dedup();
        let store = self.ingestor.store();
        let jobs = self.jobs_tx.clone();
        tokio::spawn(async move {
            for chunk in roots.chunks(MEMBER_READ_CHUNK) {
                let of: HashSet<EventId> = chunk.iter().copied().collect();
                let members = match store.events_tagging(chunk, room).await {
                    Ok(events) => events
                        .iter()
                        .filter_map(|event| MemberRecord::of(event, &of))
                        .collect(),
                    Err(error) => {
                        tracing::warn!(%error, "the stored members of roots were not read; their descendants are covered once relays deliver them");
                        return;
                    }
                };
                if jobs.send(JobReport::StoredMembers(members)).await.is_err() {
                    return;
                }
            }
        });
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
            return self.place_over_holdings(relay, placement, PendingItems::default());
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
