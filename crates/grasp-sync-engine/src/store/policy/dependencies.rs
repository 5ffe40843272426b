//! What a rejection waits for and what an acceptance satisfies: the policy's side of the
//! rejected-events index's dependency re-processing.

use grasp_sync_model::{RepoAnnouncement, RepoCoordinate, RepoState, RootEvent, RootKind};
use nostr::Event;

use super::references::{coordinate_references, deleted_addresses, deleted_ids, event_references};
use super::{ANNOUNCEMENT_KIND, DELETION_KIND, GraspPolicy, STATE_KIND};
use crate::store::rejected::{Dependency, MAX_DEPENDENCIES};

impl GraspPolicy {
    /// What could make the rejected `event` acceptable later, at most [`MAX_DEPENDENCIES`]
    /// entries; empty when the rejection is final (malformed, older than what is stored, a
    /// deletion of another author's event).
    ///
    /// - an announcement failing the listing and maintainer rules, and a state, wait for their
    ///   author to be named maintainer by (or, for a state, to own) an accepted announcement
    ///   with their identifier;
    /// - a deletion waits for the events it names, the announcements at the announcement
    ///   addresses it names, and its author becoming a maintainer for the state addresses;
    /// - any other event waits for the coordinates and events it references, and for an
    ///   accepted event that cites it.
    pub(crate) fn awaited(&self, event: &Event) -> Vec<Dependency> {
        let mut waits = match event.kind.as_u16() {
            ANNOUNCEMENT_KIND => self.announcement_waits(event),
            STATE_KIND => match RepoState::from_event(event) {
                Ok(state) => vec![Dependency::Maintainer(state.coordinate)],
                Err(_) => Vec::new(),
            },
            DELETION_KIND => self.deletion_waits(event),
            _ => other_waits(event),
        };
        waits.truncate(MAX_DEPENDENCIES);
        waits
    }

    /// What the accepted `event` satisfies: its own ID, every ID it cites, and for an
    /// announcement its coordinate and the maintainership of its owner and of every maintainer
    /// it names.
    pub(crate) fn satisfied_by(&self, event: &Event) -> Vec<Dependency> {
        let mut satisfied = vec![Dependency::Event(event.id)];
        satisfied.extend(
            event_references(event)
                .into_iter()
                .map(Dependency::Citation),
        );
        if event.kind.as_u16() == ANNOUNCEMENT_KIND
            && let Ok(announcement) = RepoAnnouncement::from_event(event, &self.limits)
        {
            let coordinate = announcement.coordinate;
            let identifier = coordinate.identifier();
            satisfied.extend(
                announcement
                    .maintainers
                    .iter()
                    .filter_map(|maintainer| RepoCoordinate::new(*maintainer, identifier).ok())
                    .map(Dependency::Maintainer),
            );
            satisfied.push(Dependency::Maintainer(coordinate.clone()));
            satisfied.push(Dependency::Announcement(coordinate));
        }
        satisfied
    }

    fn announcement_waits(&self, event: &Event) -> Vec<Dependency> {
        let Ok(announcement) = RepoAnnouncement::from_event(event, &self.limits) else {
            return Vec::new();
        };
        let older = self
            .announcements
            .get(&announcement.coordinate)
            .is_some_and(|stored| announcement.version() < stored.version());
        if older {
            return Vec::new();
        }
        vec![Dependency::Maintainer(announcement.coordinate)]
    }

    fn deletion_waits(&self, event: &Event) -> Vec<Dependency> {
        let mut waits = Vec::new();
        for id in deleted_ids(event) {
            let Some(id) = id else {
                return Vec::new();
            };
            match self.accepted.get(&id) {
                Some(author) if *author != event.pubkey => return Vec::new(),
                Some(_) => {}
                None => waits.push(Dependency::Event(id)),
            }
        }
        for address in deleted_addresses(event) {
            let Some((kind, author, identifier)) = address else {
                return Vec::new();
            };
            if author != event.pubkey {
                return Vec::new();
            }
            match kind {
                ANNOUNCEMENT_KIND => match RepoCoordinate::new(author, identifier) {
                    Ok(coordinate) => waits.push(Dependency::Announcement(coordinate)),
                    Err(_) => return Vec::new(),
                },
                STATE_KIND => match RepoCoordinate::new(author, identifier) {
                    Ok(coordinate) => waits.push(Dependency::Maintainer(coordinate)),
                    Err(_) => return Vec::new(),
                },
                _ => return Vec::new(),
            }
        }
        waits
    }
}

/// Dependencies of an event of any other kind; none if it is a malformed root event.
fn other_waits(event: &Event) -> Vec<Dependency> {
    if RootKind::from_kind(event.kind.as_u16()).is_some() && RootEvent::from_event(event).is_err() {
        return Vec::new();
    }
    let mut waits = vec![Dependency::Citation(event.id)];
    waits.extend(
        coordinate_references(event)
            .into_iter()
            .map(Dependency::Announcement),
    );
    waits.extend(event_references(event).into_iter().map(Dependency::Event));
    let mut seen = std::collections::HashSet::new();
    waits.retain(|dependency| seen.insert(dependency.clone()));
    waits
}

#[cfg(test)]
mod tests;
