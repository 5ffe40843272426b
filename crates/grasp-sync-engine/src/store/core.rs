//! `StoreCore`: the ingest path shared by the LMDB and memory stores and by the relay's write
//! policy: duplicate check, signature check, the policy decision (under a short-held lock, never
//! across an await), the save, the rejected-events index with its dependency re-processing, and
//! the cold tier's persistence.
//!
//! The policy's state follows the database: a decision to accept changes nothing, and the
//! event is recorded as accepted (in the policy, and as a satisfied dependency in the
//! rejected-events index) only once its save succeeded ([`StoreCore::handle_saved`], called by
//! [`GraspDatabase`] for every save, from sync or from the embedded relay). A rejection is
//! recorded under the policy lock, so an acceptance committed meanwhile always finds it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use grasp_sync_model::{PurgatoryEntry, RelayUrl, RepoAnnouncement, RepoCoordinate};
use nostr::{Alphabet, Event, EventId, Filter, Kind, PublicKey, SingleLetterTag, Timestamp};
use nostr_database::{
    DatabaseError, DatabaseEventStatus, NostrDatabase, RejectedReason, SaveEventStatus,
};

use crate::boundary::IngestOutcome;
use crate::clock::Clock;
use crate::error::StoreError;
use crate::store::cold::ColdStore;
use crate::store::database::GraspDatabase;
use crate::store::feed::FeedHub;
use crate::store::lmdb::MapRoom;
use crate::store::policy::{GraspPolicy, OLDER_ANNOUNCEMENT_REASON, PolicyDecision};
use crate::store::purgatory::{GitDataProbe, Hold, Purgatory, PurgatoryConfig, PurgatoryStats};
use crate::store::rejected::{Dependency, RejectedConfig, RejectedIndex, RejectedUsage};

/// Reason for an event whose id or signature does not verify.
pub const BAD_SIGNATURE_REASON: &str = "invalid: bad signature";

/// Reason for an event refused because the purgatory is at its cap.
pub const PURGATORY_FULL_REASON: &str = "blocked: purgatory is full";

use grasp_sync_model::REPO_ANNOUNCEMENT_KIND as ANNOUNCEMENT_KIND;

/// Most stored events whose authors are looked up for one decision.
const MAX_LOOKUPS: usize = 64;

/// Most recent stored events replayed into the policy at open (besides every announcement).
pub const REBUILD_SCAN_LIMIT: usize = 20_000;

/// How a store core is put together.
pub(crate) struct CoreParts {
    pub(crate) backend: Arc<dyn NostrDatabase>,
    /// `None` accepts every verified event (tests only).
    pub(crate) policy: Option<GraspPolicy>,
    pub(crate) rejected: RejectedConfig,
    pub(crate) feed_capacity: usize,
    /// `None` keeps the cold tier in memory only.
    pub(crate) cold: Option<ColdStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) max_future_created_at: std::time::Duration,
    /// Tells a full LMDB map from other failed saves; `None` for other backends.
    pub(crate) room: Option<MapRoom>,
    /// `None`: announcements are saved whether or not their git data is present.
    pub(crate) purgatory: Option<PurgatoryParts>,
}

/// How announcements without git data are held back: the purgatory's bounds and the probe
/// that tells whether a repository's git data arrived.
#[derive(Clone)]
pub struct PurgatoryParts {
    /// Bounds and lifetimes.
    pub config: PurgatoryConfig,
    /// Whether a repository's git data is present.
    pub probe: Arc<dyn GitDataProbe>,
}

impl fmt::Debug for PurgatoryParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PurgatoryParts")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The purgatory as the core holds it.
struct Held {
    state: Mutex<Purgatory>,
    probe: Arc<dyn GitDataProbe>,
}

/// The shared state of one store.
pub(crate) struct StoreCore {
    database: Arc<GraspDatabase>,
    /// `None` accepts every verified event (tests only).
    policy: Option<Mutex<GraspPolicy>>,
    rejected: Mutex<RejectedIndex>,
    cold: Option<ColdStore>,
    /// Serialises draining and applying cold-tier writes, so they land in the order made.
    persisting: tokio::sync::Mutex<()>,
    clock: Arc<dyn Clock>,
    max_future_created_at: std::time::Duration,
    room: Option<MapRoom>,
    purgatory: Option<Held>,
}

