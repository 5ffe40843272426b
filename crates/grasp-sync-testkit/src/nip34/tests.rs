//! Unit tests for the NIP-34 builders: tag shapes, single-letter targeting, determinism.

use nostr::filter::MatchEventOptions;
use nostr::{Alphabet, Event, Filter, JsonUtil, Keys, SecretKey, SingleLetterTag, Timestamp};

use super::*;

fn keys(byte: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[byte; 32]).unwrap())
}

fn repo() -> RepoRef {
    RepoRef::new(keys(1).public_key(), "grasp")
}

fn issue() -> Event {
    root(
        &keys(2),
        RootKind::Issue,
        &[repo()],
        "it breaks",
        Timestamp::from_secs(1_700_000_100),
    )
    .unwrap()
}

/// The tag letters sync filters use for repositories and threads.
const LETTERS: [(char, SingleLetterTag); 5] = [
    ('e', SingleLetterTag::lowercase(Alphabet::E)),
    ('E', SingleLetterTag::uppercase(Alphabet::E)),
    ('q', SingleLetterTag::lowercase(Alphabet::Q)),
    ('a', SingleLetterTag::lowercase(Alphabet::A)),
    ('A', SingleLetterTag::uppercase(Alphabet::A)),
];

/// Asserts that, of the sync tag letters, a filter on `value` matches `event` through
/// exactly `letter`.
fn check_only_letter(event: &Event, value: &str, letter: char) {
    for (name, tag) in LETTERS {
        let filter = Filter::new().custom_tag(tag, value);
        assert_eq!(
            filter.match_event(event, MatchEventOptions::new()),
            name == letter,
            "filter #{name} on {value} against {}",
            event.as_json()
        );
    }
}

#[test]
fn repo_coordinate_is_kind_owner_hex_and_identifier() {
    let repo = repo();
    assert_eq!(
        repo.coordinate(),
        format!("30617:{}:grasp", repo.owner.to_hex())
    );
}

#[test]
fn announcement_lists_every_relay_and_clone_url_in_one_tag() {
    let relays = vec![
        "ws://127.0.0.1:1".to_owned(),
        "wss://relay.example".to_owned(),
    ];
    let clone = vec![
        "https://a.example/x.git".to_owned(),
        "https://b.example/x.git".to_owned(),
    ];
    let event = announcement(
        &keys(1),
        &Announcement {
            identifier: "grasp".to_owned(),
            name: "Grasp".to_owned(),
            relays: relays.clone(),
            clone: clone.clone(),
            maintainers: vec![keys(3).public_key()],
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .unwrap();
    assert_eq!(event.kind.as_u16(), KIND_REPO_ANNOUNCEMENT);
    let tag = |name: &str| -> Vec<String> {
        let found: Vec<&nostr::Tag> = event
            .tags
            .iter()
            .filter(|t| t.kind().as_str() == name)
            .collect();
        assert_eq!(found.len(), 1, "one {name} tag");
        found[0].as_slice()[1..].to_vec()
    };
    assert_eq!(tag("d"), vec!["grasp".to_owned()]);
    assert_eq!(tag("relays"), relays);
    assert_eq!(tag("clone"), clone);
    assert_eq!(tag("maintainers"), vec![keys(3).public_key().to_hex()]);
}

#[test]
fn repo_state_carries_d_and_refs() {
    let refs = vec![
        ("HEAD".to_owned(), "ref: refs/heads/main".to_owned()),
        ("refs/heads/main".to_owned(), "ab".repeat(20)),
    ];
    let event = repo_state(&keys(1), "grasp", &refs, Timestamp::from_secs(5)).unwrap();
    assert_eq!(event.kind.as_u16(), KIND_REPO_STATE);
    let tags: Vec<Vec<String>> = event.tags.iter().map(|t| t.as_slice().to_vec()).collect();
    assert_eq!(
        tags,
        vec![
            vec!["d".to_owned(), "grasp".to_owned()],
            vec!["HEAD".to_owned(), "ref: refs/heads/main".to_owned()],
            vec!["refs/heads/main".to_owned(), "ab".repeat(20)],
        ]
    );
}

#[test]
fn root_tags_every_repository_with_a_and_every_owner_with_p() {
    let other = RepoRef::new(keys(4).public_key(), "other");
    for kind in RootKind::ALL {
        let event = root(
            &keys(2),
            kind,
            &[repo(), other.clone()],
            "x",
            Timestamp::from_secs(9),
        )
        .unwrap();
        assert_eq!(event.kind, kind.kind());
        for coordinate in [repo().coordinate(), other.coordinate()] {
            check_only_letter(&event, &coordinate, 'a');
        }
        let p: Vec<_> = event.tags.public_keys().copied().collect();
        assert_eq!(p.len(), 2);
    }
}

#[test]
fn each_reply_style_is_matched_by_exactly_its_letter() {
    let root = issue();
    for (how, letter, kind) in [
        (ThreadTag::LowerE, 'e', KIND_TEXT_NOTE),
        (ThreadTag::UpperE, 'E', KIND_COMMENT),
        (ThreadTag::Q, 'q', KIND_TEXT_NOTE),
    ] {
        let event = reply(
            &keys(3),
            &root,
            how,
            "+1",
            Timestamp::from_secs(1_700_000_200),
        )
        .unwrap();
        assert_eq!(event.kind.as_u16(), kind, "{how:?}");
        check_only_letter(&event, &root.id.to_hex(), letter);
        check_only_letter(&event, &repo().coordinate(), '-');
    }
}

#[test]
fn a_descendant_tags_only_its_direct_member() {
    let root = issue();
    let member = reply(
        &keys(3),
        &root,
        ThreadTag::UpperE,
        "+1",
        Timestamp::from_secs(7),
    )
    .unwrap();
    for how in ThreadTag::ALL {
        let descendant = reply(&keys(5), &member, how, "me too", Timestamp::from_secs(8)).unwrap();
        check_only_letter(&descendant, &root.id.to_hex(), '-');
        check_only_letter(&descendant, &repo().coordinate(), '-');
    }
}

#[test]
fn each_repo_comment_style_is_matched_by_exactly_its_letter() {
    for (how, letter, kind) in [
        (RepoTag::LowerA, 'a', KIND_COMMENT),
        (RepoTag::UpperA, 'A', KIND_COMMENT),
        (RepoTag::Q, 'q', KIND_TEXT_NOTE),
    ] {
        let event = repo_comment(&keys(3), &repo(), how, "nice", Timestamp::from_secs(3)).unwrap();
        assert_eq!(event.kind.as_u16(), kind, "{how:?}");
        check_only_letter(&event, &repo().coordinate(), letter);
    }
}

#[test]
fn same_keys_and_inputs_give_the_same_id_and_a_valid_signature() {
    let first = issue();
    let second = issue();
    assert_eq!(first.id, second.id);
    assert_eq!(first.created_at, Timestamp::from_secs(1_700_000_100));
    assert!(first.verify().is_ok());
}
