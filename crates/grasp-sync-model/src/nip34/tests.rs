//! Unit tests of NIP-34 parsing: announcements, root events, state and the dispatcher.

use nostr::Keys;

use super::*;
use crate::test_support::{id, relay, signed};

fn parse_announcement(tags: &[&[&str]]) -> Result<RepoAnnouncement, ModelError> {
    let keys = Keys::generate();
    RepoAnnouncement::from_event(
        &signed(&keys, 30617, tags, 1_000),
        &AnnouncementLimits::default(),
    )
}

fn relays_of(announcement: &RepoAnnouncement) -> Vec<&str> {
    announcement.relays.iter().map(RelayUrl::as_str).collect()
}

#[test]
fn announcement_takes_every_value_of_every_relays_tag() {
    let parsed = parse_announcement(&[
        &["d", "repo"],
        &["relays", "wss://b.example", "wss://a.example"],
        &["relays", "wss://c.example"],
    ])
    .unwrap();
    assert_eq!(
        relays_of(&parsed),
        ["wss://a.example", "wss://b.example", "wss://c.example"]
    );
    assert_eq!(parsed.dropped_relays, 0);
}

#[test]
fn announcement_relays_are_normalised_sorted_and_deduplicated() {
    let parsed = parse_announcement(&[
        &["d", "repo"],
        &["relays", "WSS://Z.example:443/", "wss://z.example"],
        &["relays", "wss://a.example/"],
    ])
    .unwrap();
    assert_eq!(relays_of(&parsed), ["wss://a.example", "wss://z.example"]);
    assert_eq!(parsed.dropped_relays, 0, "duplicates are not drops");
}

#[test]
fn unparsable_relays_are_skipped_and_counted() {
    let parsed = parse_announcement(&[
        &["d", "repo"],
        &[
            "relays",
            "https://web.example",
            "wss://ok.example",
            "not a url",
            "",
        ],
    ])
    .unwrap();
    assert_eq!(relays_of(&parsed), ["wss://ok.example"]);
    assert_eq!(parsed.dropped_relays, 3);
}

#[test]
fn relay_cap_keeps_the_first_relays_in_tag_order_and_counts_the_rest() {
    let keys = Keys::generate();
    let urls: Vec<String> = (0..10)
        .rev()
        .map(|n| format!("wss://r{n}.example"))
        .collect();
    let mut relays_tag: Vec<&str> = vec!["relays"];
    relays_tag.extend(urls.iter().map(String::as_str));
    let event = signed(&keys, 30617, &[&["d", "repo"], &relays_tag], 1);
    let limits = AnnouncementLimits {
        max_relays: 3,
        ..AnnouncementLimits::default()
    };
    let parsed = RepoAnnouncement::from_event(&event, &limits).unwrap();
    assert_eq!(
        relays_of(&parsed),
        ["wss://r7.example", "wss://r8.example", "wss://r9.example"]
    );
    assert_eq!(parsed.dropped_relays, 7);
}

#[test]
fn announcement_collects_clone_urls_and_maintainers_from_every_tag() {
    let a = Keys::generate().public_key();
    let b = Keys::generate().public_key();
    let (a_hex, b_hex) = (a.to_hex(), b.to_hex());
    let parsed = parse_announcement(&[
        &["d", "repo"],
        &[
            "clone",
            "https://git.example/repo.git",
            "ssh://git.example/repo",
        ],
        &[
            "clone",
            "https://git.example/repo.git",
            "https://mirror.example/repo.git",
        ],
        &["maintainers", &b_hex, "not-a-key"],
        &["maintainers", &a_hex, &b_hex],
    ])
    .unwrap();
    assert_eq!(
        parsed.clone_urls,
        [
            "https://git.example/repo.git",
            "ssh://git.example/repo",
            "https://mirror.example/repo.git"
        ]
    );
    let mut expected = vec![a, b];
    expected.sort();
    assert_eq!(parsed.maintainers, expected);
    assert_eq!(parsed.dropped_other, 1, "the invalid maintainer key");
}

#[test]
fn clone_urls_and_maintainers_are_capped() {
    let keys = Keys::generate();
    let event = signed(
        &keys,
        30617,
        &[
            &["d", "repo"],
            &["clone", "a", "b", "c"],
            &["maintainers", &keys.public_key().to_hex()],
        ],
        1,
    );
    let limits = AnnouncementLimits {
        max_clone_urls: 2,
        max_maintainers: 0,
        ..AnnouncementLimits::default()
    };
    let parsed = RepoAnnouncement::from_event(&event, &limits).unwrap();
    assert_eq!(parsed.clone_urls, ["a", "b"]);
    assert!(parsed.maintainers.is_empty());
    assert_eq!(parsed.dropped_other, 2);
}