impl fmt::Debug for StoreCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreCore")
            .field("database", &self.database)
            .field("policy", &self.policy.is_some())
            .field("rejected", &self.rejected)
            .field("cold", &self.cold)
            .field("purgatory", &self.purgatory.is_some())
            .finish_non_exhaustive()
    }
}

impl StoreCore {
    /// Wraps the backend, rebuilds the policy from what it holds and restores the cold tier.
    /// The database reports every save to the core it returns.
    pub(crate) async fn open(parts: CoreParts) -> Result<Arc<Self>, StoreError> {
        let database = Arc::new(GraspDatabase::new(
            parts.backend,
            Arc::new(FeedHub::new(parts.feed_capacity)),
        ));
        let policy = match parts.policy {
            Some(policy) => Some(Mutex::new(rebuild(policy, &database).await?)),
            None => None,
        };
        let core = Self {
            database,
            policy,
            rejected: Mutex::new(RejectedIndex::new(parts.rejected)),
            cold: parts.cold,
            persisting: tokio::sync::Mutex::new(()),
            clock: parts.clock,
            max_future_created_at: parts.max_future_created_at,
            room: parts.room,
            purgatory: parts.purgatory.map(|parts| Held {
                state: Mutex::new(Purgatory::new(parts.config)),
                probe: parts.probe,
            }),
        };
        let core = Arc::new(core);
        core.database.attach(Arc::downgrade(&core));
        core.restore().await?;
        Ok(core)
    }

    pub(crate) fn database(&self) -> &Arc<GraspDatabase> {
        &self.database
    }

    /// The whole ingest path for an event from `source` (`None`: not from a remote relay),
    /// then the re-processing of what it released and the cold tier's writes.
    pub(crate) async fn ingest(
        &self,
        event: &Event,
        source: Option<&RelayUrl>,
    ) -> Result<IngestOutcome, StoreError> {
        let outcome = self.ingest_one(event, source, true).await?;
        // The event's own outcome stands even if the follow-up work fails.
        if let Err(error) = self.settle().await {
            tracing::warn!(%error, "persisting the rejected-events index failed");
        }
        Ok(outcome)
    }

    /// The policy decision for a verified event. A rejection is recorded in the
    /// rejected-events index; an acceptance changes nothing until the event is saved.
    pub(crate) async fn admit(
        &self,
        event: &Event,
        source: Option<&RelayUrl>,
    ) -> Result<PolicyDecision, StoreError> {
        if let Some(reason) = self.too_far_ahead(event) {
            // Not remembered: once its time comes, the event is as welcome as any.
            return Ok(PolicyDecision::Reject(reason));
        }
        let Some(policy) = &self.policy else {
            return Ok(PolicyDecision::Accept);
        };
        let unknown = {
            let policy = lock(policy)?;
            match policy.decide(event, &HashMap::new()) {
                PolicyDecision::Accept => return Ok(PolicyDecision::Accept),
                PolicyDecision::Reject(reason) => {
                    let unknown = policy.unknown_references(event);
                    if unknown.is_empty() {
                        self.record_rejection(&policy, event, &reason, source)?;
                        return Ok(PolicyDecision::Reject(reason));
                    }
                    unknown
                }
            }
        };
        let known = self.authors_of(&unknown).await?;
        let policy = lock(policy)?;
        let decision = policy.decide(event, &known);
        if let PolicyDecision::Reject(reason) = &decision {
            self.record_rejection(&policy, event, reason, source)?;
        }
        Ok(decision)
    }

    /// `event` was saved: record it as accepted in the policy and as a satisfied dependency
    /// in the rejected-events index (what it releases is re-processed by the next
    /// [`StoreCore::settle`]). Called by the database for every successful save.
    pub(crate) fn handle_saved(&self, event: &Event) -> Result<(), StoreError> {
        let now = self.now();
        match &self.policy {
            Some(policy) => {
                let mut policy = lock(policy)?;
                policy.handle_accepted(event);
                let satisfied = policy.satisfied_by(event);
                self.rejected()?.handle_accepted(now, &event.id, &satisfied);
            }
            None => {
                self.rejected()?
                    .handle_accepted(now, &event.id, &[Dependency::Event(event.id)]);
            }
        }
        Ok(())
    }

