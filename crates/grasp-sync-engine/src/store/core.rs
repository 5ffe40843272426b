//! `StoreCore`: the ingest path shared by the LMDB and memory stores and by the relay's write
//! policy: duplicate check, signature check, the policy decision (under a short-held lock, never
//! across an await), the save, and the rejected-events index.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use nostr::{Event, EventId, Filter, Kind, PublicKey, Timestamp};
use nostr_database::{
    DatabaseError, DatabaseEventStatus, NostrDatabase, RejectedReason, SaveEventStatus,
};

use crate::boundary::IngestOutcome;
use crate::error::StoreError;
use crate::store::database::GraspDatabase;
use crate::store::feed::FeedHub;
use crate::store::policy::{GraspPolicy, PolicyDecision};
use crate::store::rejected::RejectedIndex;

/// Reason for an event whose id or signature does not verify.
pub const BAD_SIGNATURE_REASON: &str = "invalid: bad signature";

/// Most stored events whose authors are looked up for one decision.
const MAX_LOOKUPS: usize = 64;

/// Most recent stored events replayed into the policy at open (besides every announcement).
pub const REBUILD_SCAN_LIMIT: usize = 20_000;

/// The shared state of one store.
#[derive(Debug)]
pub(crate) struct StoreCore {
    database: Arc<GraspDatabase>,
    /// `None` accepts every verified event (tests only).
    policy: Option<Mutex<GraspPolicy>>,
    rejected: Mutex<RejectedIndex>,
}

impl StoreCore {
    /// Wraps `backend`, then rebuilds the policy from what it holds.
    pub(crate) async fn open(
        backend: Arc<dyn NostrDatabase>,
        policy: Option<GraspPolicy>,
        rejected_capacity: usize,
        feed_capacity: usize,
    ) -> Result<Self, StoreError> {
        let database = Arc::new(GraspDatabase::new(
            backend,
            Arc::new(FeedHub::new(feed_capacity)),
        ));
        let policy = match policy {
            Some(policy) => Some(Mutex::new(rebuild(policy, &database).await?)),
            None => None,
        };
        Ok(Self {
            database,
            policy,
            rejected: Mutex::new(RejectedIndex::new(rejected_capacity)),
        })
    }

    pub(crate) fn database(&self) -> &Arc<GraspDatabase> {
        &self.database
    }

    /// The whole ingest path.
    pub(crate) async fn ingest(&self, event: &Event) -> Result<IngestOutcome, StoreError> {
        match self.database.check_id(&event.id).await.map_err(backend)? {
            DatabaseEventStatus::Saved => return Ok(IngestOutcome::Duplicate),
            DatabaseEventStatus::Deleted => {
                return Ok(IngestOutcome::Rejected(
                    "blocked: this event is deleted".to_owned(),
                ));
            }
            DatabaseEventStatus::NotExistent => {}
        }
        if event.verify().is_err() {
            // Not remembered: the id may belong to a genuine event we still want.
            return Ok(IngestOutcome::Rejected(BAD_SIGNATURE_REASON.to_owned()));
        }
        if let PolicyDecision::Reject(reason) = self.admit(event).await? {
            return Ok(IngestOutcome::Rejected(reason));
        }
        let status = self.database.save_event(event).await.map_err(backend)?;
        Ok(match status {
            SaveEventStatus::Success => IngestOutcome::Saved,
            SaveEventStatus::Rejected(RejectedReason::Duplicate) => IngestOutcome::Duplicate,
            SaveEventStatus::Rejected(reason) => {
                let reason = save_rejection_reason(reason).to_owned();
                self.rejected()?.handle_rejected(event.id, &reason);
                IngestOutcome::Rejected(reason)
            }
        })
    }

    /// The policy decision for a verified event, recording acceptances and rejections.
    pub(crate) async fn admit(&self, event: &Event) -> Result<PolicyDecision, StoreError> {
        let Some(policy) = &self.policy else {
            return Ok(PolicyDecision::Accept);
        };
        let empty = HashMap::new();
        let (mut decision, unknown) = {
            let mut policy = lock(policy)?;
            let decision = policy.handle_event(event, &empty);
            let unknown = if decision.is_accept() {
                Vec::new()
            } else {
                policy.unknown_references(event)
            };
            (decision, unknown)
        };
        if !unknown.is_empty() {
            let known = self.authors_of(&unknown).await?;
            if !known.is_empty() {
                decision = lock(policy)?.handle_event(event, &known);
            }
        }
        match &decision {
            PolicyDecision::Accept => self.rejected()?.handle_accepted(&event.id),
            PolicyDecision::Reject(reason) => self.rejected()?.handle_rejected(event.id, reason),
        }
        Ok(decision)
    }

    pub(crate) async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        if self.rejected()?.reason(id).is_some() {
            return Ok(true);
        }
        let status = self.database.check_id(id).await.map_err(backend)?;
        Ok(status != DatabaseEventStatus::NotExistent)
    }

    pub(crate) async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.database
            .negentropy_items(filter)
            .await
            .map_err(backend)
    }

    pub(crate) fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        Ok(self.rejected()?.reason(id).map(str::to_owned))
    }

    /// Authors of the stored events among `ids` (at most [`MAX_LOOKUPS`] are looked up).
    async fn authors_of(&self, ids: &[EventId]) -> Result<HashMap<EventId, PublicKey>, StoreError> {
        let mut known = HashMap::new();
        for id in ids.iter().take(MAX_LOOKUPS) {
            if let Some(event) = self.database.event_by_id(id).await.map_err(backend)? {
                known.insert(*id, event.pubkey);
            }
        }
        Ok(known)
    }

    fn rejected(&self) -> Result<MutexGuard<'_, RejectedIndex>, StoreError> {
        lock(&self.rejected)
    }
}

/// Replays the store into a fresh policy: every announcement, oldest first, then the most
/// recent events (at most [`REBUILD_SCAN_LIMIT`] and the accepted-ID capacity).
async fn rebuild(
    mut policy: GraspPolicy,
    database: &GraspDatabase,
) -> Result<GraspPolicy, StoreError> {
    let announcements = database
        .query(Filter::new().kind(Kind::from(30617u16)))
        .await
        .map_err(backend)?;
    let mut announcements: Vec<Event> = announcements.into_iter().collect();
    announcements.sort_by_key(|event| event.created_at);
    for event in &announcements {
        policy.handle_accepted(event);
    }
    let recent = database
        .query(Filter::new().limit(policy.accepted_ids_capacity().min(REBUILD_SCAN_LIMIT)))
        .await
        .map_err(backend)?;
    let mut recent: Vec<Event> = recent.into_iter().collect();
    recent.sort_by_key(|event| event.created_at);
    for event in &recent {
        policy.handle_accepted(event);
    }
    Ok(policy)
}

fn save_rejection_reason(reason: RejectedReason) -> &'static str {
    match reason {
        RejectedReason::Ephemeral => "blocked: ephemeral events are not stored",
        RejectedReason::Duplicate => "duplicate: already have this event",
        RejectedReason::Deleted => "blocked: this event is deleted",
        RejectedReason::Expired => "invalid: event has expired",
        RejectedReason::Replaced => "blocked: a newer version is stored",
        RejectedReason::InvalidDelete => "invalid: deletion of another author's event",
        RejectedReason::Other => "blocked: not stored",
    }
}

fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, StoreError> {
    mutex
        .lock()
        .map_err(|_| StoreError::Backend("store lock poisoned".to_owned()))
}

fn backend(error: DatabaseError) -> StoreError {
    StoreError::Backend(error.to_string())
}
