//! `GraspWritePolicy`: the embedded relay's `WritePolicy`, applying the store's own
//! `GraspPolicy` instance to events that clients publish.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use nostr::Event;
use nostr::util::BoxedFuture;
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use nostr_relay_builder::builder::{PolicyResult, WritePolicy};

use crate::store::core::StoreCore;
use crate::store::policy::PolicyDecision;

/// Hands every event a client publishes to the store's policy. The relay has already verified
/// the signature. Rejections enter the rejected-events index (without a source relay, so an
/// entry whose hot copy expired cannot be re-fetched by ID). An acceptance changes nothing yet:
/// the policy records the event when the relay's save through [`GraspDatabase`](crate::store::GraspDatabase) succeeds, which
/// also re-processes the hot events it releases; a failed save leaves the policy as it was.
/// Events already stored pass (the relay then answers `duplicate:`). The relay
/// prefixes every rejection with `blocked: `, so a `blocked: ` reason is passed without its
/// prefix and an `invalid: ` reason reaches the client as `blocked: invalid: ...`.
#[derive(Clone)]
pub struct GraspWritePolicy {
    core: Arc<StoreCore>,
}

impl GraspWritePolicy {
    pub(crate) fn new(core: Arc<StoreCore>) -> Self {
        Self { core }
    }

    async fn admit(&self, event: &Event) -> PolicyResult {
        match self.core.database().check_id(&event.id).await {
            Ok(DatabaseEventStatus::NotExistent) => {}
            Ok(_) => return PolicyResult::Accept,
            Err(error) => return PolicyResult::Reject(format!("error: {error}")),
        }
        let decision = self.core.admit(event, None).await;
        // Persist the index's record of a rejection before answering.
        if let Err(error) = self.core.settle().await {
            tracing::warn!(%error, "re-processing released rejected events failed");
        }
        match decision {
            Ok(PolicyDecision::Accept) => PolicyResult::Accept,
            Ok(PolicyDecision::Reject(reason)) => PolicyResult::Reject(
                reason
                    .strip_prefix("blocked: ")
                    .unwrap_or(&reason)
                    .to_owned(),
            ),
            Err(error) => PolicyResult::Reject(format!("error: {error}")),
        }
    }
}

impl fmt::Debug for GraspWritePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraspWritePolicy").finish_non_exhaustive()
    }
}

impl WritePolicy for GraspWritePolicy {
    fn admit_event<'a>(
        &'a self,
        event: &'a Event,
        _addr: &'a SocketAddr,
    ) -> BoxedFuture<'a, PolicyResult> {
        Box::pin(self.admit(event))
    }
}
