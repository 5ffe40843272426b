//! Live coverage (`limit: 0`): incoming filters are planned against the held groups by the
//! ledger's live planner and admitted atomically; retired groups release their slots.

use grasp_sync_filters::{CoverageTier, FilterGroup, PackLimits, TieredFilter};
use grasp_sync_ledger::{DeferReason, HeldGroup, LiveBudget, LivePlan, ReleaseReason, plan_live};
use grasp_sync_model::RelayUrl;
use nostr::SubscriptionId;

use super::Actor;
use super::runtime::LiveGroup;
use crate::session::Outbound;

impl Actor {
    /// Makes `incoming` live on `relay` as far as its budget allows; returns the tiers left out
    /// of the live set for lack of room (historic-only tiers are not reported).
    pub(super) fn open_live(
        &mut self,
        relay: &RelayUrl,
        incoming: Vec<TieredFilter>,
    ) -> Vec<CoverageTier> {
        if incoming.is_empty() {
            return Vec::new();
        }
        let Some(plan) = self.plan_live(relay, incoming) else {
            return Vec::new();
        };
        let deferred = plan
            .deferred
            .iter()
            .filter(|d| d.reason != DeferReason::HistoricOnly)
            .map(|d| d.tier)
            .collect();
        self.apply_live_plan(relay, plan);
        deferred
    }

    /// Closes the plan's retired groups and opens its new ones atomically, restoring the
    /// retired groups if admission fails.
    fn apply_live_plan(&mut self, relay: &RelayUrl, plan: LivePlan) {
        for deferred in &plan.deferred {
            tracing::debug!(%relay, tier = ?deferred.tier, reason = ?deferred.reason,
                filters = deferred.filters.len(), "live coverage deferred to history");
        }
        if plan.is_noop() {
            return;
        }
        let ids: Vec<SubscriptionId> = plan
            .open
            .iter()
            .map(|_| self.next_subscription_id("live"))
            .collect();
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let (Some(session), Some(ledger)) = (runtime.session.as_mut(), runtime.ledger.as_mut())
        else {
            return;
        };
        for id in &plan.close {
            if let Some(held) = session.live.remove(id) {
                // Releasing our own live permit cannot be refused; a stale one is a no-op.
                let _ = ledger.handle_release(now, &held.permit, ReleaseReason::LiveRetired);
                session.handle.send(Outbound::Close(id.clone()));
            }
        }
        match ledger.admit_live(now, ledger.generation(), ids.clone()) {
            Ok(permits) => {
                for ((id, group), permit) in ids.into_iter().zip(plan.open).zip(permits) {
                    session.handle.send(Outbound::Req {
                        subscription_id: id.clone(),
                        filters: group.to_filters(),
                    });
                    runtime.stats.req_starts_live += 1;
                    if let Some(metrics) = &self.metrics {
                        metrics.record_req("live");
                    }
                    let sent = session.next_sent();
                    session.live.insert(
                        id,
                        LiveGroup {
                            group,
                            permit,
                            sent,
                        },
                    );
                }
            }
            Err(error) => {
                tracing::warn!(%relay, %error, "live admission refused; restoring retired groups");
                let reopen: Vec<(SubscriptionId, FilterGroup)> = plan
                    .rollback
                    .reopen
                    .into_iter()
                    .map(|held| (held.subscription_id, held.group))
                    .collect();
                let reopen_ids: Vec<SubscriptionId> =
                    reopen.iter().map(|(id, _)| id.clone()).collect();
                if let Ok(permits) = ledger.admit_live(now, ledger.generation(), reopen_ids) {
                    for ((id, group), permit) in reopen.into_iter().zip(permits) {
                        session.handle.send(Outbound::Req {
                            subscription_id: id.clone(),
                            filters: group.to_filters(),
                        });
                        let sent = session.next_sent();
                        session.live.insert(
                            id,
                            LiveGroup {
                                group,
                                permit,
                                sent,
                            },
                        );
                    }
                }
            }
        }
        runtime.note_peak();
    }

    fn plan_live(
        &self,
        relay: &RelayUrl,
        incoming: Vec<TieredFilter>,
    ) -> Option<grasp_sync_ledger::LivePlan> {
        let runtime = self.runtimes.get(relay)?;
        let session = runtime.session.as_ref()?;
        let ledger = runtime.ledger.as_ref()?;
        let held: Vec<HeldGroup> = session
            .live
            .iter()
            .map(|(id, live)| HeldGroup {
                subscription_id: id.clone(),
                group: live.group.clone(),
            })
            .collect();
        let budget = LiveBudget::new(&ledger.budget(), &runtime.learned, PackLimits::default());
        match plan_live(&held, incoming, &budget) {
            Ok(plan) => Some(plan),
            Err(refusal) => {
                tracing::warn!(%relay, %refusal, "live coverage does not fit this relay's budget");
                None
            }
        }
    }
}

impl Actor {
    /// Re-derives complete live coverage for the relay's confirmed and pending items plus
    /// Layer 1, and opens whatever is not already held (after a live group was closed).
    pub(super) fn repair_live(&mut self, relay: &RelayUrl) {
        let mut items = self.pending.pending_items(relay);
        if let Some(state) = self.relays.get(relay) {
            for (coordinate, level) in &state.repos {
                let entry = items.repos.entry(coordinate.clone()).or_insert(*level);
                *entry = (*entry).max(*level);
            }
            items.root_events.extend(state.root_events.iter().copied());
        }
        // Only what the current index still wants: ownership removal is passive, but a
        // replacement never resurrects obsolete items.
        if let Some(target) = self.targets.get(relay) {
            items
                .repos
                .retain(|coordinate, _| target.repos.contains_key(coordinate));
            items
                .root_events
                .retain(|id| target.root_events.contains(id));
        } else {
            items = grasp_sync_model::PendingItems::default();
        }
        let full: Vec<_> = items
            .repos
            .iter()
            .filter(|(_, level)| **level == grasp_sync_model::SyncLevel::Full)
            .map(|(c, _)| c.clone())
            .collect();
        let state_only: Vec<_> = items
            .repos
            .iter()
            .filter(|(_, level)| **level == grasp_sync_model::SyncLevel::StateOnly)
            .map(|(c, _)| c.clone())
            .collect();
        let roots: Vec<_> = items.root_events.iter().copied().collect();
        let coverage = grasp_sync_filters::Coverage {
            full_repos: &full,
            state_only_repos: &state_only,
            roots: &roots,
            direct_members: &[],
            addressable_members: &[],
        };
        let mut filters = vec![grasp_sync_filters::announcement_filter(
            grasp_sync_filters::Window::Live,
        )];
        match coverage.live_filters(&grasp_sync_filters::FilterBudget::default()) {
            Ok(more) => filters.extend(more),
            Err(error) => tracing::warn!(%relay, %error, "live filters could not be built"),
        }
        let _ = self.open_live(relay, filters);
    }
}
