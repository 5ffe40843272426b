//! Tests of what the policy says a rejection awaits and an acceptance satisfies.

use std::collections::HashMap;

use grasp_sync_model::{RelayUrl, RepoCoordinate};
use nostr::{Event, EventBuilder, EventId, Keys, Kind, SecretKey, Tag, Timestamp};

use crate::store::policy::{GraspPolicy, PolicyConfig};
use crate::store::rejected::Dependency;

const SERVICE: &str = "wss://relay.example.com";

fn keys(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).expect("valid secret key"))
}

fn event(keys: &Keys, kind: u16, created_at: u64, tags: &[&[&str]]) -> Event {
    let tags = tags
        .iter()
        .map(|values| Tag::parse(values.iter().copied()).expect("valid tag"));
    EventBuilder::new(Kind::from(kind), "")
        .tags(tags)
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(keys)
        .expect("signing works")
}

fn listed(owner: &Keys, created_at: u64) -> Event {
    event(
        owner,
        30617,
        created_at,
        &[
            &["d", "repo"],
            &["relays", SERVICE],
            &["clone", "https://relay.example.com/repo.git"],
        ],
    )
}

fn coordinate(owner: &Keys) -> RepoCoordinate {
    RepoCoordinate::new(owner.public_key(), "repo").expect("valid coordinate")
}

fn policy() -> GraspPolicy {
    GraspPolicy::new(PolicyConfig::new(
        RelayUrl::parse(SERVICE).expect("valid url"),
        "relay.example.com",
    ))
}

fn maintainer(author: &Keys) -> Dependency {
    Dependency::Maintainer(coordinate(author))
}

/// Asserts that `policy` rejects `event` and awaits exactly `expected`.
fn check_awaited(policy: &GraspPolicy, event: &Event, expected: &[Dependency]) {
    assert!(
        !policy.decide(event, &HashMap::new()).is_accept(),
        "expected a rejection"
    );
    assert_eq!(policy.awaited(event), expected);
}

#[test]
fn state_and_unlisted_announcement_await_their_authors_maintainership() {
    let policy = policy();
    check_awaited(
        &policy,
        &event(&keys(1), 30618, 10, &[&["d", "repo"]]),
        &[maintainer(&keys(1))],
    );
    check_awaited(
        &policy,
        &event(&keys(2), 30617, 10, &[&["d", "repo"]]),
        &[maintainer(&keys(2))],
    );
}

#[test]
fn older_or_malformed_announcement_awaits_nothing() {
    let mut policy = policy();
    policy.handle_accepted(&listed(&keys(1), 20));
    check_awaited(&policy, &listed(&keys(1), 10), &[]);
    check_awaited(&policy, &event(&keys(1), 30617, 10, &[]), &[]);
}

#[test]
fn issue_awaits_its_repository_and_a_citation() {
    let issue = event(
        &keys(2),
        1621,
        10,
        &[&["a", &coordinate(&keys(1)).to_string()]],
    );
    check_awaited(
        &policy(),
        &issue,
        &[
            Dependency::Citation(issue.id),
            Dependency::Announcement(coordinate(&keys(1))),
        ],
    );
    let orphan = event(&keys(2), 1621, 10, &[]);
    check_awaited(&policy(), &orphan, &[]);
}

#[test]
fn reply_awaits_its_root() {
    let root = EventId::all_zeros();
    let reply = event(&keys(2), 1111, 10, &[&["e", &root.to_hex()]]);
    check_awaited(
        &policy(),
        &reply,
        &[Dependency::Citation(reply.id), Dependency::Event(root)],
    );
}

#[test]
fn deletion_awaits_unknown_targets_but_not_another_authors_event() {
    let mut policy = policy();
    let unknown = EventId::all_zeros();
    let deletion = event(&keys(2), 5, 10, &[&["e", &unknown.to_hex()]]);
    check_awaited(&policy, &deletion, &[Dependency::Event(unknown)]);
    let theirs = listed(&keys(1), 5);
    policy.handle_accepted(&theirs);
    let foreign = event(&keys(2), 5, 10, &[&["e", &theirs.id.to_hex()]]);
    check_awaited(&policy, &foreign, &[]);
    let hex = keys(2).public_key().to_hex();
    let by_address = event(
        &keys(2),
        5,
        10,
        &[
            &["a", &format!("30617:{hex}:repo")],
            &["a", &format!("30618:{hex}:repo")],
        ],
    );
    check_awaited(
        &policy,
        &by_address,
        &[
            Dependency::Announcement(coordinate(&keys(2))),
            maintainer(&keys(2)),
        ],
    );
    let other_kind = event(&keys(2), 5, 10, &[&["a", &format!("30023:{hex}:post")]]);
    check_awaited(&policy, &other_kind, &[]);
}

#[test]
fn accepted_announcement_satisfies_its_id_coordinate_owner_and_maintainers() {
    let announcement = event(
        &keys(1),
        30617,
        10,
        &[
            &["d", "repo"],
            &["relays", SERVICE],
            &["maintainers", &keys(2).public_key().to_hex()],
        ],
    );
    assert_eq!(
        policy().satisfied_by(&announcement),
        vec![
            Dependency::Event(announcement.id),
            maintainer(&keys(2)),
            maintainer(&keys(1)),
            Dependency::Announcement(coordinate(&keys(1))),
        ]
    );
    let cited = EventId::all_zeros();
    let issue = event(
        &keys(2),
        1621,
        10,
        &[
            &["a", &coordinate(&keys(1)).to_string()],
            &["e", &cited.to_hex()],
        ],
    );
    assert_eq!(
        policy().satisfied_by(&issue),
        vec![Dependency::Event(issue.id), Dependency::Citation(cited)]
    );
}
