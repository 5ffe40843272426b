//! Unit tests for participants with outbox relays: where outbox-only events and relay lists
//! are, what the lists name, the expected set, and that switching them on moves events
//! without changing any ID.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use nostr::nips::nip65::{self, RelayMetadata};
use nostr::{Event, EventId, Kind, PublicKey, RelayUrl};
use proptest::prelude::*;

use crate::TestkitError;
use crate::network::{GeneratedNetwork, NetworkSpec, OutboxSpec, RootCount, generate};

const SERVICE: &str = "ws://127.0.0.1:4000";
const LISTED: usize = 3;
const OUTBOX: usize = 2;

fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("ws://127.0.0.1:{}", 5000 + i))
        .collect()
}

/// Six repositories over three listed relays, two outbox relays, half the contributors with
/// a relay list and half their roots, replies and comments only on outbox relays.
fn with_outbox(seed: u64) -> NetworkSpec {
    NetworkSpec {
        roots: RootCount::PerRepo(3),
        descendants_per_reply: 1,
        outbox: OutboxSpec {
            relays: OUTBOX,
            share_of_authors: 0.5,
            share_of_events: 0.5,
        },
        ..NetworkSpec::small(seed, SERVICE)
    }
}

fn network(spec: &NetworkSpec) -> GeneratedNetwork {
    generate(spec, &urls(spec.relay_count())).unwrap()
}

/// Relay indices holding each event.
fn placements(network: &GeneratedNetwork) -> BTreeMap<EventId, BTreeSet<usize>> {
    let mut out: BTreeMap<EventId, BTreeSet<usize>> = BTreeMap::new();
    for (relay, events) in network.relay_events.iter().enumerate() {
        for event in events {
            out.entry(event.id).or_default().insert(relay);
        }
    }
    out
}

fn events(network: &GeneratedNetwork) -> HashMap<EventId, Event> {
    network
        .relay_events
        .iter()
        .flatten()
        .map(|e| (e.id, e.clone()))
        .collect()
}

fn relay_list_ids(network: &GeneratedNetwork) -> BTreeSet<EventId> {
    network.outbox.relay_lists.iter().map(|l| l.event).collect()
}

/// The repository (by index) an event belongs to: its own, or its thread parent's.
fn repo_of(id: &EventId, events: &HashMap<EventId, Event>, network: &GeneratedNetwork) -> usize {
    let coordinates: HashMap<String, usize> = network
        .repos
        .iter()
        .enumerate()
        .map(|(i, r)| (r.repo.coordinate(), i))
        .collect();
    let mut at = *id;
    loop {
        let event = &events[&at];
        let mut parent = None;
        for tag in event.tags.iter() {
            let Some(value) = tag.content() else { continue };
            if let Some(&repo) = coordinates.get(value) {
                return repo;
            }
            if matches!(tag.kind().as_str(), "e" | "E" | "q") {
                parent = parent.or(EventId::from_hex(value).ok());
            }
        }
        at = parent.unwrap_or_else(|| panic!("{id} belongs to no repository"));
    }
}

#[test]
fn outbox_only_events_are_on_their_authors_write_relays_and_nowhere_else() {
    let network = network(&with_outbox(11));
    let outbox = &network.outbox;
    assert_eq!(outbox.relay_indices, vec![LISTED, LISTED + 1]);
    assert!(!outbox.only_on_outbox.is_empty());
    let placed = placements(&network);
    let writes: HashMap<PublicKey, BTreeSet<usize>> = outbox
        .relay_lists
        .iter()
        .map(|l| (l.author, l.write_relays.iter().copied().collect()))
        .collect();
    let events = events(&network);
    for id in &outbox.only_on_outbox {
        let author = events[id].pubkey;
        assert_eq!(placed[id], writes[&author], "{id}");
        assert!(placed[id].iter().all(|r| outbox.relay_indices.contains(r)));
    }
    // Outbox relays hold outbox-only events and relay lists, nothing else.
    let lists = relay_list_ids(&network);
    for &r in &outbox.relay_indices {
        for event in &network.relay_events[r] {
            assert!(
                outbox.only_on_outbox.contains(&event.id) || lists.contains(&event.id),
                "{} on outbox relay {r}",
                event.id
            );
        }
    }
    // No announcement lists an outbox relay.
    let all_urls = urls(LISTED + OUTBOX);
    let outbox_urls = &all_urls[LISTED..];
    for repo in &network.repos {
        assert!(repo.relay_indices.iter().all(|r| *r < LISTED));
        let announcement = &events[&repo.announcement];
        for tag in announcement.tags.iter() {
            assert!(tag.as_slice().iter().all(|v| !outbox_urls.contains(v)));
        }
    }
}

