//! NIP-34 events parsed into typed values: repository announcements (30617), the root events
//! that open work on a repository (1617 patch, 1618 pull request, 1621 issue) and repository
//! state (30618).
//!
//! Parsing never trusts the event: wrong kinds, a missing `d` tag or a root event that names no
//! repository are typed errors, and an announcement's lists are capped by
//! [`AnnouncementLimits`] with the number of dropped values reported.

use std::collections::BTreeSet;

use nostr::{Event, EventId, PublicKey, Timestamp};

use crate::coordinate::{REPO_ANNOUNCEMENT_KIND, RepoCoordinate};
use crate::error::ModelError;
use crate::relay_url::RelayUrl;

/// Kind of a NIP-34 repository state event.
pub const REPO_STATE_KIND: u16 = 30618;
/// Kind of a NIP-34 patch.
pub const PATCH_KIND: u16 = 1617;
/// Kind of a NIP-34 pull request.
pub const PULL_REQUEST_KIND: u16 = 1618;
/// Kind of a NIP-34 issue.
pub const ISSUE_KIND: u16 = 1621;

/// Most repositories one root event may reference; further `a` tags are dropped and counted.
pub const MAX_REPOS_PER_ROOT_EVENT: usize = 64;

/// Caps applied to one announcement, so a single hostile event cannot blow up the relay set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnouncementLimits {
    /// Most distinct relays kept; the first ones in tag order are kept.
    pub max_relays: usize,
    /// Longest identifier accepted, in bytes (never more than
    /// [`crate::coordinate::MAX_IDENTIFIER_BYTES`]).
    pub max_identifier_bytes: usize,
    /// Most distinct clone URLs kept.
    pub max_clone_urls: usize,
    /// Most distinct maintainers kept.
    pub max_maintainers: usize,
}

impl Default for AnnouncementLimits {
    fn default() -> Self {
        Self {
            max_relays: 32,
            max_identifier_bytes: crate::coordinate::MAX_IDENTIFIER_BYTES,
            max_clone_urls: 32,
            max_maintainers: 64,
        }
    }
}

/// Identity of one version of an addressable event, ordered by NIP-01 replacement rules.
///
/// The greater version wins: a later `created_at` wins, and on a tie the lowest event id wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventVersion {
    /// When the event was created.
    pub created_at: Timestamp,
    /// The event id.
    pub id: EventId,
}

impl Ord for EventVersion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.created_at
            .cmp(&other.created_at)
            .then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for EventVersion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A parsed repository announcement (kind 30617).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoAnnouncement {
    /// The repository: author and `d` identifier.
    pub coordinate: RepoCoordinate,
    /// Normalised relay URLs from every value of every `relays` tag, sorted and deduplicated.
    pub relays: Vec<RelayUrl>,
    /// Values of every `clone` tag, in tag order, deduplicated.
    pub clone_urls: Vec<String>,
    /// Valid public keys from every `maintainers` tag, sorted and deduplicated.
    pub maintainers: Vec<PublicKey>,
    /// When the announcement was created.
    pub created_at: Timestamp,
    /// The event id.
    pub id: EventId,
    /// Relay values dropped: unparsable URLs plus those beyond [`AnnouncementLimits::max_relays`].
    pub dropped_relays: usize,
    /// Clone URLs and maintainers dropped: invalid keys, empty values or beyond their caps.
    pub dropped_other: usize,
}

