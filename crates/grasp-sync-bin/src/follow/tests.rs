//! Tests of how a burst becomes repositories: state events grouped by the announcements they
//! describe, other kinds skipped, `HEAD` taken for the fetch.

use std::sync::Arc;

use grasp_sync_model::{AnnouncementLimits, RepoAnnouncement};
use grasp_sync_testkit::nip34::{self, Announcement};
use nostr::{Keys, PublicKey, SecretKey, Timestamp};

use super::{GitFollower, RepositoryLookup};
use crate::git::GitRoot;

struct Fixed(Vec<(RepoAnnouncement, bool)>);

impl RepositoryLookup for Fixed {
    fn repositories_for(
        &self,
        identifier: &str,
        author: &PublicKey,
    ) -> Vec<(RepoAnnouncement, bool)> {
        self.0
            .iter()
            .filter(|(a, _)| a.coordinate.identifier() == identifier)
            .filter(|(a, _)| a.coordinate.owner() == author || a.maintainers.contains(author))
            .cloned()
            .collect()
    }
}

#[test]
fn a_burst_groups_state_events_by_repository() {
    let owner = Keys::new(SecretKey::from_slice(&[1; 32]).expect("key"));
    let maintainer = Keys::new(SecretKey::from_slice(&[2; 32]).expect("key"));
    let stranger = Keys::new(SecretKey::from_slice(&[3; 32]).expect("key"));
    let event = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "tools".to_owned(),
            name: "tools".to_owned(),
            relays: vec!["wss://relay.example.com".to_owned()],
            clone: vec!["https://elsewhere.example.org/tools.git".to_owned()],
            maintainers: vec![maintainer.public_key()],
            created_at: Timestamp::from_secs(1),
        },
    )
    .expect("announcement");
    let announcement =
        RepoAnnouncement::from_event(&event, &AnnouncementLimits::default()).expect("parses");
    let follower = GitFollower::new(
        Arc::new(Fixed(vec![(announcement, true)])),
        Some(GitRoot::new("/srv/git")),
        None,
        None,
    );
    let refs = [
        ("HEAD".to_owned(), "ref: refs/heads/trunk".to_owned()),
        ("refs/heads/trunk".to_owned(), "a".repeat(40)),
    ];
    let owner_state =
        nip34::repo_state(&owner, "tools", &refs, Timestamp::from_secs(2)).expect("state");
    let maintainer_state =
        nip34::repo_state(&maintainer, "tools", &refs[1..], Timestamp::from_secs(3))
            .expect("state");
    let stranger_state =
        nip34::repo_state(&stranger, "tools", &refs, Timestamp::from_secs(4)).expect("state");

    let batch = follower.batch([&event, &owner_state, &maintainer_state, &stranger_state]);
    assert_eq!(batch.len(), 1, "{batch:?}");
    let (update, job) = &batch[0];
    assert_eq!(update.identifier, "tools");
    assert!(update.purgatory);
    assert!(update.owner.starts_with("npub1"));
    assert!(
        update
            .path
            .as_deref()
            .is_some_and(|p| p.ends_with("/tools.git"))
    );
    let ids: Vec<String> = update.states.iter().map(|s| s.id.clone()).collect();
    assert_eq!(
        ids,
        vec![owner_state.id.to_hex(), maintainer_state.id.to_hex()]
    );
    assert_eq!(
        update.states[0].refs[0],
        ["HEAD".to_owned(), "ref: refs/heads/trunk".to_owned()]
    );
    assert_eq!(job.head.as_deref(), Some("refs/heads/trunk"));
    assert_eq!(
        job.clone_urls,
        vec!["https://elsewhere.example.org/tools.git".to_owned()]
    );
}
