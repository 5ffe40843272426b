//! `Dependency`: what a dependency-resolvable rejection waits for, and its text form in the
//! persisted cold index.

use grasp_sync_model::RepoCoordinate;
use nostr::EventId;

/// Something whose acceptance may make a rejected event acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Dependency {
    /// The coordinate's author becoming an owner or a named maintainer of an accepted
    /// announcement with the coordinate's identifier (a state, or a maintainer's announcement,
    /// waiting for the owner's announcement).
    Maintainer(RepoCoordinate),
    /// The accepted announcement at this coordinate (an issue or patch naming its repository).
    Announcement(RepoCoordinate),
    /// The accepted event with this ID (a reply before its root, a deletion before its target).
    Event(EventId),
    /// An accepted event citing this ID through `e`, `E` or `q` (an event that arrived before
    /// the accepted event that cites it).
    Citation(EventId),
}

impl Dependency {
    /// The text form kept in the cold index: `maintainer:<coordinate>`,
    /// `announcement:<coordinate>`, `event:<hex id>` or `citation:<hex id>`.
    pub(crate) fn encode(&self) -> String {
        match self {
            Self::Maintainer(coordinate) => format!("maintainer:{coordinate}"),
            Self::Announcement(coordinate) => format!("announcement:{coordinate}"),
            Self::Event(id) => format!("event:{}", id.to_hex()),
            Self::Citation(id) => format!("citation:{}", id.to_hex()),
        }
    }

    /// Parses [`Dependency::encode`]'s text; `None` for anything else.
    pub(crate) fn decode(text: &str) -> Option<Self> {
        let (tag, value) = text.split_once(':')?;
        match tag {
            "maintainer" => value.parse().ok().map(Self::Maintainer),
            "announcement" => value.parse().ok().map(Self::Announcement),
            "event" => EventId::from_hex(value).ok().map(Self::Event),
            "citation" => EventId::from_hex(value).ok().map(Self::Citation),
            _ => None,
        }
    }
}
