//! The policy follows the database: an event whose save fails is not recorded as accepted,
//! whether it came from sync or from a client of the embedded relay, and an acceptance commits
//! (and releases what waited for it) once the save succeeds.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::future::join_all;
use grasp_sync_model::{RelayUrl, RepoCoordinate};
use nostr::util::BoxedFuture;
use nostr::{Event, EventBuilder, EventId, Filter, Keys, Kind, SecretKey, Tag, Timestamp};
use nostr_database::{
    Backend, DatabaseError, DatabaseEventStatus, Events, MemoryDatabase, MemoryDatabaseOptions,
    NostrDatabase, SaveEventStatus,
};
use nostr_relay_builder::builder::{PolicyResult, WritePolicy};

use super::{CoreParts, StoreCore};
use crate::boundary::IngestOutcome;
use crate::clock::TokioClock;
use crate::error::StoreError;
use crate::store::config::DEFAULT_MAX_FUTURE_CREATED_AT;
use crate::store::database::MAX_SAVES_IN_FLIGHT;
use crate::store::feed::DEFAULT_FEED_CAPACITY;
use crate::store::policy::{DEFAULT_ACCEPTED_IDS, GraspPolicy, PolicyConfig};
use crate::store::rejected::RejectedConfig;
use crate::store::write_policy::GraspWritePolicy;

const SERVICE: &str = "wss://relay.example.com";

/// A memory backend whose saves fail while `failing` is set, and that counts the most saves
/// it had in flight at once (each save lets other tasks run before it completes).
#[derive(Debug)]
struct FlakyBackend {
    inner: MemoryDatabase,
    failing: AtomicBool,
    saving: AtomicUsize,
    most_saving: AtomicUsize,
}

impl NostrDatabase for FlakyBackend {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        Box::pin(async move {
            let saving = self.saving.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_saving.fetch_max(saving, Ordering::SeqCst);
            tokio::task::yield_now().await;
            let status = if self.failing.load(Ordering::SeqCst) {
                Err(DatabaseError::backend(std::io::Error::other("full")))
            } else {
                self.inner.save_event(event).await
            };
            self.saving.fetch_sub(1, Ordering::SeqCst);
            status
        })
    }

    fn check_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<DatabaseEventStatus, DatabaseError>> {
        self.inner.check_id(event_id)
    }

    fn event_by_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<Option<Event>, DatabaseError>> {
        self.inner.event_by_id(event_id)
    }

    fn count(&self, filter: Filter) -> BoxedFuture<'_, Result<usize, DatabaseError>> {
        self.inner.count(filter)
    }

    fn query(&self, filter: Filter) -> BoxedFuture<'_, Result<Events, DatabaseError>> {
        self.inner.query(filter)
    }

    fn negentropy_items(
        &self,
        filter: Filter,
    ) -> BoxedFuture<'_, Result<Vec<(EventId, Timestamp)>, DatabaseError>> {
        self.inner.negentropy_items(filter)
    }

    fn delete(&self, filter: Filter) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.inner.delete(filter)
    }

    fn wipe(&self) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.inner.wipe()
    }
}

async fn open() -> (Arc<StoreCore>, Arc<FlakyBackend>) {
    open_remembering(DEFAULT_ACCEPTED_IDS).await
}

/// A store whose policy remembers `accepted_ids` accepted event IDs.
async fn open_remembering(accepted_ids: usize) -> (Arc<StoreCore>, Arc<FlakyBackend>) {
    let backend = Arc::new(FlakyBackend {
        inner: MemoryDatabase::with_opts(MemoryDatabaseOptions {
            events: true,
            max_events: None,
        }),
        failing: AtomicBool::new(false),
        saving: AtomicUsize::new(0),
        most_saving: AtomicUsize::new(0),
    });
    let mut policy = PolicyConfig::new(
        RelayUrl::parse(SERVICE).expect("valid url"),
        "relay.example.com",
    );
    policy.accepted_ids_capacity = accepted_ids;
    let core = StoreCore::open(CoreParts {
        backend: backend.clone(),
        policy: Some(GraspPolicy::new(policy)),
        rejected: RejectedConfig::default(),
        feed_capacity: DEFAULT_FEED_CAPACITY,
        cold: None,
        clock: Arc::new(TokioClock::from_system()),
        max_future_created_at: DEFAULT_MAX_FUTURE_CREATED_AT,
        room: None,
        purgatory: None,
    })
    .await
    .expect("store opens");
    (core, backend)
}

fn keys(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).expect("valid secret key"))
}

fn event(keys: &Keys, kind: u16, created_at: u64, tags: &[&[&str]]) -> Event {
    let tags = tags
        .iter()
        .map(|values| Tag::parse(values.iter().copied()).expect("valid tag"));
    EventBuilder::new(Kind::from(kind), format!("event at {created_at}"))
        .tags(tags)
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(keys)
        .expect("signing works")
}

fn announcement(owner: &Keys) -> Event {
    event(
        owner,
        30617,
        10,
        &[
            &["d", "repo"],
            &["relays", SERVICE],
            &["clone", "https://relay.example.com/repo.git"],
        ],
    )
}

fn state(owner: &Keys) -> Event {
    event(owner, 30618, 12, &[&["d", "repo"]])
}

