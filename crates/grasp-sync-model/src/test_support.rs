//! Builders shared by the unit tests: relays, coordinates, event ids, announcements and signed
//! NIP-34 events.

use nostr::{Event, EventBuilder, EventId, Keys, Kind, PublicKey, Tag, Timestamp};

use crate::coordinate::RepoCoordinate;
use crate::nip34::RepoAnnouncement;
use crate::relay_url::RelayUrl;

/// A relay URL that must parse.
pub(crate) fn relay(url: &str) -> RelayUrl {
    RelayUrl::parse(url).expect("test relay url parses")
}

/// The coordinate `30617:<owner byte repeated>:<identifier>`.
pub(crate) fn coord(owner: u8, identifier: &str) -> RepoCoordinate {
    RepoCoordinate::new(PublicKey::from_byte_array([owner; 32]), identifier)
        .expect("valid identifier")
}

/// An event id made of one repeated byte.
pub(crate) fn id(byte: u8) -> EventId {
    EventId::from_byte_array([byte; 32])
}

/// An announcement built by hand (no event): version (`created_at`, `id_byte`).
pub(crate) fn announcement(
    coordinate: &RepoCoordinate,
    relays: &[&str],
    created_at: u64,
    id_byte: u8,
) -> RepoAnnouncement {
    let mut relays: Vec<RelayUrl> = relays.iter().map(|url| relay(url)).collect();
    relays.sort();
    relays.dedup();
    RepoAnnouncement {
        coordinate: coordinate.clone(),
        relays,
        clone_urls: Vec::new(),
        maintainers: Vec::new(),
        created_at: Timestamp::from_secs(created_at),
        id: id(id_byte),
        dropped_relays: 0,
        dropped_other: 0,
    }
}

/// A signed event of `kind` with the given tags.
pub(crate) fn signed(keys: &Keys, kind: u16, tags: &[&[&str]], created_at: u64) -> Event {
    let tags: Vec<Tag> = tags
        .iter()
        .map(|values| Tag::parse(values.iter().copied()).expect("tag parses"))
        .collect();
    EventBuilder::new(Kind::Custom(kind), "")
        .tags(tags)
        .custom_created_at(Timestamp::from_secs(created_at))
        .sign_with_keys(keys)
        .expect("event signs")
}
