//! Descendant coverage's rules: members are covered per relay by their root, a failed batch
//! uncovers its members, the member set is capped, and only a constrained relay sweeps.

use nostr::{EventBuilder, Keys, Kind, Tag};

use super::*;

fn id(n: u8) -> EventId {
    EventId::from_byte_array([n; 32])
}

fn coordinate(d: &str) -> Coordinate {
    Coordinate::new(Kind::from(30_023), Keys::generate().public_key()).identifier(d)
}

fn roots(ids: &[u8]) -> BTreeSet<EventId> {
    ids.iter().map(|n| id(*n)).collect()
}

/// Members 10 and 11 tag root 1; member 20 and an addressable member tag root 2.
fn members() -> (DirectMembers, Coordinate) {
    let mut members = DirectMembers::default();
    let article = coordinate("article");
    assert_eq!(members.record(id(10), None, id(1)), Recorded::New);
    assert_eq!(members.record(id(11), None, id(1)), Recorded::New);
    assert_eq!(
        members.record(id(20), Some(article.clone()), id(2)),
        Recorded::New
    );
    (members, article)
}

#[test]
fn a_relay_covers_the_members_of_its_roots_once() {
    let (members, article) = members();
    let mut coverage = DescendantCoverage::default();
    assert_eq!(
        coverage.take_uncovered(&members, &roots(&[1])),
        Members {
            ids: vec![id(10), id(11)],
            coordinates: vec![],
        }
    );
    assert!(coverage.take_uncovered(&members, &roots(&[1])).is_empty());
    assert_eq!(
        coverage.take_uncovered(&members, &roots(&[1, 2])),
        Members {
            ids: vec![id(20)],
            coordinates: vec![article],
        },
        "a root the relay syncs later brings its members"
    );
}

#[test]
fn a_failed_batch_uncovers_its_members_and_a_confirmed_one_keeps_them() {
    let (members, _) = members();
    let mut coverage = DescendantCoverage::default();
    let first = coverage.take_uncovered(&members, &roots(&[1]));
    coverage.handle_batch_opened(BatchId(1), first.clone());
    let second = coverage.take_uncovered(&members, &roots(&[1, 2]));
    coverage.handle_batch_opened(BatchId(2), second.clone());
    coverage.handle_batch_done(BatchId(1), true, &members);
    coverage.handle_batch_done(BatchId(2), false, &members);
    assert_eq!(
        coverage.take_uncovered(&members, &roots(&[1, 2])),
        second,
        "only the failed batch's members are covered again"
    );
    coverage.handle_batch_done(BatchId(2), false, &members);
    assert!(
        coverage
            .take_uncovered(&members, &roots(&[1, 2]))
            .is_empty(),
        "a batch ends once"
    );
}

#[test]
fn the_members_remembered_are_capped_and_the_cap_is_reported_once() {
    let mut members = DirectMembers::default();
    for n in 0..MAX_MEMBERS as u64 {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        assert_eq!(
            members.record(EventId::from_byte_array(bytes), None, id(1)),
            Recorded::New
        );
    }
    assert_eq!(
        members.record(id(200), None, id(1)),
        Recorded::Full { first: true }
    );
    assert_eq!(
        members.record(id(201), None, id(1)),
        Recorded::Full { first: false }
    );
    assert!(!members.contains(&id(200)));
}

#[test]
fn only_a_constrained_relay_sweeps_its_covered_members() {
    let (members, _) = members();
    let mut coverage = DescendantCoverage::default();
    coverage.take_uncovered(&members, &roots(&[1, 2]));
    let now = Timestamp::from_secs(1_000_000);
    assert_eq!(
        coverage.poll_fallback(now, &members),
        None,
        "not constrained"
    );
    coverage.set_constrained();
    assert_eq!(
        coverage.poll_fallback(now, &members),
        None,
        "the first call only sets the cursor"
    );
    let later = Timestamp::from_secs(1_000_060);
    let group = coverage.poll_fallback(later, &members).expect("a group");
    assert_eq!(
        group.since.as_secs(),
        1_000_000 - FALLBACK_OVERLAP.as_secs()
    );
    coverage.handle_fallback_sent(&group, Some(BatchId(7)));
    assert_eq!(
        coverage.poll_fallback(later, &members),
        None,
        "a group is in flight"
    );
    coverage.handle_pending_cleared(&members);
    assert_eq!(
        coverage.poll_fallback(later, &members),
        Some(group),
        "a dropped group is asked again"
    );
}