    /// Re-processes every released event whose full copy was hot (announcements first), then
    /// writes the cold tier's changes. A failed re-processing is logged and skipped: the
    /// event stays released in the cold index and is reported through `poll_refetch` later.
    pub(crate) async fn settle(&self) -> Result<(), StoreError> {
        loop {
            let next = self.rejected()?.poll_reprocess();
            let Some(event) = next else {
                break;
            };
            if let Err(error) = self.ingest_one(&event, None, false).await {
                tracing::warn!(id = %event.id, %error, "re-processing a released event failed");
            }
        }
        self.persist().await
    }

    pub(crate) async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        if self.rejected()?.contains(self.now(), id) {
            return Ok(true);
        }
        if let Some(held) = &self.purgatory
            && lock(&held.state)?.contains(id)
        {
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

    /// The newest `limit` stored events up to `until` that tag one of `roots` with `e`, `E`
    /// or `q`, newest first ([`EventStore::events_tagging`](crate::EventStore::events_tagging)).
    pub(crate) async fn events_tagging(
        &self,
        roots: &[EventId],
        until: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let mut found: Vec<Event> = Vec::new();
        if roots.is_empty() {
            return Ok(found);
        }
        for letter in [
            SingleLetterTag::lowercase(Alphabet::E),
            SingleLetterTag::uppercase(Alphabet::E),
            SingleLetterTag::lowercase(Alphabet::Q),
        ] {
            let mut filter = Filter::new()
                .custom_tags(letter, roots.iter().map(EventId::to_hex))
                .limit(limit);
            if let Some(until) = until {
                filter = filter.until(until);
            }
            found.extend(self.database.query(filter).await.map_err(backend)?);
        }
        found.sort_unstable_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        found.dedup_by_key(|event| event.id);
        found.truncate(limit);
        Ok(found)
    }

    pub(crate) fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        Ok(self.rejected()?.reason(self.now(), id).map(str::to_owned))
    }

    /// How full the rejected-events index is, after forgetting what expired.
    pub(crate) fn rejected_usage(&self) -> Result<RejectedUsage, StoreError> {
        let now = self.now();
        let mut index = self.rejected()?;
        index.handle_timeout(now);
        Ok(index.usage())
    }

    /// A relay still holds `ids`: those the rejected-events index remembers are renewed (see
    /// `RejectedIndex::handle_still_held`), and the renewals persisted.
    pub(crate) async fn renew_rejected(&self, ids: &[EventId]) -> Result<(), StoreError> {
        let renewed = self.rejected()?.handle_still_held(self.now(), ids);
        if renewed > 0 {
            tracing::debug!(
                renewed,
                "rejected events a relay still holds are remembered longer"
            );
        }
        self.persist().await
    }

    /// Released IDs due for fetching by exact ID, by the relay that sent them.
    pub(crate) fn poll_refetch(&self) -> Result<Vec<(RelayUrl, Vec<EventId>)>, StoreError> {
        Ok(self.rejected()?.poll_refetch(self.now()))
    }

    /// One event through the checks, the policy and the save. `verify` is false for events
    /// re-processed from the hot cache, which were verified when they first arrived.
    pub(crate) async fn ingest_one(
        &self,
        event: &Event,
        source: Option<&RelayUrl>,
        verify: bool,
    ) -> Result<IngestOutcome, StoreError> {
        match self.database.check_id(&event.id).await.map_err(backend)? {
            DatabaseEventStatus::Saved => {
                self.rejected()?.handle_stored(&event.id);
                return Ok(IngestOutcome::Duplicate);
            }
            DatabaseEventStatus::Deleted => {
                // Deleted events stay "had" through the database; the index need not keep them.
                self.rejected()?.handle_stored(&event.id);
                return Ok(IngestOutcome::Rejected(
                    "blocked: this event is deleted".to_owned(),
                ));
            }
            DatabaseEventStatus::NotExistent => {}
        }
        if verify && event.verify().is_err() {
            // Not remembered: the id may belong to a genuine event we still want.
            return Ok(IngestOutcome::Rejected(BAD_SIGNATURE_REASON.to_owned()));
        }
        if let Some(outcome) = self.hold(event)? {
            return Ok(outcome);
        }
        if let PolicyDecision::Reject(reason) = self.admit(event, source).await? {
            return Ok(IngestOutcome::Rejected(reason));
        }
        // The database commits the acceptance once the save succeeded.
        let status = self
            .database
            .save(event)
            .await
            .map_err(|error| self.save_failed(error))?;
        Ok(match status {
            SaveEventStatus::Success => IngestOutcome::Saved,
            SaveEventStatus::Rejected(RejectedReason::Duplicate) => IngestOutcome::Duplicate,
            SaveEventStatus::Rejected(reason) => {
                let reason = save_rejection_reason(reason).to_owned();
                self.rejected()?
                    .handle_rejected(self.now(), event, &reason, Vec::new(), source);
                IngestOutcome::Rejected(reason)
            }
        })
    }