#[test]
fn every_relay_list_names_its_outbox_relays_and_is_on_the_relays_of_its_repositories() {
    let spec = with_outbox(12);
    let relay_urls = urls(spec.relay_count());
    let network = generate(&spec, &relay_urls).unwrap();
    let outbox = &network.outbox;
    // Exactly half of the 8 contributors.
    assert_eq!(outbox.relay_lists.len(), 4);
    let events = events(&network);
    let placed = placements(&network);
    let url = |r: usize| RelayUrl::parse(&relay_urls[r]).unwrap();
    // Listed relays each participant's events need their list on.
    let mut needed: HashMap<PublicKey, BTreeSet<usize>> = HashMap::new();
    for (id, event) in &events {
        if event.kind == Kind::RelayList
            || network
                .repos
                .iter()
                .any(|r| r.announcement == *id || r.state == *id)
        {
            continue;
        }
        let repo = &network.repos[repo_of(id, &events, &network)];
        needed
            .entry(event.pubkey)
            .or_default()
            .extend(repo.relay_indices.iter().copied());
    }
    let mut markers = BTreeSet::new();
    for list in &outbox.relay_lists {
        let event = &events[&list.event];
        assert_eq!(event.kind, Kind::RelayList);
        assert_eq!(event.pubkey, list.author);
        assert!(event.verify().is_ok());
        assert!((1..=2).contains(&list.write_relays.len()));
        assert!(
            list.write_relays
                .iter()
                .all(|r| outbox.relay_indices.contains(r))
        );
        assert!(list.read_relays.iter().all(|r| *r < LISTED));
        let mut writes = BTreeSet::new();
        let mut reads = BTreeSet::new();
        for (relay, marker) in nip65::extract_relay_list(event) {
            markers.insert(*marker);
            match marker {
                Some(RelayMetadata::Read) => reads.insert(relay.clone()),
                Some(RelayMetadata::Write) | None => writes.insert(relay.clone()),
            };
        }
        let want: BTreeSet<RelayUrl> = list.write_relays.iter().map(|&r| url(r)).collect();
        assert_eq!(writes, want);
        let want: BTreeSet<RelayUrl> = list.read_relays.iter().map(|&r| url(r)).collect();
        assert_eq!(reads, want);
        // Published where the daemon finds it: every listed relay of the author's
        // repositories (maintained ones included), and its write relays.
        let on: BTreeSet<usize> = list.published_on.iter().copied().collect();
        assert_eq!(placed[&list.event], on);
        let mut want = needed.get(&list.author).cloned().unwrap_or_default();
        for repo in &network.repos {
            let announcement = &events[&repo.announcement];
            let maintains = announcement.tags.iter().any(|t| {
                t.kind().as_str() == "maintainers"
                    && t.as_slice()[1..].contains(&list.author.to_hex())
            });
            if maintains {
                want.extend(repo.relay_indices.iter().copied());
            }
        }
        want.extend(list.write_relays.iter().copied());
        assert_eq!(on, want, "list of {}", list.author);
    }
    // Markers are mixed: `write`, none (read and write) and `read`.
    assert_eq!(markers.len(), 3, "{markers:?}");
    // Every outbox-only event's list is on the listed relays of its repository.
    for id in &outbox.only_on_outbox {
        let list = outbox
            .relay_lists
            .iter()
            .find(|l| l.author == events[id].pubkey)
            .unwrap();
        let repo = &network.repos[repo_of(id, &events, &network)];
        assert!(
            repo.relay_indices
                .iter()
                .all(|r| list.published_on.contains(r))
        );
    }
}

#[test]
fn the_expected_set_holds_outbox_only_events_and_no_relay_list() {
    let network = network(&with_outbox(13));
    let outbox = &network.outbox;
    assert!(!outbox.expected_only_on_outbox.is_empty());
    let expected_only: BTreeSet<EventId> = outbox
        .only_on_outbox
        .intersection(&network.expected)
        .copied()
        .collect();
    assert_eq!(outbox.expected_only_on_outbox, expected_only);
    let lists = relay_list_ids(&network);
    assert!(lists.is_disjoint(&network.expected));
    assert!(lists.is_subset(&network.excluded));
    // Every event on the network is expected or excluded, lists included.
    let all: BTreeSet<EventId> = placements(&network).into_keys().collect();
    let union: BTreeSet<EventId> = network.expected.union(&network.excluded).copied().collect();
    assert_eq!(all, union);
}

#[test]
fn behind_outbox_events_are_the_thread_members_of_outbox_only_events() {
    let network = network(&with_outbox(14));
    let outbox = &network.outbox;
    let events = events(&network);
    let parent = |event: &Event| {
        event
            .tags
            .iter()
            .filter(|t| matches!(t.kind().as_str(), "e" | "E" | "q"))
            .find_map(|t| t.content().and_then(|v| EventId::from_hex(v).ok()))
    };
    let mut want = BTreeSet::new();
    for (id, event) in &events {
        if !network.expected.contains(id) || outbox.only_on_outbox.contains(id) {
            continue;
        }
        let mut at = parent(event);
        while let Some(p) = at {
            if outbox.only_on_outbox.contains(&p) {
                want.insert(*id);
                break;
            }
            at = parent(&events[&p]);
        }
    }
    assert!(!want.is_empty());
    assert_eq!(outbox.expected_behind_outbox, want);
    assert!(
        outbox
            .expected_behind_outbox
            .is_disjoint(&outbox.only_on_outbox)
    );
}

