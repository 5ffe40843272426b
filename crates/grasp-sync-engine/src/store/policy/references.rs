//! What an event points at: the event IDs and repository coordinates named by its `e`, `E`,
//! `a`, `A` and `q` tags, capped so one hostile event cannot make the policy do unbounded work.

use grasp_sync_model::RepoCoordinate;
use nostr::{Event, EventId, PublicKey};

/// Most tags of one event the policy looks at; further tags are ignored.
pub(crate) const MAX_REFERENCE_TAGS: usize = 256;

/// Event IDs named by `e`, `E` and `q` tags (a `q` value that is not an event ID is skipped).
pub(crate) fn event_references(event: &Event) -> Vec<EventId> {
    referenced_values(event, &["e", "E", "q"])
        .filter_map(|value| EventId::from_hex(value).ok())
        .collect()
}

/// Repository coordinates named by `a`, `A` and `q` tags (other values are skipped).
pub(crate) fn coordinate_references(event: &Event) -> Vec<RepoCoordinate> {
    referenced_values(event, &["a", "A", "q"])
        .filter_map(|value| value.parse::<RepoCoordinate>().ok())
        .collect()
}

/// Event IDs a deletion (kind 5) names through `e` tags.
pub(crate) fn deleted_ids(event: &Event) -> Vec<Option<EventId>> {
    referenced_values(event, &["e"])
        .map(|value| EventId::from_hex(value).ok())
        .collect()
}

/// Addresses a deletion (kind 5) names through `a` tags, split into kind, author and identifier;
/// `None` for a value that is not `<kind>:<hex pubkey>:<identifier>`.
pub(crate) fn deleted_addresses(event: &Event) -> Vec<Option<(u16, PublicKey, String)>> {
    referenced_values(event, &["a"])
        .map(parse_address)
        .collect()
}

fn parse_address(value: &str) -> Option<(u16, PublicKey, String)> {
    let mut parts = value.splitn(3, ':');
    let kind = parts.next()?.parse().ok()?;
    let author = PublicKey::from_hex(parts.next()?).ok()?;
    let identifier = parts.next()?.to_owned();
    Some((kind, author, identifier))
}

/// The first value of every tag whose name is in `names`, among the first
/// [`MAX_REFERENCE_TAGS`] tags.
fn referenced_values<'a>(
    event: &'a Event,
    names: &'a [&'a str],
) -> impl Iterator<Item = &'a str> + 'a {
    event
        .tags
        .iter()
        .take(MAX_REFERENCE_TAGS)
        .map(|tag| tag.as_slice())
        .filter(move |values| {
            values
                .first()
                .is_some_and(|name| names.contains(&name.as_str()))
        })
        .filter_map(|values| values.get(1).map(String::as_str))
}