#[test]
fn a_direct_member_is_found_by_its_thread_tags_only() {
    let keys = Keys::generate();
    let root = id(1);
    let known: HashSet<EventId> = [root].into_iter().collect();
    let sign = |tags: Vec<Tag>| {
        EventBuilder::new(Kind::from(1), "reply")
            .tags(tags)
            .sign_with_keys(&keys)
            .expect("signed")
    };
    for letter in ["e", "E", "q"] {
        let event = sign(vec![Tag::parse([letter, &root.to_hex()]).expect("tag")]);
        assert_eq!(tagged_root(&event, &known), Some(root), "{letter}");
    }
    let unrelated = sign(vec![
        Tag::parse(["p", &root.to_hex()]).expect("tag"),
        Tag::parse(["e", &id(2).to_hex()]).expect("tag"),
    ]);
    assert_eq!(tagged_root(&unrelated, &known), None);
}

#[test]
fn the_sweep_asks_for_the_members_the_relay_covers_and_no_others() {
    let (members, article) = members();
    let mut coverage = DescendantCoverage::default();
    coverage.set_constrained();
    coverage.take_uncovered(&members, &roots(&[1]));
    let now = Timestamp::from_secs(1_000_000);
    assert_eq!(
        coverage.poll_fallback(now, &members),
        None,
        "sets the cursor"
    );
    let sweep = |coverage: &mut DescendantCoverage, secs: u64, batch: u64| {
        let group = coverage
            .poll_fallback(Timestamp::from_secs(secs), &members)
            .expect("a group");
        coverage.handle_fallback_sent(&group, Some(BatchId(batch)));
        coverage.handle_batch_done(BatchId(batch), true, &members);
        (group.ids, group.coordinates)
    };
    assert_eq!(
        sweep(&mut coverage, 1_000_010, 1),
        (vec![id(10), id(11)], vec![]),
        "only root 1's members"
    );

    // Root 2's members are covered, then their batch fails: they are not swept.
    let new = coverage.take_uncovered(&members, &roots(&[1, 2]));
    assert_eq!(new.ids, vec![id(20)]);
    assert_eq!(new.coordinates, vec![article.clone()]);
    coverage.handle_batch_opened(BatchId(2), new);
    coverage.handle_batch_done(BatchId(2), false, &members);
    assert_eq!(
        sweep(&mut coverage, 1_000_100, 3),
        (vec![id(10), id(11)], vec![]),
        "a failed batch's members are no longer covered"
    );

    // Covered again, they are swept where the sweep goes on: the ID after 11, then the
    // coordinate.
    coverage.take_uncovered(&members, &roots(&[1, 2]));
    assert_eq!(sweep(&mut coverage, 1_000_200, 4), (vec![id(20)], vec![]));
    assert_eq!(sweep(&mut coverage, 1_000_201, 5), (vec![], vec![article]));
}

#[test]
fn dropped_pending_batches_uncover_their_members_and_only_theirs() {
    let (members, article) = members();
    let mut coverage = DescendantCoverage::default();
    let first = coverage.take_uncovered(&members, &roots(&[1]));
    coverage.handle_batch_opened(BatchId(1), first);
    coverage.handle_batch_done(BatchId(1), true, &members);
    let second = coverage.take_uncovered(&members, &roots(&[1, 2]));
    coverage.handle_batch_opened(BatchId(2), second.clone());
    // A fresh start drops the pending batches: batch 2's history never ran.
    coverage.handle_pending_cleared(&members);
    assert_eq!(
        coverage.take_uncovered(&members, &roots(&[1, 2])),
        second,
        "the members of the dropped batch are covered again, not those of the confirmed one"
    );
    assert_eq!(second.coordinates, vec![article]);
    // The batch is forgotten: its late end changes nothing.
    coverage.handle_batch_done(BatchId(2), false, &members);
    assert!(
        coverage
            .take_uncovered(&members, &roots(&[1, 2]))
            .is_empty()
    );
}

#[test]
fn a_stored_member_is_recorded_with_its_root_coordinate_and_author() {
    let keys = Keys::generate();
    let root = id(1);
    let known: HashSet<EventId> = [root].into_iter().collect();
    let reply = EventBuilder::new(Kind::from(1111), "reply")
        .tags([Tag::parse(["E", &root.to_hex()]).expect("tag")])
        .sign_with_keys(&keys)
        .expect("signed");
    assert_eq!(
        MemberRecord::of(&reply, &known),
        Some(MemberRecord {
            id: reply.id,
            coordinate: None,
            root,
            author: keys.public_key(),
        })
    );
    let article = EventBuilder::new(Kind::from(30_023), "article")
        .tags([
            Tag::parse(["d", "notes"]).expect("tag"),
            Tag::parse(["e", &root.to_hex()]).expect("tag"),
        ])
        .sign_with_keys(&keys)
        .expect("signed");
    let member = MemberRecord::of(&article, &known).expect("a member");
    assert_eq!(
        member.coordinate,
        Some(Coordinate::new(Kind::from(30_023), keys.public_key()).identifier("notes"))
    );
    let roots_itself: HashSet<EventId> = [root, reply.id].into_iter().collect();
    assert_eq!(
        MemberRecord::of(&reply, &roots_itself),
        None,
        "a root is no member"
    );
}