#[test]
fn announcement_carries_coordinate_id_and_created_at() {
    let keys = Keys::generate();
    let event = signed(
        &keys,
        30617,
        &[&["d", "grasp"], &["d", "second-d-ignored"]],
        1_234,
    );
    let parsed = RepoAnnouncement::from_event(&event, &AnnouncementLimits::default()).unwrap();
    assert_eq!(
        parsed.coordinate,
        RepoCoordinate::new(keys.public_key(), "grasp").unwrap()
    );
    assert_eq!(parsed.id, event.id);
    assert_eq!(parsed.created_at, Timestamp::from_secs(1_234));
    assert_eq!(
        parsed.version(),
        EventVersion {
            created_at: event.created_at,
            id: event.id
        }
    );
}

#[test]
fn announcement_parse_errors_are_typed() {
    let check = |tags: &[&[&str]], expected: ModelError| {
        assert_eq!(parse_announcement(tags), Err(expected), "{tags:?}");
    };
    check(
        &[&["relays", "wss://a.example"]],
        ModelError::MissingIdentifier,
    );
    check(&[&["d", ""]], ModelError::MissingIdentifier);
    check(&[&["d"]], ModelError::MissingIdentifier);
    check(
        &[&["d", ".."]],
        ModelError::InvalidIdentifier("`.` or `..`"),
    );
    check(
        &[&["d", "a/b"]],
        ModelError::InvalidIdentifier("contains `/`, `\\` or NUL"),
    );
    check(
        &[&["d", &"x".repeat(257)]],
        ModelError::InvalidIdentifier("longer than the identifier cap"),
    );
}

#[test]
fn identifier_cap_is_configurable() {
    let keys = Keys::generate();
    let event = signed(&keys, 30617, &[&["d", "twelve-bytes"]], 1);
    let tight = AnnouncementLimits {
        max_identifier_bytes: 11,
        ..AnnouncementLimits::default()
    };
    assert_eq!(
        RepoAnnouncement::from_event(&event, &tight),
        Err(ModelError::InvalidIdentifier(
            "longer than the identifier cap"
        ))
    );
    let exact = AnnouncementLimits {
        max_identifier_bytes: 12,
        ..AnnouncementLimits::default()
    };
    assert!(RepoAnnouncement::from_event(&event, &exact).is_ok());
}

#[test]
fn parsers_refuse_wrong_kinds() {
    let keys = Keys::generate();
    let note = signed(&keys, 1, &[&["d", "repo"]], 1);
    assert!(matches!(
        RepoAnnouncement::from_event(&note, &AnnouncementLimits::default()),
        Err(ModelError::WrongKind { found: 1, .. })
    ));
    assert!(matches!(
        RootEvent::from_event(&note),
        Err(ModelError::WrongKind { found: 1, .. })
    ));
    assert!(matches!(
        RepoState::from_event(&note),
        Err(ModelError::WrongKind { found: 1, .. })
    ));
    assert!(matches!(
        Nip34Event::parse(&note),
        Err(ModelError::WrongKind { found: 1, .. })
    ));
    let state = signed(&keys, 30618, &[&["d", "repo"]], 1);
    assert!(matches!(
        RootEvent::from_event(&state),
        Err(ModelError::WrongKind { found: 30618, .. })
    ));
}

fn coordinate_text(keys: &Keys, identifier: &str) -> String {
    format!("30617:{}:{identifier}", keys.public_key().to_hex())
}

#[test]
fn root_events_reference_every_repository_in_a_tags() {
    let owner = Keys::generate();
    let (one, two) = (
        coordinate_text(&owner, "one"),
        coordinate_text(&owner, "two"),
    );
    for (kind, expected) in [
        (1617, RootKind::Patch),
        (1618, RootKind::PullRequest),
        (1621, RootKind::Issue),
    ] {
        let author = Keys::generate();
        let event = signed(
            &author,
            kind,
            &[
                &["a", &two, "wss://hint.example"],
                &["a", &one],
                &["a", &two],
            ],
            7,
        );
        let root = RootEvent::from_event(&event).unwrap();
        assert_eq!(root.kind, expected);
        assert_eq!(root.kind.as_u16(), kind);
        assert_eq!(root.id, event.id);
        assert_eq!(root.author, author.public_key());
        let names: Vec<&str> = root.repos.iter().map(RepoCoordinate::identifier).collect();
        assert_eq!(names, ["one", "two"]);
        assert_eq!(root.dropped_repos, 0);
    }
}

