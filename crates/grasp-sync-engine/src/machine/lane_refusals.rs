//! A refusal on one of a relay's extra live connections, as an input of the relay's machine:
//! a CLOSED of one of its live groups ([`RelayMachine::handle_lane_closed`]) or a NOTICE on it
//! ([`RelayMachine::handle_lane_notice`]).
//!
//! Each refusal is classified and counted in the relay's statistics, once per parked group:
//! an `auth-required:` CLOSED of a group already parked for the AUTH (by a NOTICE that came
//! first, as some relays send both) is not counted again. A NOTICE that comes after the
//! CLOSED names no subscription and answers the next unanswered group, so it counts as the
//! refusal of that one. Then:
//! - `auth-required:` parks the group on its connection when that connection may still
//!   authenticate ([`LiveLanes`](crate::machine::lanes::LiveLanes) decides);
//! - a refusal of what the group asks for ([`refusal_spares_connection`]) costs that group
//!   only: health judges it, and a policy pause pauses its coverage as the session's would be
//!   paused; otherwise the group's coverage goes to the catch-up and the connection closes;
//! - anything else closes the connection.
//!
//! What that asks of the driver (a connection to close, coverage offered to the extra
//! connections again or handed to the catch-up, queued work readmitted) is returned as data.

use std::time::Instant;

use grasp_sync_filters::TieredFilter;
use grasp_sync_health::{Refusal, RefusalAction, RefusalCategory, RefusalScope, classify};
use nostr::{Filter, SubscriptionId};

use crate::machine::lanes::{AuthNotice, refusal_spares_connection};
use crate::machine::refusals::CoverageRefused;
use crate::machine::refused::without_bounds;
use crate::machine::relay::RelayMachine;
use crate::machine::transmit::SessionKey;

#[cfg(test)]
mod tests;

/// A refusal on an extra connection, counted in the relay's statistics, and what became of it.
#[derive(Debug)]
pub struct LaneRefusal {
    /// The refusal, classified.
    pub refusal: Refusal,
    /// It was counted in the relay's statistics (the driver counts it in the metrics). An
    /// `auth-required:` CLOSED of a group already parked for the AUTH is the same refusal again
    /// and is not counted twice.
    pub counted: bool,
    /// What the driver performs.
    pub outcome: LaneRefusalOutcome,
}

/// What a refusal on an extra connection asks of the driver.
#[derive(Debug, PartialEq)]
pub enum LaneRefusalOutcome {
    /// A live group is parked on its connection until the relay accepts that connection's
    /// `AUTH`: nothing to perform.
    Parked,
    /// An `auth-required:` NOTICE answers no live group the connection still waits on, and the
    /// connection may still authenticate: nothing more is refused.
    Unmatched,
    /// The group left the connection before its refusal was judged: nothing to perform.
    GroupGone,
    /// Only the refused group's coverage is paused by policy (or its filters became suspects);
    /// the connection keeps its other groups. The driver lets queued work see the pause, then
    /// offers `group` again to the extra connections, without what the pause holds.
    GroupPaused {
        /// How the refused coverage was recorded.
        refused: CoverageRefused,
        /// The refused group's coverage.
        group: Vec<TieredFilter>,
    },
    /// The group's coverage (`catch_up`, without bounds) goes to the catch-up, and the
    /// connection closes.
    GroupToCatchUp {
        /// The refused group's filters, without bounds.
        catch_up: Vec<Filter>,
    },
    /// The connection closes: its coverage goes to the catch-up.
    Close,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// The relay closed live group `subscription` of extra connection `key` at `now` with
    /// `message` (see the module). `None` when the connection does not hold that group: the
    /// message refused nothing and is not counted.
    pub fn handle_lane_closed(
        &mut self,
        now: Instant,
        key: &SessionKey,
        subscription: &SubscriptionId,
        message: &str,
    ) -> Option<LaneRefusal> {
        if !self.lanes.holds(key, subscription) {
            return None;
        }
        let refusal = classify(message);
        let auth = refusal.category == RefusalCategory::AuthRequired;
        let counted = !(auth && self.lanes.is_parked(key, subscription));
        if counted {
            self.count_refusal(&refusal, message);
        }
        let parked = auth && self.lanes.handle_auth_refusal(now, key, subscription);
        let outcome = if parked {
            LaneRefusalOutcome::Parked
        } else if refusal_spares_connection(refusal.category) {
            self.refuse_lane_group(now, key, subscription, &refusal)
        } else {
            LaneRefusalOutcome::Close
        };
        Some(LaneRefusal {
            refusal,
            counted,
            outcome,
        })
    }

    /// The relay sent extra connection `key` a NOTICE `text` at `now`. `None` when it is not
    /// a refusal. A NOTICE names no subscription: an `auth-required:` one answers the
    /// connection's oldest unanswered live group (see
    /// [`LiveLanes::handle_auth_notice`](crate::machine::lanes::LiveLanes::handle_auth_notice));
    /// any other refusal closes the connection.
    pub fn handle_lane_notice(
        &mut self,
        now: Instant,
        key: &SessionKey,
        text: &str,
    ) -> Option<LaneRefusal> {
        let refusal = classify(text);
        if refusal.category == RefusalCategory::Unknown {
            return None;
        }
        self.count_refusal(&refusal, text);
        let notice = if refusal.category == RefusalCategory::AuthRequired {
            self.lanes.handle_auth_notice(now, key)
        } else {
            AuthNotice::Refused
        };
        let outcome = match notice {
            AuthNotice::Parked => LaneRefusalOutcome::Parked,
            AuthNotice::Unmatched => LaneRefusalOutcome::Unmatched,
            AuthNotice::Refused => LaneRefusalOutcome::Close,
        };
        Some(LaneRefusal {
            refusal,
            counted: true,
            outcome,
        })
    }

    /// Live group `subscription` of connection `key` was refused for what it asks: it leaves
    /// the connection, and health judges the refusal of its coverage.
    fn refuse_lane_group(
        &mut self,
        now: Instant,
        key: &SessionKey,
        subscription: &SubscriptionId,
        refusal: &Refusal,
    ) -> LaneRefusalOutcome {
        let Some(group) = self.lanes.handle_refused_group(now, key, subscription) else {
            return LaneRefusalOutcome::GroupGone;
        };
        let filters: Vec<Filter> = group.iter().map(|f| f.filter.clone()).collect();
        let scope = RefusalScope::Coverage {
            filters: u32::try_from(filters.len()).unwrap_or(u32::MAX),
        };
        match self.health.handle_refusal(now, refusal, scope) {
            RefusalAction::CoveragePaused { until } => {
                let refused = if self.refused.handle_refusal(&filters, until) {
                    CoverageRefused::Paused
                } else {
                    CoverageRefused::Suspects {
                        filters: filters.len(),
                    }
                };
                LaneRefusalOutcome::GroupPaused { refused, group }
            }
            _ => LaneRefusalOutcome::GroupToCatchUp {
                catch_up: filters.iter().map(without_bounds).collect(),
            },
        }
    }
}
