//! `GraspPolicy`: the GRASP acceptance decision for one event, and the state it needs (accepted
//! announcements, recently accepted event IDs and the IDs they reference). Pure: no I/O, no
//! clock; the caller feeds it events and, when asked, the authors of stored events.
//!
//! The rules are documented in `docs/acceptance-policy.md`.

mod dependencies;
mod references;

use std::collections::{HashMap, HashSet};

use grasp_sync_model::{
    AnnouncementLimits, RelayUrl, RepoAnnouncement, RepoCoordinate, RepoState, RootEvent, RootKind,
};
use nostr::{Event, EventId, PublicKey};

use crate::store::bounded::BoundedMap;
use references::{coordinate_references, deleted_addresses, deleted_ids, event_references};

use grasp_sync_model::REPO_ANNOUNCEMENT_KIND as ANNOUNCEMENT_KIND;
use grasp_sync_model::REPO_STATE_KIND as STATE_KIND;
/// Kind of a deletion request (NIP-09).
const DELETION_KIND: u16 = 5;

/// Reason given for an announcement older than the accepted one with the same address.
pub const OLDER_ANNOUNCEMENT_REASON: &str = "invalid: older than the stored announcement";

/// What the policy decided about one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Store the event.
    Accept,
    /// Refuse the event, with a NIP-01 reason starting `blocked: ` or `invalid: `.
    Reject(String),
}

impl PolicyDecision {
    /// Whether the event is accepted.
    pub fn is_accept(&self) -> bool {
        matches!(self, Self::Accept)
    }
}

/// Accepted event IDs the policy remembers by default: as many as it replays from the store
/// when it is rebuilt ([`REBUILD_SCAN_LIMIT`](super::REBUILD_SCAN_LIMIT)), so a daemon that
/// synced a large store holds no more than one restarted over it. The rest are looked up in the
/// store when an event depends on them. At ten times the gitnostr size, 100,000 held about
/// 6 MB for the life of the daemon.
pub const DEFAULT_ACCEPTED_IDS: usize = 20_000;

/// Who the policy serves and how much it remembers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// This service's relay URL, as announcements must list it in their `relays` tag.
    pub service_url: RelayUrl,
    /// This service's domain, as announcements' `clone` URLs must use it (compared
    /// case-insensitively with the URL host).
    pub domain: String,
    /// Most accepted event IDs (with authors) remembered; the oldest are forgotten first. A
    /// cache: an event that depends on one it forgot is decided again with its author looked
    /// up in the store ([`GraspPolicy::unknown_references`]).
    pub accepted_ids_capacity: usize,
    /// Most IDs referenced by accepted events remembered; the oldest are forgotten first.
    pub referenced_ids_capacity: usize,
    /// Caps applied when parsing announcements.
    pub limits: AnnouncementLimits,
}

impl PolicyConfig {
    /// A configuration with default capacities: [`DEFAULT_ACCEPTED_IDS`] accepted and 100,000
    /// referenced IDs.
    pub fn new(service_url: RelayUrl, domain: impl Into<String>) -> Self {
        Self {
            service_url,
            domain: domain.into(),
            accepted_ids_capacity: DEFAULT_ACCEPTED_IDS,
            referenced_ids_capacity: 100_000,
            limits: AnnouncementLimits::default(),
        }
    }
}

/// The GRASP acceptance policy and its state.
///
/// [`GraspPolicy::handle_event`] decides and, on acceptance, records the event, so a caller that
/// holds the policy behind a lock gets an atomic decide-and-update. When a decision depends on
/// events the policy no longer remembers, [`GraspPolicy::unknown_references`] names them; the
/// caller looks their authors up in the store and passes them back as `known`.
#[derive(Debug, Clone)]
pub struct GraspPolicy {
    service_url: RelayUrl,
    domain: String,
    limits: AnnouncementLimits,
    /// The accepted announcements, each boxed: the table keeps room for up to twice as many
    /// entries as it holds, and a slot holds only the box.
    announcements: HashMap<RepoCoordinate, Box<RepoAnnouncement>>,
    /// The accepted announcements' coordinates by identifier, sorted: a vector rather than a
    /// set, as most identifiers have one announcement, and a set's node costs about ten times
    /// as much as a vector of a few.
    by_identifier: HashMap<String, Vec<RepoCoordinate>>,
    accepted: BoundedMap<EventId, PublicKey>,
    referenced: BoundedMap<EventId, ()>,
}

