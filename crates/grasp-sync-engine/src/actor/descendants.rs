//! Direct-member descendants, driven: the actor records members as events arrive, and on
//! each maintenance tick opens live coverage and a historic batch for the members new to each
//! relay, and the paced fallback's next group on a constrained relay. Which members, when a
//! batch uncovers them and when the fallback sweeps are decided in
//! [`crate::machine::descendant_coverage`]. Recovered descendants never become members
//! themselves.

use grasp_sync_filters::{Coverage, CoverageTier, FilterBudget, Window, descendant_filters};
use grasp_sync_model::{PendingItems, RelayUrl};
use nostr::Event;
use nostr::nips::nip01::Coordinate;

use super::Actor;
use crate::machine::descendant_coverage::{DescendantCoverage, Members, Recorded, tagged_root};

impl Actor {
    /// Remembers `event` as a direct member if it tags one of our roots.
    pub(super) fn note_direct_member(&mut self, event: &Event) {
        if self.targets.root_ids().contains(&event.id) {
            return;
        }
        let Some(root) = tagged_root(event, self.targets.root_ids()) else {
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
        let coordinate = event
            .kind
            .is_addressable()
            .then(|| event.tags.identifier())
            .flatten()
            .map(|identifier| Coordinate::new(event.kind, event.pubkey).identifier(identifier));
        match self.members.record(event.id, coordinate, root) {
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
        self.note_reply_author(event.pubkey, root);
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
        let coverage = Coverage {
            direct_members: ids,
            addressable_members: coordinates,
            ..Coverage::default()
        };
        match coverage.historic_filters(None, None, &budget) {
            Ok(filters) => {
                let filters = filters.into_iter().map(|f| f.filter).collect();
                let batch = self.open_historic_batch(relay, PendingItems::default(), filters);
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
            Err(error) => tracing::warn!(%relay, %error, "descendant filters could not be built"),
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