    /// Holds `event` in purgatory when it is an announcement the policy accepts for a
    /// repository not yet accepted whose git data is absent, or an event the policy refuses
    /// that depends on a held announcement. `None`: the event takes the ordinary path.
    fn hold(&self, event: &Event) -> Result<Option<IngestOutcome>, StoreError> {
        let (Some(held), Some(policy)) = (&self.purgatory, &self.policy) else {
            return Ok(None);
        };
        let now = self.now();
        let hold = if event.kind.as_u16() == ANNOUNCEMENT_KIND {
            let (announcement, accepted) = {
                let policy = lock(policy)?;
                if !policy.decide(event, &HashMap::new()).is_accept() {
                    return Ok(None);
                }
                let Ok(announcement) = RepoAnnouncement::from_event(event, policy.limits()) else {
                    return Ok(None);
                };
                let accepted = policy.is_accepted_repository(&announcement.coordinate);
                (announcement, accepted)
            };
            // The git-data probe reads the file system: never under the policy lock.
            if accepted || held.probe.is_present(&announcement.coordinate) {
                return Ok(None);
            }
            lock(&held.state)?.hold_announcement(now, announcement, event)
        } else {
            let Some(coordinate) = lock(&held.state)?.holder_of(now, event) else {
                return Ok(None);
            };
            if lock(policy)?.decide(event, &HashMap::new()).is_accept() {
                return Ok(None);
            }
            match lock(&held.state)?.hold_dependent(now, &coordinate, event) {
                // Promoted meanwhile: the ordinary path finds the announcement stored.
                Hold::Gone => return Ok(None),
                hold => hold,
            }
        };
        Ok(Some(match hold {
            Hold::Held => IngestOutcome::Deferred,
            Hold::AlreadyHeld => IngestOutcome::Duplicate,
            Hold::Older => IngestOutcome::Rejected(OLDER_ANNOUNCEMENT_REASON.to_owned()),
            Hold::Full => IngestOutcome::Rejected(PURGATORY_FULL_REASON.to_owned()),
            Hold::Gone => return Ok(None),
        }))
    }

    /// Promotes every held announcement whose git data is now present: the announcement goes
    /// through the policy and is saved, then the events it held. Returns how many were
    /// promoted. Expired entries are dropped first.
    pub(crate) async fn promote_ready(&self) -> Result<usize, StoreError> {
        let Some(held) = &self.purgatory else {
            return Ok(0);
        };
        let ready: Vec<RepoCoordinate> = {
            let mut state = lock(&held.state)?;
            state.expire(self.now());
            state.coordinates()
        };
        // The probe reads the file system, up to one directory walk per entry: on a blocking
        // thread.
        let probe = Arc::clone(&held.probe);
        let ready: Vec<RepoCoordinate> = tokio::task::spawn_blocking(move || {
            ready
                .into_iter()
                .filter(|coordinate| probe.is_present(coordinate))
                .collect()
        })
        .await
        .map_err(|error| StoreError::Backend(format!("checking for git data: {error}")))?;
        let mut promoted = 0;
        for coordinate in ready {
            let Some(taken) = lock(&held.state)?.take(&coordinate) else {
                continue;
            };
            let announcement = taken.announcement().clone();
            match self.ingest_one(&announcement, None, false).await {
                Ok(IngestOutcome::Saved | IngestOutcome::Duplicate) => {
                    lock(&held.state)?.promoted();
                    promoted += 1;
                }
                Ok(outcome) => {
                    tracing::warn!(id = %announcement.id, ?outcome, "a promoted announcement was not stored");
                }
                Err(error) => {
                    // Nothing is lost: the entry is held again and promoted by a later pass.
                    tracing::warn!(id = %announcement.id, %error, "storing a promoted announcement failed; it stays in purgatory");
                    lock(&held.state)?.restore(taken);
                    continue;
                }
            }
            for event in taken.dependents() {
                if let Err(error) = self.ingest_one(event, None, false).await {
                    tracing::warn!(id = %event.id, %error, "storing an event held in purgatory failed");
                }
            }
        }
        self.settle().await?;
        Ok(promoted)
    }

