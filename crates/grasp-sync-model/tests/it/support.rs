//! Builders for the integration tests: pools of relays, coordinates and ids, announcements.

use grasp_sync_model::{RelayUrl, RepoAnnouncement, RepoCoordinate};
use nostr::{EventId, PublicKey, Timestamp};

/// The relay `wss://rN.example`.
pub(crate) fn relay(n: usize) -> RelayUrl {
    RelayUrl::parse(&format!("wss://r{n}.example")).expect("pool relay parses")
}

/// The coordinate of repository `n` (owners repeat every four repositories).
pub(crate) fn coord(n: usize) -> RepoCoordinate {
    let owner = PublicKey::from_byte_array([(n % 4) as u8 + 1; 32]);
    RepoCoordinate::new(owner, format!("repo-{n}")).expect("valid identifier")
}

/// An event id made of one repeated byte.
pub(crate) fn id(byte: u8) -> EventId {
    EventId::from_byte_array([byte; 32])
}

/// An announcement built by hand.
pub(crate) fn announcement(
    coordinate: RepoCoordinate,
    relays: Vec<RelayUrl>,
    created_at: u64,
    id_byte: u8,
) -> RepoAnnouncement {
    let mut relays = relays;
    relays.sort();
    relays.dedup();
    RepoAnnouncement {
        coordinate,
        relays,
        clone_urls: Vec::new(),
        maintainers: Vec::new(),
        created_at: Timestamp::from_secs(created_at),
        id: id(id_byte),
        dropped_relays: 0,
        dropped_other: 0,
    }
}
