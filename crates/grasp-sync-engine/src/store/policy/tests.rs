//! Table-driven tests of every acceptance rule, with signed events.

use std::collections::HashMap;

use grasp_sync_model::{RelayUrl, RepoCoordinate};
use nostr::{Event, EventBuilder, EventId, Keys, Kind, PublicKey, SecretKey, Tag, Timestamp};
use proptest::prelude::*;

use super::{GraspPolicy, OLDER_ANNOUNCEMENT_REASON, PolicyConfig, PolicyDecision};

const SERVICE: &str = "wss://relay.example.com";
const DOMAIN: &str = "relay.example.com";
const CLONE: &str = "https://relay.example.com/owner/repo.git";

fn keys(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).expect("valid secret key"))
}

fn owner() -> Keys {
    keys(1)
}
fn maintainer() -> Keys {
    keys(2)
}
fn second_maintainer() -> Keys {
    keys(3)
}
fn stranger() -> Keys {
    keys(4)
}

fn event(keys: &Keys, kind: u16, created_at: u64, tags: &[&[&str]]) -> Event {
    event_with_content(keys, kind, created_at, tags, "")
}

fn event_with_content(
    keys: &Keys,
    kind: u16,
    created_at: u64,
    tags: &[&[&str]],
    content: &str,
) -> Event {
    let tags = tags
        .iter()
        .map(|values| Tag::parse(values.iter().copied()).expect("valid tag"));
    EventBuilder::new(Kind::from(kind), content)
        .tags(tags)
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(keys)
        .expect("signing works")
}

/// An announcement of `repo` with the given relays, clone URLs and maintainers.
fn announcement(
    keys: &Keys,
    created_at: u64,
    relays: &[&str],
    clones: &[&str],
    maintainers: &[PublicKey],
) -> Event {
    let hex: Vec<String> = maintainers.iter().map(PublicKey::to_hex).collect();
    let mut tags: Vec<Vec<&str>> = vec![vec!["d", "repo"]];
    tags.push(
        std::iter::once("relays")
            .chain(relays.iter().copied())
            .collect(),
    );
    tags.push(
        std::iter::once("clone")
            .chain(clones.iter().copied())
            .collect(),
    );
    if !hex.is_empty() {
        tags.push(
            std::iter::once("maintainers")
                .chain(hex.iter().map(String::as_str))
                .collect(),
        );
    }
    let tags: Vec<&[&str]> = tags.iter().map(Vec::as_slice).collect();
    event(keys, 30617, created_at, &tags)
}

/// The owner's announcement listing this service, with `maintainers`.
fn listed(keys: &Keys, created_at: u64, maintainers: &[PublicKey]) -> Event {
    announcement(keys, created_at, &[SERVICE], &[CLONE], maintainers)
}

/// An announcement of `repo` that does not list this service.
fn unlisted(keys: &Keys, created_at: u64, maintainers: &[PublicKey]) -> Event {
    announcement(
        keys,
        created_at,
        &["wss://elsewhere.example.org"],
        &["https://elsewhere.example.org/r.git"],
        maintainers,
    )
}

fn coordinate(keys: &Keys) -> String {
    RepoCoordinate::new(keys.public_key(), "repo")
        .expect("valid coordinate")
        .to_string()
}

fn state(keys: &Keys, identifier: &str) -> Event {
    event(
        keys,
        30618,
        10,
        &[&["d", identifier], &["refs/heads/main", "abc"]],
    )
}

fn policy() -> GraspPolicy {
    let service = RelayUrl::parse(SERVICE).expect("valid service url");
    GraspPolicy::new(PolicyConfig::new(service, DOMAIN))
}