impl RepoAnnouncement {
    /// Parses a kind 30617 event.
    pub fn from_event(event: &Event, limits: &AnnouncementLimits) -> Result<Self, ModelError> {
        expect_kind(
            event,
            REPO_ANNOUNCEMENT_KIND,
            "a repository announcement (30617)",
        )?;
        let coordinate = addressable_coordinate(event, limits.max_identifier_bytes)?;

        let mut relays = BTreeSet::new();
        let mut dropped_relays = 0;
        for value in tag_values(event, "relays") {
            match RelayUrl::parse(value) {
                Ok(url) if relays.contains(&url) => {}
                Ok(url) if relays.len() < limits.max_relays => {
                    relays.insert(url);
                }
                Ok(_) | Err(_) => dropped_relays += 1,
            }
        }

        let mut dropped_other = 0;
        let mut clone_urls: Vec<String> = Vec::new();
        for value in tag_values(event, "clone") {
            if clone_urls.iter().any(|known| known == value) {
                continue;
            }
            if value.is_empty() || clone_urls.len() >= limits.max_clone_urls {
                dropped_other += 1;
            } else {
                clone_urls.push(value.to_owned());
            }
        }
        let mut maintainers = BTreeSet::new();
        for value in tag_values(event, "maintainers") {
            match PublicKey::from_hex(value) {
                Ok(key) if maintainers.contains(&key) => {}
                Ok(key) if maintainers.len() < limits.max_maintainers => {
                    maintainers.insert(key);
                }
                Ok(_) | Err(_) => dropped_other += 1,
            }
        }

        Ok(Self {
            coordinate,
            relays: relays.into_iter().collect(),
            clone_urls,
            maintainers: maintainers.into_iter().collect(),
            created_at: event.created_at,
            id: event.id,
            dropped_relays,
            dropped_other,
        })
    }

    /// This announcement's place in NIP-01 replacement order.
    pub fn version(&self) -> EventVersion {
        EventVersion {
            created_at: self.created_at,
            id: self.id,
        }
    }
}

/// Which kind of root event opened the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RootKind {
    /// Kind 1617.
    Patch,
    /// Kind 1618.
    PullRequest,
    /// Kind 1621.
    Issue,
}

impl RootKind {
    /// The root kind of an event kind, if it is one.
    pub fn from_kind(kind: u16) -> Option<Self> {
        match kind {
            PATCH_KIND => Some(Self::Patch),
            PULL_REQUEST_KIND => Some(Self::PullRequest),
            ISSUE_KIND => Some(Self::Issue),
            _ => None,
        }
    }

    /// The event kind number.
    pub fn as_u16(self) -> u16 {
        match self {
            Self::Patch => PATCH_KIND,
            Self::PullRequest => PULL_REQUEST_KIND,
            Self::Issue => ISSUE_KIND,
        }
    }
}

/// A parsed root event: a patch, pull request or issue, with every repository it references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootEvent {
    /// The event id.
    pub id: EventId,
    /// Patch, pull request or issue.
    pub kind: RootKind,
    /// The author.
    pub author: PublicKey,
    /// When the event was created.
    pub created_at: Timestamp,
    /// Every repository referenced through a well-formed `a` tag, sorted and deduplicated.
    pub repos: Vec<RepoCoordinate>,
    /// `a` tag values dropped: malformed repository coordinates, or beyond
    /// [`MAX_REPOS_PER_ROOT_EVENT`]. Coordinates of other kinds are not counted.
    pub dropped_repos: usize,
}

impl RootEvent {
    /// Parses a kind 1617, 1618 or 1621 event.
    pub fn from_event(event: &Event) -> Result<Self, ModelError> {
        let kind = RootKind::from_kind(event.kind.as_u16()).ok_or(ModelError::WrongKind {
            expected: "a patch, pull request or issue (1617, 1618, 1621)",
            found: event.kind.as_u16(),
        })?;
        let prefix = format!("{REPO_ANNOUNCEMENT_KIND}:");
        let mut repos = BTreeSet::new();
        let mut dropped_repos = 0;
        for tag in event.tags.iter() {
            let values = tag.as_slice();
            if values.first().map(String::as_str) != Some("a") {
                continue;
            }
            let Some(value) = values.get(1) else { continue };
            if !value.starts_with(&prefix) {
                continue;
            }
            match value.parse::<RepoCoordinate>() {
                Ok(coordinate) if repos.contains(&coordinate) => {}
                Ok(coordinate) if repos.len() < MAX_REPOS_PER_ROOT_EVENT => {
                    repos.insert(coordinate);
                }
                Ok(_) | Err(_) => dropped_repos += 1,
            }
        }
        if repos.is_empty() {
            return Err(ModelError::NoRepositoryReference);
        }
        Ok(Self {
            id: event.id,
            kind,
            author: event.pubkey,
            created_at: event.created_at,
            repos: repos.into_iter().collect(),
            dropped_repos,
        })
    }
}