#[test]
fn outbox_participants_move_events_without_changing_any_event_id() {
    let on = network(&with_outbox(15));
    let off_spec = NetworkSpec {
        outbox: OutboxSpec {
            relays: OUTBOX,
            ..OutboxSpec::NONE
        },
        ..with_outbox(15)
    };
    let off = network(&off_spec);
    assert!(off.outbox.relay_lists.is_empty() && off.outbox.only_on_outbox.is_empty());
    assert!(off.relay_events[LISTED..].iter().all(Vec::is_empty));
    assert_eq!(on.expected, off.expected);
    assert_eq!(on.expected_descendants, off.expected_descendants);
    let lists = relay_list_ids(&on);
    let excluded: BTreeSet<EventId> = on.excluded.difference(&lists).copied().collect();
    assert_eq!(excluded, off.excluded);
    let (on_placed, off_placed) = (placements(&on), placements(&off));
    for (id, relays) in &off_placed {
        if !on.outbox.only_on_outbox.contains(id) {
            assert_eq!(&on_placed[id], relays, "{id}");
        }
    }
}

#[test]
fn inconsistent_outbox_specs_are_typed_errors() {
    let check = |outbox: OutboxSpec, urls: usize, why: &str| {
        let spec = NetworkSpec {
            outbox,
            ..NetworkSpec::small(1, SERVICE)
        };
        match generate(&spec, &self::urls(urls)) {
            Err(TestkitError::InvalidSpec(message)) => {
                assert!(message.contains(why), "{message:?} should mention {why:?}")
            }
            other => panic!("expected an invalid spec error, got {other:?}"),
        }
    };
    check(OutboxSpec::with_relays(2), 3, "relay urls");
    check(
        OutboxSpec {
            share_of_events: 1.5,
            ..OutboxSpec::with_relays(1)
        },
        4,
        "outbox.share_of_events",
    );
    check(
        OutboxSpec {
            share_of_authors: -0.1,
            ..OutboxSpec::with_relays(1)
        },
        4,
        "outbox.share_of_authors",
    );
    check(
        OutboxSpec {
            relays: 0,
            ..OutboxSpec::with_relays(1)
        },
        3,
        "no outbox relay",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn same_seed_same_outbox_network(seed in any::<u64>(), relays in 1usize..3) {
        let spec = NetworkSpec {
            outbox: OutboxSpec { relays, ..with_outbox(seed).outbox },
            ..with_outbox(seed)
        };
        let first = network(&spec);
        let second = network(&spec);
        let ids = |n: &GeneratedNetwork| -> Vec<Vec<EventId>> {
            n.relay_events.iter().map(|r| r.iter().map(|e| e.id).collect()).collect()
        };
        prop_assert_eq!(ids(&first), ids(&second));
        prop_assert_eq!(&first.outbox, &second.outbox);
        prop_assert!(first.expected.is_disjoint(&first.excluded));
        let other = network(&NetworkSpec { seed: seed.wrapping_add(1), ..spec });
        prop_assert!(relay_list_ids(&first).is_disjoint(&relay_list_ids(&other)));
    }
}

#[test]
fn outbox_only_events_are_by_authors_who_take_part_in_them_on_listed_relays() {
    let network = network(&with_outbox(13));
    let outbox = &network.outbox;
    assert!(!outbox.only_on_outbox.is_empty());
    let events = events(&network);
    let on_listed = |id: &EventId| !outbox.only_on_outbox.contains(id);
    let is_root = |e: &Event| matches!(e.kind.as_u16(), 1617 | 1618 | 1621);
    let parent = |e: &Event| {
        e.tags
            .iter()
            .filter(|t| matches!(t.kind().as_str(), "e" | "E"))
            .find_map(|t| t.content().and_then(|v| EventId::from_hex(v).ok()))
    };
    for id in &outbox.only_on_outbox {
        let event = &events[id];
        let author = event.pubkey;
        let repo = repo_of(id, &events, &network);
        let announcement = &events[&network.repos[repo].announcement];
        let maintains = announcement.tags.iter().any(|t| {
            t.kind().as_str() == "maintainers" && t.as_slice()[1..].contains(&author.to_hex())
        });
        let posted_a_root = events.values().any(|e| {
            e.pubkey == author
                && is_root(e)
                && on_listed(&e.id)
                && repo_of(&e.id, &events, &network) == repo
        });
        let replied_to_its_root = parent(event).is_some_and(|root| {
            events.get(&root).is_some_and(is_root)
                && events.values().any(|e| {
                    e.pubkey == author && e.id != *id && on_listed(&e.id) && parent(e) == Some(root)
                })
        });
        assert!(
            maintains || posted_a_root || replied_to_its_root,
            "{id} (kind {}) is by an author the repository's relays never saw take part",
            event.kind
        );
    }
}