#[derive(Debug)]
enum Expect {
    Accept,
    Reject(&'static str),
}

/// Accepts `history` in order (each must be accepted), then checks the decision on `event`.
fn check(history: &[Event], event: &Event, expected: Expect) {
    check_with(policy(), history, event, &HashMap::new(), expected);
}

fn check_with(
    mut policy: GraspPolicy,
    history: &[Event],
    event: &Event,
    known: &HashMap<EventId, PublicKey>,
    expected: Expect,
) {
    for (index, earlier) in history.iter().enumerate() {
        let decision = policy.handle_event(earlier, &HashMap::new());
        assert_eq!(
            decision,
            PolicyDecision::Accept,
            "history event {index} was not accepted"
        );
    }
    let decision = policy.handle_event(event, known);
    match (expected, decision) {
        (Expect::Accept, PolicyDecision::Accept) => {}
        (Expect::Reject(prefix), PolicyDecision::Reject(reason)) if reason.starts_with(prefix) => {}
        (expected, decision) => panic!("expected {expected:?}, got {decision:?}"),
    }
}

#[test]
fn announcement_listing_service_relay_and_domain_clone_is_accepted() {
    check(&[], &listed(&owner(), 10, &[]), Expect::Accept);
}

#[test]
fn announcement_relay_and_clone_host_are_compared_normalised() {
    let event = announcement(
        &owner(),
        10,
        &["WSS://Relay.Example.COM/"],
        &["https://RELAY.example.com/owner/repo.git"],
        &[],
    );
    check(&[], &event, Expect::Accept);
}

#[test]
fn announcement_without_service_relay_is_blocked() {
    let event = announcement(&owner(), 10, &["wss://other.example.org"], &[CLONE], &[]);
    check(&[], &event, Expect::Reject("blocked: "));
}

#[test]
fn announcement_with_clone_on_another_host_is_blocked() {
    let event = announcement(
        &owner(),
        10,
        &[SERVICE],
        &["https://other.example.org/repo.git"],
        &[],
    );
    check(&[], &event, Expect::Reject("blocked: "));
    let prefix_host = announcement(
        &owner(),
        10,
        &[SERVICE],
        &["https://relay.example.com.evil.org/r.git"],
        &[],
    );
    check(&[], &prefix_host, Expect::Reject("blocked: "));
}

#[test]
fn announcement_without_identifier_is_invalid() {
    let event = event(
        &owner(),
        30617,
        10,
        &[&["relays", SERVICE], &["clone", CLONE]],
    );
    check(&[], &event, Expect::Reject("invalid: "));
}

#[test]
fn newer_announcement_replaces_and_older_is_rejected() {
    let first = listed(&owner(), 10, &[]);
    let newer = listed(&owner(), 20, &[maintainer().public_key()]);
    check(std::slice::from_ref(&first), &newer, Expect::Accept);
    check(
        std::slice::from_ref(&newer),
        &first,
        Expect::Reject(OLDER_ANNOUNCEMENT_REASON),
    );
    // The replacement's maintainers take effect.
    check(
        &[first, newer],
        &state(&maintainer(), "repo"),
        Expect::Accept,
    );
}

#[test]
fn announcement_timestamp_tie_goes_to_the_lowest_id() {
    let a = listed(&owner(), 10, &[]);
    let b = listed(&owner(), 10, &[maintainer().public_key()]);
    let (low, high) = if a.id < b.id { (a, b) } else { (b, a) };
    check(std::slice::from_ref(&high), &low, Expect::Accept);
    check(
        std::slice::from_ref(&low),
        &high,
        Expect::Reject(OLDER_ANNOUNCEMENT_REASON),
    );
}

#[test]
fn same_announcement_again_is_accepted() {
    let first = listed(&owner(), 10, &[]);
    check(std::slice::from_ref(&first), &first, Expect::Accept);
}

#[test]
fn maintainer_announcement_not_listing_service_is_accepted() {
    let root = listed(&owner(), 10, &[maintainer().public_key()]);
    check(&[root], &unlisted(&maintainer(), 10, &[]), Expect::Accept);
}

#[test]
fn maintainer_closure_is_transitive() {
    let root = listed(&owner(), 10, &[maintainer().public_key()]);
    let middle = unlisted(&maintainer(), 10, &[second_maintainer().public_key()]);
    check(
        &[root.clone(), middle.clone()],
        &unlisted(&second_maintainer(), 10, &[]),
        Expect::Accept,
    );
    check(
        &[root, middle],
        &state(&second_maintainer(), "repo"),
        Expect::Accept,
    );
}

#[test]
fn stranger_announcement_with_same_identifier_is_blocked() {
    let root = listed(&owner(), 10, &[maintainer().public_key()]);
    check(
        &[root],
        &unlisted(&stranger(), 10, &[]),
        Expect::Reject("blocked: "),
    );
}

#[test]
fn owner_replacement_dropping_the_service_needs_another_voucher() {
    let root = listed(&owner(), 10, &[]);
    check(
        std::slice::from_ref(&root),
        &unlisted(&owner(), 20, &[]),
        Expect::Reject("blocked: "),
    );
    // With a maintainer who lists the service and names the owner back, the owner stays.
    let vouching = listed(&maintainer(), 10, &[owner().public_key()]);
    check(
        &[root, vouching],
        &unlisted(&owner(), 20, &[]),
        Expect::Accept,
    );
}

#[test]
fn state_is_accepted_from_owner_and_maintainers_only() {
    let root = listed(&owner(), 10, &[maintainer().public_key()]);
    check(
        std::slice::from_ref(&root),
        &state(&owner(), "repo"),
        Expect::Accept,
    );
    check(
        std::slice::from_ref(&root),
        &state(&maintainer(), "repo"),
        Expect::Accept,
    );
    check(
        std::slice::from_ref(&root),
        &state(&stranger(), "repo"),
        Expect::Reject("blocked: "),
    );
    check(
        &[root],
        &state(&owner(), "other"),
        Expect::Reject("blocked: "),
    );
}

#[test]
fn state_without_accepted_announcement_is_blocked() {
    check(&[], &state(&owner(), "repo"), Expect::Reject("blocked: "));
}

#[test]
fn state_without_identifier_is_invalid() {
    let root = listed(&owner(), 10, &[]);
    check(
        &[root],
        &event(&owner(), 30618, 10, &[]),
        Expect::Reject("invalid: "),
    );
}

#[test]
fn event_referencing_accepted_repository_is_accepted() {
    let root = listed(&owner(), 10, &[]);
    let repo = coordinate(&owner());
    for (kind, tag) in [(1617, "a"), (1618, "a"), (1621, "a"), (1111, "A"), (1, "q")] {
        let event = event(&stranger(), kind, 11, &[&[tag, &repo]]);
        check(std::slice::from_ref(&root), &event, Expect::Accept);
    }
}

#[test]
fn event_referencing_unknown_repository_is_blocked() {
    let root = listed(&owner(), 10, &[]);
    let other = coordinate(&stranger());
    check(
        &[root],
        &event(&stranger(), 1621, 11, &[&["a", &other]]),
        Expect::Reject("blocked: "),
    );
}

#[test]
fn root_event_naming_no_repository_is_invalid() {
    check(
        &[],
        &event(&stranger(), 1621, 11, &[&["t", "bug"]]),
        Expect::Reject("invalid: "),
    );
}

#[test]
fn event_referencing_accepted_event_is_accepted() {
    let root = listed(&owner(), 10, &[]);
    let issue = event(&stranger(), 1621, 11, &[&["a", &coordinate(&owner())]]);
    let id = issue.id.to_hex();
    for tag in ["e", "E", "q"] {
        let reply = event(&stranger(), 1111, 12, &[&[tag, &id]]);
        check(&[root.clone(), issue.clone()], &reply, Expect::Accept);
    }
}

#[test]
fn event_referencing_unknown_event_is_blocked() {
    let unknown = EventId::all_zeros().to_hex();
    check(
        &[],
        &event(&stranger(), 1111, 12, &[&["e", &unknown]]),
        Expect::Reject("blocked: "),
    );
}

#[test]
fn event_referencing_stored_event_found_by_lookup_is_accepted() {
    let stored = event(&owner(), 1621, 5, &[]);
    let reply = event(&stranger(), 1111, 12, &[&["e", &stored.id.to_hex()]]);
    let policy = policy();
    assert_eq!(policy.unknown_references(&reply), vec![stored.id]);
    let known = HashMap::from([(stored.id, stored.pubkey)]);
    check_with(policy, &[], &reply, &known, Expect::Accept);
}

#[test]
fn event_referenced_by_accepted_event_is_accepted() {
    let root = listed(&owner(), 10, &[]);
    let earlier = event(&stranger(), 1, 5, &[]);
    let issue = event(
        &stranger(),
        1621,
        11,
        &[&["a", &coordinate(&owner())], &["e", &earlier.id.to_hex()]],
    );
    check(&[root.clone(), issue], &earlier, Expect::Accept);
    check(&[root], &earlier, Expect::Reject("blocked: "));
}

#[test]
fn unrelated_event_is_blocked() {
    check(
        &[listed(&owner(), 10, &[])],
        &event(&stranger(), 1, 11, &[]),
        Expect::Reject("blocked: "),
    );
}

#[test]
fn deletion_of_own_known_event_is_accepted() {
    let root = listed(&owner(), 10, &[]);
    let issue = event(&stranger(), 1621, 11, &[&["a", &coordinate(&owner())]]);
    let deletion = event(&stranger(), 5, 12, &[&["e", &issue.id.to_hex()]]);
    check(&[root, issue], &deletion, Expect::Accept);
}

#[test]
fn deletion_of_another_authors_event_is_blocked() {
    let root = listed(&owner(), 10, &[]);
    let issue = event(&owner(), 1621, 11, &[&["a", &coordinate(&owner())]]);
    let deletion = event(&stranger(), 5, 12, &[&["e", &issue.id.to_hex()]]);
    check(&[root, issue], &deletion, Expect::Reject("blocked: "));
}

#[test]
fn deletion_of_unknown_event_is_blocked_unless_found_by_lookup() {
    let stored = event(&stranger(), 1621, 5, &[]);
    let deletion = event(&stranger(), 5, 12, &[&["e", &stored.id.to_hex()]]);
    check(&[], &deletion, Expect::Reject("blocked: "));
    let known = HashMap::from([(stored.id, stored.pubkey)]);
    check_with(policy(), &[], &deletion, &known, Expect::Accept);
}

#[test]
fn deletion_naming_nothing_is_invalid() {
    check(
        &[],
        &event(&stranger(), 5, 12, &[]),
        Expect::Reject("invalid: "),
    );
}

#[test]
fn deletion_of_own_announcement_by_address_is_accepted_and_forgets_it() {
    let root = listed(&owner(), 10, &[]);
    let deletion = event(&owner(), 5, 12, &[&["a", &coordinate(&owner())]]);
    check(std::slice::from_ref(&root), &deletion, Expect::Accept);
    check(
        &[root, deletion],
        &state(&owner(), "repo"),
        Expect::Reject("blocked: "),
    );
    let foreign = event(&stranger(), 5, 12, &[&["a", &coordinate(&owner())]]);
    check(
        &[listed(&owner(), 10, &[])],
        &foreign,
        Expect::Reject("blocked: "),
    );
}

#[test]
fn deletion_of_own_state_by_maintainer_is_accepted() {
    let root = listed(&owner(), 10, &[maintainer().public_key()]);
    let address = format!("30618:{}:repo", maintainer().public_key().to_hex());
    check(
        std::slice::from_ref(&root),
        &event(&maintainer(), 5, 12, &[&["a", &address]]),
        Expect::Accept,
    );
    let foreign = format!("30618:{}:repo", stranger().public_key().to_hex());
    check(
        &[root],
        &event(&stranger(), 5, 12, &[&["a", &foreign]]),
        Expect::Reject("blocked: "),
    );
}

#[test]
fn forgotten_accepted_ids_need_a_lookup() {
    let service = RelayUrl::parse(SERVICE).expect("valid service url");
    let mut config = PolicyConfig::new(service, DOMAIN);
    config.accepted_ids_capacity = 1;
    let root = listed(&owner(), 10, &[]);
    let first = event(&stranger(), 1621, 11, &[&["a", &coordinate(&owner())]]);
    let filler = event(&stranger(), 1621, 12, &[&["a", &coordinate(&owner())]]);
    let reply = event(&stranger(), 1111, 13, &[&["e", &first.id.to_hex()]]);
    let history = [root, first.clone(), filler];
    check_with(
        GraspPolicy::new(config.clone()),
        &history,
        &reply,
        &HashMap::new(),
        Expect::Reject("blocked: "),
    );
    let known = HashMap::from([(first.id, first.pubkey)]);
    check_with(
        GraspPolicy::new(config),
        &history,
        &reply,
        &known,
        Expect::Accept,
    );
}

#[test]
fn rejected_event_adds_no_references() {
    let mut policy = policy();
    assert!(
        policy
            .handle_event(&listed(&owner(), 10, &[]), &HashMap::new())
            .is_accept()
    );
    let target = event(&stranger(), 1, 1, &[]);
    let blocked = event(&stranger(), 1, 2, &[&["e", &target.id.to_hex()]]);
    assert!(!policy.handle_event(&blocked, &HashMap::new()).is_accept());
    assert!(!policy.handle_event(&target, &HashMap::new()).is_accept());
}

proptest! {
    #[test]
    fn every_rejection_reason_starts_blocked_or_invalid(
        kind in prop::sample::select(vec![1u16, 5, 1111, 1617, 1618, 1621, 30617, 30618]),
        tags in prop::collection::vec(
            (prop::sample::select(vec!["a", "A", "e", "E", "q", "d", "relays", "clone", "maintainers"]),
             "[0-9a-f:/.A-Za-z]{0,70}"),
            0..6,
        ),
    ) {
        let tags: Vec<[&str; 2]> = tags.iter().map(|(name, value)| [*name, value.as_str()]).collect();
        let tags: Vec<&[&str]> = tags.iter().map(|tag| tag.as_slice()).collect();
        let event = event(&stranger(), kind, 10, &tags);
        let mut policy = policy();
        policy.handle_event(&listed(&owner(), 5, &[]), &HashMap::new());
        if let PolicyDecision::Reject(reason) = policy.handle_event(&event, &HashMap::new()) {
            prop_assert!(reason.starts_with("blocked: ") || reason.starts_with("invalid: "), "{reason}");
        }
    }
}