/// A parsed repository state event (kind 30618).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoState {
    /// The repository, from the author and the `d` tag.
    pub coordinate: RepoCoordinate,
    /// When the state was published.
    pub created_at: Timestamp,
    /// The event id.
    pub id: EventId,
}

impl RepoState {
    /// Parses a kind 30618 event.
    pub fn from_event(event: &Event) -> Result<Self, ModelError> {
        expect_kind(event, REPO_STATE_KIND, "a repository state (30618)")?;
        Ok(Self {
            coordinate: addressable_coordinate(event, crate::coordinate::MAX_IDENTIFIER_BYTES)?,
            created_at: event.created_at,
            id: event.id,
        })
    }
}

/// Any NIP-34 event this crate understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nip34Event {
    /// A repository announcement.
    Announcement(RepoAnnouncement),
    /// A patch, pull request or issue.
    Root(RootEvent),
    /// A repository state.
    State(RepoState),
}

impl Nip34Event {
    /// Dispatches on the event kind, capping announcements with the default
    /// [`AnnouncementLimits`]; other kinds are [`ModelError::WrongKind`].
    pub fn parse(event: &Event) -> Result<Self, ModelError> {
        Self::parse_with_limits(event, &AnnouncementLimits::default())
    }

    /// Dispatches on the event kind, capping announcements with `limits`.
    pub fn parse_with_limits(
        event: &Event,
        limits: &AnnouncementLimits,
    ) -> Result<Self, ModelError> {
        match event.kind.as_u16() {
            REPO_ANNOUNCEMENT_KIND => {
                RepoAnnouncement::from_event(event, limits).map(Self::Announcement)
            }
            REPO_STATE_KIND => RepoState::from_event(event).map(Self::State),
            kind if RootKind::from_kind(kind).is_some() => {
                RootEvent::from_event(event).map(Self::Root)
            }
            found => Err(ModelError::WrongKind {
                expected: "a NIP-34 event",
                found,
            }),
        }
    }
}

fn expect_kind(event: &Event, kind: u16, expected: &'static str) -> Result<(), ModelError> {
    let found = event.kind.as_u16();
    if found == kind {
        Ok(())
    } else {
        Err(ModelError::WrongKind { expected, found })
    }
}

/// The coordinate of an addressable event: its author and its first `d` tag.
fn addressable_coordinate(
    event: &Event,
    max_identifier_bytes: usize,
) -> Result<RepoCoordinate, ModelError> {
    let identifier = event
        .tags
        .iter()
        .map(|tag| tag.as_slice())
        .find(|values| values.first().map(String::as_str) == Some("d"))
        .and_then(|values| values.get(1))
        .filter(|identifier| !identifier.is_empty())
        .ok_or(ModelError::MissingIdentifier)?;
    if identifier.len() > max_identifier_bytes {
        return Err(ModelError::InvalidIdentifier(
            "longer than the identifier cap",
        ));
    }
    RepoCoordinate::new(event.pubkey, identifier.as_str())
}

/// Every value (after the name) of every tag called `name`, in tag order.
fn tag_values<'a>(event: &'a Event, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    event
        .tags
        .iter()
        .map(|tag| tag.as_slice())
        .filter(move |values| values.first().map(String::as_str) == Some(name))
        .flat_map(|values| values.iter().skip(1).map(String::as_str))
}

#[cfg(test)]
mod tests;