impl GraspPolicy {
    /// An empty policy: nothing accepted yet.
    pub fn new(config: PolicyConfig) -> Self {
        Self {
            service_url: config.service_url,
            domain: config.domain.trim_end_matches('.').to_ascii_lowercase(),
            limits: config.limits,
            announcements: HashMap::new(),
            by_identifier: HashMap::new(),
            accepted: BoundedMap::new(config.accepted_ids_capacity),
            referenced: BoundedMap::new(config.referenced_ids_capacity),
        }
    }

    /// Decides about `event` and records it if accepted. `known` holds authors of stored events
    /// the caller looked up (see [`GraspPolicy::unknown_references`]); it may be empty.
    pub fn handle_event(
        &mut self,
        event: &Event,
        known: &HashMap<EventId, PublicKey>,
    ) -> PolicyDecision {
        let decision = self.decide(event, known);
        if decision.is_accept() {
            self.handle_accepted(event);
        }
        decision
    }

    /// Decides about `event` without changing any state.
    pub fn decide(&self, event: &Event, known: &HashMap<EventId, PublicKey>) -> PolicyDecision {
        match event.kind.as_u16() {
            ANNOUNCEMENT_KIND => self.decide_announcement(event),
            STATE_KIND => self.decide_state(event),
            DELETION_KIND => self.decide_deletion(event, known),
            _ => self.decide_other(event, known),
        }
    }

    /// Records an event as accepted without deciding: used for events already in the store when
    /// the policy is rebuilt, and by [`GraspPolicy::handle_event`].
    pub fn handle_accepted(&mut self, event: &Event) {
        self.accepted.insert(event.id, event.pubkey);
        for id in event_references(event) {
            self.referenced.insert(id, ());
        }
        match event.kind.as_u16() {
            ANNOUNCEMENT_KIND => {
                if let Ok(announcement) = RepoAnnouncement::from_event(event, &self.limits) {
                    self.record_announcement(announcement);
                }
            }
            DELETION_KIND => self.forget_deleted_announcements(event),
            _ => {}
        }
    }