fn issue(author: &Keys, owner: &Keys) -> Event {
    let repo = RepoCoordinate::new(owner.public_key(), "repo")
        .expect("valid coordinate")
        .to_string();
    event(author, 1621, 20, &[&["a", &repo]])
}

fn source() -> RelayUrl {
    RelayUrl::parse("wss://source.example.org").expect("valid url")
}

fn client() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 4000)
}

/// Whether the embedded relay's write policy admits `event`.
async fn accepted(policy: &GraspWritePolicy, event: &Event) -> bool {
    match policy.admit_event(event, &client()).await {
        PolicyResult::Accept => true,
        PolicyResult::Reject(_) => false,
    }
}

async fn stored(core: &StoreCore, event: &Event) -> bool {
    core.database().check_id(&event.id).await.expect("check id") == DatabaseEventStatus::Saved
}

async fn check_ingest(core: &StoreCore, event: &Event, expected: &str) {
    let outcome = core.ingest(event, Some(&source())).await;
    let got = match &outcome {
        Ok(IngestOutcome::Saved) => "saved",
        Ok(IngestOutcome::Rejected(_)) => "rejected",
        Err(StoreError::Backend(_)) => "failed",
        _ => "other",
    };
    assert_eq!(got, expected, "{outcome:?} for kind {}", event.kind);
}

#[tokio::test]
async fn at_most_a_bounded_number_of_saves_reach_the_backend_at_once() {
    let (core, backend) = open().await;
    let owner = keys(1);
    check_ingest(&core, &announcement(&owner), "saved").await;
    let repo = RepoCoordinate::new(owner.public_key(), "repo")
        .expect("valid coordinate")
        .to_string();
    let issues: Vec<Event> = (0..3 * MAX_SAVES_IN_FLIGHT as u64)
        .map(|n| event(&keys(2), 1621, 100 + n, &[&["a", &repo]]))
        .collect();
    let from = source();
    let outcomes = join_all(issues.iter().map(|issue| core.ingest(issue, Some(&from)))).await;
    assert!(
        outcomes
            .iter()
            .all(|outcome| matches!(outcome, Ok(IngestOutcome::Saved))),
        "{outcomes:?}"
    );
    let most = backend.most_saving.load(Ordering::SeqCst);
    // Saves did overlap, and no more of them than the bound.
    assert!(
        most > 1 && most <= MAX_SAVES_IN_FLIGHT,
        "{most} saves at once"
    );
}

#[tokio::test]
async fn a_reply_to_an_event_the_policy_forgot_is_accepted_by_a_store_lookup() {
    let (core, _) = open_remembering(2).await;
    let owner = keys(1);
    check_ingest(&core, &announcement(&owner), "saved").await;
    let first = issue(&keys(2), &owner);
    check_ingest(&core, &first, "saved").await;
    // Two more accepted events push the first issue out of the policy's memory.
    for author in [3, 4] {
        check_ingest(&core, &issue(&keys(author), &owner), "saved").await;
    }
    let first_id = first.id.to_hex();
    let reply = event(&keys(5), 1, 30, &[&["e", &first_id]]);
    check_ingest(&core, &reply, "saved").await;
    // A reply to an event the store never held is still refused.
    let unknown = event(&keys(6), 1, 31, &[&["e", &"ab".repeat(32)]]);
    check_ingest(&core, &unknown, "rejected").await;
}

#[tokio::test]
async fn a_synced_event_whose_save_fails_is_not_accepted() {
    let (core, backend) = open().await;
    let owner = keys(1);
    let repo = announcement(&owner);
    backend.failing.store(true, Ordering::SeqCst);
    check_ingest(&core, &repo, "failed").await;
    backend.failing.store(false, Ordering::SeqCst);

    // The announcement is not stored, so nothing that needs it is accepted.
    let early_state = state(&owner);
    let early_issue = issue(&keys(2), &owner);
    check_ingest(&core, &early_state, "rejected").await;
    check_ingest(&core, &early_issue, "rejected").await;

    // Once saved, it is accepted and releases what waited for it.
    check_ingest(&core, &repo, "saved").await;
    assert!(stored(&core, &repo).await);
    assert!(stored(&core, &early_state).await);
    assert!(stored(&core, &early_issue).await);
}

#[tokio::test]
async fn a_client_event_whose_save_fails_is_not_accepted() {
    let (core, backend) = open().await;
    let policy = GraspWritePolicy::new(Arc::clone(&core));
    let database = Arc::clone(core.database());
    let owner = keys(1);
    let repo = announcement(&owner);

    // The relay admits the announcement, then its save fails.
    assert!(accepted(&policy, &repo).await);
    backend.failing.store(true, Ordering::SeqCst);
    assert!(database.save_event(&repo).await.is_err());
    backend.failing.store(false, Ordering::SeqCst);

    let early_state = state(&owner);
    assert!(!accepted(&policy, &early_state).await);

    // Published again and saved: accepted, and the state that waited for it is stored.
    assert!(accepted(&policy, &repo).await);
    assert_eq!(
        database.save_event(&repo).await.expect("save"),
        SaveEventStatus::Success
    );
    assert!(stored(&core, &early_state).await);
    let later_state = event(&owner, 30618, 13, &[&["d", "repo"]]);
    assert!(accepted(&policy, &later_state).await);
}