    /// The purgatory's snapshot for `StateOnly` sync (empty without a purgatory).
    pub(crate) fn purgatory_snapshot(&self) -> Vec<PurgatoryEntry> {
        match &self.purgatory {
            Some(held) => match lock(&held.state) {
                Ok(mut state) => state.snapshot(self.now()),
                Err(_) => Vec::new(),
            },
            None => Vec::new(),
        }
    }

    /// What the purgatory holds; `None` without a purgatory.
    pub(crate) fn purgatory_stats(&self) -> Option<PurgatoryStats> {
        let held = self.purgatory.as_ref()?;
        lock(&held.state).ok().map(|state| state.stats(self.now()))
    }

    /// Announcements, accepted (`false`) or held in purgatory (`true`), with `identifier`
    /// that `author` owns or maintains.
    pub(crate) fn repositories_for(
        &self,
        identifier: &str,
        author: &PublicKey,
    ) -> Result<Vec<(RepoAnnouncement, bool)>, StoreError> {
        let mut found: Vec<(RepoAnnouncement, bool)> = match &self.policy {
            Some(policy) => lock(policy)?
                .accepted_announcements()
                .filter(|a| a.coordinate.identifier() == identifier)
                .filter(|a| a.coordinate.owner() == author || a.maintainers.contains(author))
                .map(|a| (a.clone(), false))
                .collect(),
            None => Vec::new(),
        };
        if let Some(held) = &self.purgatory {
            let state = lock(&held.state)?;
            found.extend(
                state
                    .announcements_for(identifier, author)
                    .into_iter()
                    .map(|a| (a, true)),
            );
        }
        Ok(found)
    }

    /// Loads the persisted cold tier, dropping entries for events stored meanwhile.
    async fn restore(&self) -> Result<(), StoreError> {
        let Some(cold) = &self.cold else {
            return Ok(());
        };
        let records = cold.load().await?;
        let mut kept = Vec::with_capacity(records.len());
        let mut stored = Vec::new();
        for record in records {
            match self.database.check_id(&record.id).await.map_err(backend)? {
                DatabaseEventStatus::Saved => stored.push(record.id),
                _ => kept.push(record),
            }
        }
        {
            let now = self.now();
            let mut index = self.rejected()?;
            index.handle_restored(now, kept);
            for id in &stored {
                index.handle_stored(id);
            }
        }
        cold.apply(stored.into_iter().map(|id| (id, None)).collect())
            .await?;
        self.persist().await
    }

    /// Writes the cold tier's pending changes (dropped when the tier is not persisted).
    async fn persist(&self) -> Result<(), StoreError> {
        if !self.rejected()?.has_pending_writes() {
            return Ok(());
        }
        let _turn = self.persisting.lock().await;
        let changes = self.rejected()?.poll_persist();
        match &self.cold {
            Some(cold) => cold.apply(changes).await,
            None => Ok(()),
        }
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

    /// Records a rejection with what it awaits, while the caller holds the policy lock, so an
    /// acceptance cannot be committed between the decision and the record.
    fn record_rejection(
        &self,
        policy: &GraspPolicy,
        event: &Event,
        reason: &str,
        source: Option<&RelayUrl>,
    ) -> Result<(), StoreError> {
        let awaited = policy.awaited(event);
        self.rejected()?
            .handle_rejected(self.now(), event, reason, awaited, source);
        Ok(())
    }

    /// What a failed save means, telling a full map apart where the backend allows.
    fn save_failed(&self, error: DatabaseError) -> StoreError {
        let error = backend(error);
        match &self.room {
            Some(room) => room.classify(error),
            None => error,
        }
    }

    /// The refusal of an event dated further ahead than the window allows.
    fn too_far_ahead(&self, event: &Event) -> Option<String> {
        let window = self.max_future_created_at.as_secs();
        let latest = self.now().as_secs().saturating_add(window);
        (event.created_at.as_secs() > latest)
            .then(|| format!("invalid: created_at is more than {window} s in the future"))
    }

    fn now(&self) -> Timestamp {
        self.clock.unix_now()
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
        .query(Filter::new().kind(Kind::from(ANNOUNCEMENT_KIND)))
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

#[cfg(test)]
mod tests;
