//! Who takes part in our repositories: maintainers (the announcement's author and its
//! `maintainers` tag), authors of accepted root events, and authors of direct replies to those
//! roots. Bounded: at most `max` participants, each remembered for at most
//! [`MAX_PARTICIPATIONS`](super::MAX_PARTICIPATIONS) repositories and roots; maintainers take
//! the place of other authors when the cap is reached.

use std::collections::{BTreeMap, BTreeSet};

use grasp_sync_model::{CompactSet, Pack, RepoCoordinate};
use nostr::{EventId, PublicKey};

use super::MAX_PARTICIPATIONS;

/// What one participant takes part in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Participation {
    /// Whether they maintain one of the repositories (their read relays are probed too).
    pub(crate) maintainer: bool,
    /// Repositories they maintain or posted a root event to.
    pub(crate) repos: CompactSet<RepoCoordinate>,
    /// Root events they replied to directly.
    pub(crate) roots: CompactSet<EventId>,
}

impl Participation {
    fn len(&self) -> usize {
        self.repos.len() + self.roots.len()
    }
}

/// The bounded set of participants.
#[derive(Debug)]
pub(crate) struct Participants {
    max: usize,
    entries: BTreeMap<PublicKey, Participation>,
    /// Participants turned away by the cap so far.
    dropped: u64,
}

impl Participants {
    /// Rebuilds the participants' B-trees with full nodes ([`Pack`]); they do not change.
    pub(crate) fn pack(&mut self) {
        self.entries.pack();
        for participation in self.entries.values_mut() {
            participation.repos.pack();
            participation.roots.pack();
        }
    }

    /// An empty set holding at most `max` participants.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            entries: BTreeMap::new(),
            dropped: 0,
        }
    }

    /// `author` maintains `repo`. Returns whether they are a new participant.
    pub(crate) fn handle_maintainer(&mut self, author: PublicKey, repo: &RepoCoordinate) -> bool {
        self.admit(author, true, |p| {
            p.maintainer = true;
            p.repos.insert(repo.clone());
        })
    }

    /// `author` posted an accepted root event to `repo`. Returns whether they are new.
    pub(crate) fn handle_root_author(&mut self, author: PublicKey, repo: &RepoCoordinate) -> bool {
        self.admit(author, false, |p| {
            p.repos.insert(repo.clone());
        })
    }

    /// `author` replied directly to `root`. Returns whether they are new.
    pub(crate) fn handle_reply_author(&mut self, author: PublicKey, root: EventId) -> bool {
        self.admit(author, false, |p| {
            p.roots.insert(root);
        })
    }

    /// Forgets repositories no longer tracked and roots no longer known; participants left
    /// with nothing are dropped.
    pub(crate) fn retain(
        &mut self,
        tracked: &BTreeSet<RepoCoordinate>,
        roots: &std::collections::HashSet<EventId>,
    ) {
        self.entries.retain(|_, p| {
            p.repos.retain(|r| tracked.contains(r));
            p.roots.retain(|r| roots.contains(r));
            p.len() > 0
        });
    }

    /// Every participant.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&PublicKey, &Participation)> {
        self.entries.iter()
    }

    /// One participant.
    pub(crate) fn get(&self, author: &PublicKey) -> Option<&Participation> {
        self.entries.get(author)
    }

    /// Participants tracked.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Participants turned away by the cap so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    fn admit(
        &mut self,
        author: PublicKey,
        maintainer: bool,
        update: impl FnOnce(&mut Participation),
    ) -> bool {
        if let Some(entry) = self.entries.get_mut(&author) {
            if entry.len() < MAX_PARTICIPATIONS {
                update(entry);
            } else if maintainer {
                entry.maintainer = true;
            }
            return false;
        }
        if self.entries.len() >= self.max {
            // A maintainer takes the place of a participant who maintains nothing.
            let evictable = maintainer
                .then(|| {
                    self.entries
                        .iter()
                        .find(|(_, p)| !p.maintainer)
                        .map(|(k, _)| *k)
                })
                .flatten();
            match evictable {
                Some(other) => {
                    self.entries.remove(&other);
                }
                None => {
                    self.dropped += 1;
                    return false;
                }
            }
            self.dropped += 1;
        }
        let mut entry = Participation::default();
        update(&mut entry);
        self.entries.insert(author, entry);
        true
    }
}