    /// The event IDs `event` depends on that the policy does not remember as accepted. If
    /// [`GraspPolicy::decide`] rejected the event and this is not empty, look these up in the
    /// store and decide again with their authors.
    pub fn unknown_references(&self, event: &Event) -> Vec<EventId> {
        let mut ids: Vec<EventId> = if event.kind.as_u16() == DELETION_KIND {
            deleted_ids(event).into_iter().flatten().collect()
        } else if matches!(event.kind.as_u16(), ANNOUNCEMENT_KIND | STATE_KIND) {
            Vec::new()
        } else {
            event_references(event)
        };
        ids.retain(|id| !self.accepted.contains_key(id));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The caps applied when parsing announcements.
    pub fn limits(&self) -> &AnnouncementLimits {
        &self.limits
    }

    /// How many accepted event IDs the policy remembers.
    pub fn accepted_ids_capacity(&self) -> usize {
        self.accepted.capacity()
    }

    /// Whether an announcement with this coordinate is accepted.
    pub fn is_accepted_repository(&self, coordinate: &RepoCoordinate) -> bool {
        self.announcements.contains_key(coordinate)
    }

    /// The accepted announcements.
    pub fn accepted_announcements(&self) -> impl Iterator<Item = &RepoAnnouncement> {
        self.announcements
            .values()
            .map(|announcement| &**announcement)
    }

    /// Owners and maintainers allowed to publish for repositories with `identifier`: the owners
    /// and maintainers of accepted announcements that list this service, then, transitively, the
    /// maintainers named by accepted announcements of anyone already in the set.
    pub fn maintainer_closure(&self, identifier: &str) -> HashSet<PublicKey> {
        self.closure(identifier, None)
    }

    fn decide_announcement(&self, event: &Event) -> PolicyDecision {
        let announcement = match RepoAnnouncement::from_event(event, &self.limits) {
            Ok(announcement) => announcement,
            Err(error) => return PolicyDecision::Reject(format!("invalid: {error}")),
        };
        if let Some(stored) = self.announcements.get(&announcement.coordinate) {
            if announcement.version() == stored.version() {
                return PolicyDecision::Accept;
            }
            if announcement.version() < stored.version() {
                return PolicyDecision::Reject(OLDER_ANNOUNCEMENT_REASON.to_owned());
            }
        }
        if self.lists_service(&announcement) {
            return PolicyDecision::Accept;
        }
        let coordinate = &announcement.coordinate;
        if self
            .closure(coordinate.identifier(), Some(coordinate))
            .contains(coordinate.owner())
        {
            return PolicyDecision::Accept;
        }
        PolicyDecision::Reject(
            "blocked: announcement does not list this service in `relays` and `clone`, and its \
             author maintains no accepted repository with this identifier"
                .to_owned(),
        )
    }

    fn decide_state(&self, event: &Event) -> PolicyDecision {
        let state = match RepoState::from_event(event) {
            Ok(state) => state,
            Err(error) => return PolicyDecision::Reject(format!("invalid: {error}")),
        };
        let identifier = state.coordinate.identifier();
        if self.by_identifier.get(identifier).is_none_or(Vec::is_empty) {
            return PolicyDecision::Reject(
                "blocked: no accepted repository announcement with this identifier".to_owned(),
            );
        }
        if self.may_publish_state(identifier, &event.pubkey) {
            return PolicyDecision::Accept;
        }
        PolicyDecision::Reject(
            "blocked: author is not an owner or maintainer of an accepted repository with this \
             identifier"
                .to_owned(),
        )
    }

    fn decide_deletion(
        &self,
        event: &Event,
        known: &HashMap<EventId, PublicKey>,
    ) -> PolicyDecision {
        let ids = deleted_ids(event);
        let addresses = deleted_addresses(event);
        if ids.is_empty() && addresses.is_empty() {
            return PolicyDecision::Reject("invalid: deletion names no event".to_owned());
        }
        for id in ids {
            let Some(id) = id else {
                return PolicyDecision::Reject("invalid: malformed `e` tag in deletion".to_owned());
            };
            match self.accepted.get(&id).or_else(|| known.get(&id)) {
                None => {
                    return PolicyDecision::Reject(
                        "blocked: deletion of an unknown event".to_owned(),
                    );
                }
                Some(author) if *author != event.pubkey => {
                    return PolicyDecision::Reject(
                        "blocked: deletion of another author's event".to_owned(),
                    );
                }
                Some(_) => {}
            }
        }
        for address in addresses {
            let Some((kind, author, identifier)) = address else {
                return PolicyDecision::Reject("invalid: malformed `a` tag in deletion".to_owned());
            };
            if author != event.pubkey {
                return PolicyDecision::Reject(
                    "blocked: deletion of another author's event".to_owned(),
                );
            }
            let accepted = match kind {
                ANNOUNCEMENT_KIND => RepoCoordinate::new(author, identifier)
                    .is_ok_and(|coordinate| self.announcements.contains_key(&coordinate)),
                STATE_KIND => self.may_publish_state(&identifier, &author),
                _ => false,
            };
            if !accepted {
                return PolicyDecision::Reject("blocked: deletion of an unknown event".to_owned());
            }
        }
        PolicyDecision::Accept
    }

    fn decide_other(&self, event: &Event, known: &HashMap<EventId, PublicKey>) -> PolicyDecision {
        if self.referenced.contains_key(&event.id)
            || coordinate_references(event)
                .iter()
                .any(|c| self.announcements.contains_key(c))
            || event_references(event)
                .iter()
                .any(|id| self.accepted.contains_key(id) || known.contains_key(id))
        {
            return PolicyDecision::Accept;
        }
        if RootKind::from_kind(event.kind.as_u16()).is_some()
            && let Err(error) = RootEvent::from_event(event)
        {
            return PolicyDecision::Reject(format!("invalid: {error}"));
        }
        PolicyDecision::Reject(
            "blocked: event references no accepted repository or event".to_owned(),
        )
    }

    /// Whether `author` owns an accepted announcement with `identifier` or is in its closure.
    fn may_publish_state(&self, identifier: &str, author: &PublicKey) -> bool {
        let Some(coordinates) = self.by_identifier.get(identifier) else {
            return false;
        };
        coordinates
            .iter()
            .any(|coordinate| coordinate.owner() == author)
            || self.closure(identifier, None).contains(author)
    }

    /// Whether the announcement lists this service's relay and a clone URL on its domain.
    fn lists_service(&self, announcement: &RepoAnnouncement) -> bool {
        announcement.relays.contains(&self.service_url)
            && announcement
                .clone_urls
                .iter()
                .any(|clone| self.is_own_host(clone))
    }

    fn is_own_host(&self, clone_url: &str) -> bool {
        url::Url::parse(clone_url).ok().is_some_and(|url| {
            url.host_str().is_some_and(|host| {
                host.trim_end_matches('.')
                    .eq_ignore_ascii_case(&self.domain)
            })
        })
    }

    /// The maintainer closure for `identifier`, ignoring the announcement at `excluded` (the
    /// address a candidate announcement would replace, so it cannot vouch for itself).
    fn closure(&self, identifier: &str, excluded: Option<&RepoCoordinate>) -> HashSet<PublicKey> {
        let announcements: Vec<&RepoAnnouncement> = self
            .by_identifier
            .get(identifier)
            .into_iter()
            .flatten()
            .filter(|coordinate| Some(*coordinate) != excluded)
            .filter_map(|coordinate| self.announcements.get(coordinate))
            .map(|announcement| &**announcement)
            .collect();
        let mut keys = HashSet::new();
        let mut expanded = vec![false; announcements.len()];
        for (index, announcement) in announcements.iter().enumerate() {
            if self.lists_service(announcement) {
                keys.insert(*announcement.coordinate.owner());
                keys.extend(announcement.maintainers.iter().copied());
                expanded[index] = true;
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for (index, announcement) in announcements.iter().enumerate() {
                if !expanded[index] && keys.contains(announcement.coordinate.owner()) {
                    keys.extend(announcement.maintainers.iter().copied());
                    expanded[index] = true;
                    changed = true;
                }
            }
        }
        keys
    }

    fn record_announcement(&mut self, announcement: RepoAnnouncement) {
        let coordinate = announcement.coordinate.clone();
        if self
            .announcements
            .get(&coordinate)
            .is_some_and(|stored| stored.version() >= announcement.version())
        {
            return;
        }
        let same_identifier = self
            .by_identifier
            .entry(coordinate.identifier().to_owned())
            .or_default();
        if let Err(position) = same_identifier.binary_search(&coordinate) {
            same_identifier.insert(position, coordinate.clone());
        }
        self.announcements
            .insert(coordinate, Box::new(announcement));
    }

    /// Drops announcements an accepted deletion removes (by address or by ID).
    fn forget_deleted_announcements(&mut self, deletion: &Event) {
        let mut gone: Vec<RepoCoordinate> = deleted_addresses(deletion)
            .into_iter()
            .flatten()
            .filter(|(kind, author, _)| *kind == ANNOUNCEMENT_KIND && *author == deletion.pubkey)
            .filter_map(|(_, author, identifier)| RepoCoordinate::new(author, identifier).ok())
            .collect();
        let ids: HashSet<EventId> = deleted_ids(deletion).into_iter().flatten().collect();
        gone.extend(
            self.announcements
                .values()
                .filter(|a| ids.contains(&a.id) && *a.coordinate.owner() == deletion.pubkey)
                .map(|a| a.coordinate.clone()),
        );
        for coordinate in gone {
            if self.announcements.remove(&coordinate).is_some()
                && let Some(same) = self.by_identifier.get_mut(coordinate.identifier())
            {
                same.retain(|held| *held != coordinate);
                if same.is_empty() {
                    self.by_identifier.remove(coordinate.identifier());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
