//! Direct-member descendants: events that directly tag one of our root events (found by
//! Layer 3) are *direct members*; events tagging a direct member but no repository or root are
//! recovered for one generation only. New members get descendant live coverage when the whole
//! descendant tier fits the relay's budget, and a historic batch either way; a relay where the
//! tier does not fit gets a paced fallback instead: one group of members per maintenance tick,
//! swept from an in-memory cursor advanced only once a whole sweep reached its EOSEs (with 15
//! minutes of overlap; see [`crate::machine::descendant_sweep`]).
//! Recovered descendants never become members themselves. A failed historic batch for new
//! members leaves them uncovered again, so the next tick asks for them anew.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use grasp_sync_filters::{Coverage, CoverageTier, FilterBudget, Window, descendant_filters};
use grasp_sync_model::{BatchId, PendingItems, RelayUrl};
use nostr::nips::nip01::Coordinate;
use nostr::{Event, EventId, TagKind};

use super::Actor;

/// Most direct members remembered; beyond it new members are ignored (and logged once).
pub(super) const MAX_MEMBERS: usize = 200_000;
/// Overlap of the fallback query with the previous successful one.
const FALLBACK_OVERLAP: Duration = Duration::from_secs(15 * 60);

/// Every direct member seen, with the root it tags: members found on one relay are queried on
/// every relay that syncs their root.
#[derive(Debug, Default)]
pub(super) struct DirectMembers {
    ids: BTreeMap<EventId, EventId>,
    coordinates: BTreeMap<Coordinate, EventId>,
    overflow_logged: bool,
}

/// One relay's descendant coverage: which members it covers, and the fallback cursor.
#[derive(Debug, Default)]
pub(super) struct DescendantCoverage {
    covered_ids: BTreeSet<EventId>,
    covered_coordinates: BTreeSet<Coordinate>,
    /// Descendant live coverage did not fit: history runs on the fallback cadence.
    constrained: bool,
    /// The fallback sweep's cursor, position and group in flight.
    pub(super) fallback: crate::machine::descendant_sweep::DescendantSweep,
    /// Historic batches in flight for new members, with the members they cover.
    batches: BTreeMap<BatchId, (Vec<EventId>, Vec<Coordinate>)>,
}

impl DescendantCoverage {
    /// Whether descendant coverage runs on the paced fallback.
    pub(super) fn is_constrained(&self) -> bool {
        self.constrained
    }

    /// Moves descendant coverage to the paced fallback.
    pub(super) fn set_constrained(&mut self) {
        self.constrained = true;
    }
}

impl Actor {
    /// Remembers `event` as a direct member if it tags one of our roots.
    pub(super) fn note_direct_member(&mut self, event: &Event) {
        if self.targets.root_ids().contains(&event.id) {
            return;
        }
        let Some(root) = tagged_root(event, self.targets.root_ids()) else {
            return;
        };
        let members = &mut self.members;
        if members.ids.contains_key(&event.id) {
            return;
        }
        // The session hands events on before the store verifies them: a forged reply must not
        // take a member's or a participant's place.
        if event.verify().is_err() {
            return;
        }
        if members.ids.len() + members.coordinates.len() >= MAX_MEMBERS {
            if !members.overflow_logged {
                members.overflow_logged = true;
                tracing::warn!("direct-member cap reached; later members get no descendant sync");
            }
            return;
        }
        members.ids.insert(event.id, root);
        if event.kind.is_addressable() {
            if let Some(identifier) = event.tags.identifier() {
                let coordinate = Coordinate::new(event.kind, event.pubkey).identifier(identifier);
                members.coordinates.insert(coordinate, root);
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
            .filter(|(_, r)| r.session.is_some())
            .map(|(url, _)| url.clone())
            .collect();
        for relay in relays {
            let (ids, coordinates) = self.uncovered_members(&relay);
            if !ids.is_empty() || !coordinates.is_empty() {
                if let Some(runtime) = self.runtimes.get_mut(&relay) {
                    runtime.descendants.covered_ids.extend(ids.iter().copied());
                    runtime
                        .descendants
                        .covered_coordinates
                        .extend(coordinates.iter().cloned());
                }
                self.cover_new_members(&relay, &ids, &coordinates);
            }
            self.run_descendant_fallback(&relay);
        }
    }

    /// Members whose root this relay syncs and that it does not cover yet.
    fn uncovered_members(&self, relay: &RelayUrl) -> (Vec<EventId>, Vec<Coordinate>) {
        let (Some(target), Some(runtime)) = (self.targets.get(relay), self.runtimes.get(relay))
        else {
            return (Vec::new(), Vec::new());
        };
        let coverage = &runtime.descendants;
        let ids = self
            .members
            .ids
            .iter()
            .filter(|(id, root)| {
                target.root_events.contains(root) && !coverage.covered_ids.contains(id)
            })
            .map(|(id, _)| *id)
            .collect();
        let coordinates = self
            .members
            .coordinates
            .iter()
            .filter(|(c, root)| {
                target.root_events.contains(root) && !coverage.covered_coordinates.contains(c)
            })
            .map(|(c, _)| c.clone())
            .collect();
        (ids, coordinates)
    }

    fn cover_new_members(&mut self, relay: &RelayUrl, ids: &[EventId], coordinates: &[Coordinate]) {
        let budget = FilterBudget::default();
        let constrained = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.descendants.constrained);
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
                            runtime.descendants.constrained = true;
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
                    let members = (ids.to_vec(), coordinates.to_vec());
                    runtime.descendants.batches.insert(batch, members);
                }
                self.drive_queue(relay);
            }
            Err(error) => tracing::warn!(%relay, %error, "descendant filters could not be built"),
        }
    }

    /// A historic batch ended: confirmed, its members stay covered; failed, they are
    /// uncovered, so the next tick covers them again (a failed batch of no pending items is
    /// not derived again by the index diff).
    pub(super) fn handle_descendant_batch_done(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        ok: bool,
    ) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let coverage = &mut runtime.descendants;
        let Some((ids, coordinates)) = coverage.batches.remove(&batch) else {
            return;
        };
        if !ok {
            for id in &ids {
                coverage.covered_ids.remove(id);
            }
            for coordinate in &coordinates {
                coverage.covered_coordinates.remove(coordinate);
            }
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
        let coverage = &mut runtime.descendants;
        if !coverage.constrained {
            return;
        }
        let Some(group) = coverage.fallback.next_group(
            unix,
            FALLBACK_OVERLAP,
            &coverage.covered_ids,
            &coverage.covered_coordinates,
        ) else {
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
            runtime.descendants.fallback.sent(&group, batch);
        }
        self.drive_queue(relay);
    }

    /// A new session re-derives the descendant mode from its own capacity: every member is
    /// covered again.
    pub(super) fn reset_descendant_mode(&mut self, relay: &RelayUrl) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.descendants = DescendantCoverage::default();
        }
    }
}

/// The first of `roots` the event tags with `e`, `E` or `q`.
fn tagged_root(event: &Event, roots: &std::collections::HashSet<EventId>) -> Option<EventId> {
    event.tags.iter().find_map(|tag| {
        let kind = tag.kind();
        let is_thread_tag = matches!(kind, TagKind::SingleLetter(letter) if matches!(letter.as_char(), 'e' | 'E' | 'q'));
        if !is_thread_tag {
            return None;
        }
        tag.content()
            .and_then(|value| EventId::from_hex(value).ok())
            .filter(|id| roots.contains(id))
    })
}