#[test]
fn root_event_ignores_other_kinds_and_counts_malformed_coordinates() {
    let owner = Keys::generate();
    let good = coordinate_text(&owner, "repo");
    let other_kind = format!("30023:{}:post", owner.public_key().to_hex());
    let event = signed(
        &Keys::generate(),
        1621,
        &[
            &["a", &other_kind],
            &["a", "30617:nothex:repo"],
            &["a", "30617:"],
            &["a", &good],
            &["e", &good],
        ],
        1,
    );
    let root = RootEvent::from_event(&event).unwrap();
    assert_eq!(root.repos.len(), 1);
    assert_eq!(root.dropped_repos, 2);
}

#[test]
fn root_event_without_a_repository_is_an_error() {
    let owner = Keys::generate();
    let other_kind = format!("30023:{}:post", owner.public_key().to_hex());
    for tags in [
        &[][..],
        &[&["a", other_kind.as_str()][..]][..],
        &[&["a"][..]][..],
    ] {
        let event = signed(&Keys::generate(), 1617, tags, 1);
        assert_eq!(
            RootEvent::from_event(&event),
            Err(ModelError::NoRepositoryReference),
            "{tags:?}"
        );
    }
}

#[test]
fn root_event_repository_count_is_capped() {
    let owner = Keys::generate();
    let values: Vec<String> = (0..MAX_REPOS_PER_ROOT_EVENT + 5)
        .map(|n| coordinate_text(&owner, &format!("r{n}")))
        .collect();
    let tags: Vec<[&str; 2]> = values.iter().map(|value| ["a", value.as_str()]).collect();
    let tag_refs: Vec<&[&str]> = tags.iter().map(|tag| &tag[..]).collect();
    let root = RootEvent::from_event(&signed(&Keys::generate(), 1618, &tag_refs, 1)).unwrap();
    assert_eq!(root.repos.len(), MAX_REPOS_PER_ROOT_EVENT);
    assert_eq!(root.dropped_repos, 5);
}

#[test]
fn state_coordinate_is_author_and_d() {
    let keys = Keys::generate();
    let event = signed(
        &keys,
        30618,
        &[&["d", "repo"], &["refs/heads/main", "abc"]],
        9,
    );
    let state = RepoState::from_event(&event).unwrap();
    assert_eq!(
        state.coordinate,
        RepoCoordinate::new(keys.public_key(), "repo").unwrap()
    );
    assert_eq!(
        (state.id, state.created_at),
        (event.id, Timestamp::from_secs(9))
    );
    let no_d = signed(&keys, 30618, &[], 9);
    assert_eq!(
        RepoState::from_event(&no_d),
        Err(ModelError::MissingIdentifier)
    );
}

#[test]
fn dispatcher_parses_each_nip34_kind() {
    let keys = Keys::generate();
    let announcement = signed(
        &keys,
        30617,
        &[&["d", "repo"], &["relays", "wss://a.example"]],
        1,
    );
    assert!(
        matches!(Nip34Event::parse(&announcement), Ok(Nip34Event::Announcement(a)) if a.relays == [relay("wss://a.example")])
    );
    let issue = signed(&keys, 1621, &[&["a", &coordinate_text(&keys, "repo")]], 1);
    assert!(
        matches!(Nip34Event::parse(&issue), Ok(Nip34Event::Root(root)) if root.kind == RootKind::Issue)
    );
    let state = signed(&keys, 30618, &[&["d", "repo"]], 1);
    assert!(matches!(
        Nip34Event::parse(&state),
        Ok(Nip34Event::State(_))
    ));
}

#[test]
fn later_created_at_wins_and_ties_go_to_the_lowest_id() {
    let version = |secs, byte| EventVersion {
        created_at: Timestamp::from_secs(secs),
        id: id(byte),
    };
    assert!(version(2, 9) > version(1, 1), "later wins whatever the id");
    assert!(version(5, 1) > version(5, 2), "tie: lowest id wins");
    assert_eq!(version(5, 3).cmp(&version(5, 3)), std::cmp::Ordering::Equal);
}

#[test]
fn dispatcher_applies_the_given_limits() {
    let keys = Keys::generate();
    let event = signed(
        &keys,
        30617,
        &[
            &["d", "repo"],
            &["relays", "wss://a.example", "wss://b.example"],
        ],
        1,
    );
    let limits = AnnouncementLimits {
        max_relays: 1,
        ..AnnouncementLimits::default()
    };
    match Nip34Event::parse_with_limits(&event, &limits) {
        Ok(Nip34Event::Announcement(announcement)) => assert_eq!(announcement.dropped_relays, 1),
        other => panic!("expected an announcement, got {other:?}"),
    }
}
