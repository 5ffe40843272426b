//! Tests of the rejected-events index at explicit instants: each tier's lifetime and bounds,
//! the "have" answer, release to re-processing or re-fetching, and the persisted form.

use std::time::Duration;

use grasp_sync_model::RelayUrl;
use nostr::{Event, EventBuilder, EventId, Keys, Kind, SecretKey, Timestamp};
use proptest::prelude::*;

use super::{Dependency, RejectedConfig, RejectedIndex};

const T0: u64 = 1_700_000_000;
const MINUTE: u64 = 60;
const DAY: u64 = 24 * 60 * MINUTE;

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

fn keys() -> Keys {
    Keys::new(SecretKey::from_slice(&[3; 32]).expect("valid secret key"))
}

fn event(kind: u16, n: u64) -> Event {
    sized_event(kind, n, 0)
}

fn sized_event(kind: u16, n: u64, content_len: usize) -> Event {
    EventBuilder::new(Kind::from(kind), "x".repeat(content_len))
        .custom_created_at(Timestamp::from(n))
        .sign_with_keys(&keys())
        .expect("signing works")
}

fn relay(name: &str) -> RelayUrl {
    RelayUrl::parse(&format!("wss://{name}.example.org")).expect("valid url")
}

/// The dependency every waiting test event waits for.
fn repo() -> Dependency {
    Dependency::Maintainer(
        format!("30617:{}:repo", keys().public_key().to_hex())
            .parse()
            .expect("valid coordinate"),
    )
}

fn index() -> RejectedIndex {
    RejectedIndex::new(RejectedConfig::default())
}

/// Rejects `event` at `now` as waiting for `repo()`, sent by `source`.
fn reject_waiting(index: &mut RejectedIndex, now: u64, event: &Event, source: &str) {
    index.handle_rejected(
        at(now),
        event,
        "blocked: waiting",
        vec![repo()],
        Some(&relay(source)),
    );
}

fn reject_final(index: &mut RejectedIndex, now: u64, event: &Event) {
    index.handle_rejected(at(now), event, "invalid: final", Vec::new(), None);
}

/// Asserts the "have" answer for each (instant, expected) pair.
fn check_contains(index: &RejectedIndex, id: &EventId, expected: &[(u64, bool)]) {
    for (now, want) in expected {
        assert_eq!(index.contains(at(*now), id), *want, "at T0+{}", now - T0);
    }
}

#[test]
fn hot_copy_expires_after_hot_ttl_while_the_id_stays_cold() {
    let mut index = index();
    let state = event(30618, 1);
    reject_waiting(&mut index, T0, &state, "a");
    assert!(index.is_hot(&state.id));
    index.handle_timeout(at(T0 + 10 * MINUTE - 1));
    assert!(index.is_hot(&state.id));
    index.handle_timeout(at(T0 + 10 * MINUTE));
    assert!(!index.is_hot(&state.id));
    check_contains(
        &index,
        &state.id,
        &[(T0 + 10 * MINUTE, true), (T0 + DAY, true)],
    );
    // With the hot copy gone, the arrival of the dependency asks for a fetch instead.
    index.handle_accepted(at(T0 + DAY), &EventId::all_zeros(), &[repo()]);
    assert_eq!(index.poll_reprocess(), None);
    assert_eq!(
        index.poll_refetch(at(T0 + DAY)),
        vec![(relay("a"), vec![state.id])]
    );
}

#[test]
fn cold_entry_expires_after_cold_ttl() {
    let mut index = index();
    let stray = event(1, 1);
    reject_final(&mut index, T0, &stray);
    index.poll_persist();
    check_contains(
        &index,
        &stray.id,
        &[(T0, true), (T0 + 7 * DAY - 1, true), (T0 + 7 * DAY, false)],
    );
    assert_eq!(
        index.reason(at(T0 + 7 * DAY - 1), &stray.id),
        Some("invalid: final")
    );
    assert_eq!(index.reason(at(T0 + 7 * DAY), &stray.id), None);
    index.handle_timeout(at(T0 + 7 * DAY));
    assert_eq!(index.cold_len(), 0);
    assert_eq!(index.poll_persist(), vec![(stray.id, None)]);
}

#[test]
fn an_entry_a_relay_still_holds_is_renewed_once_half_its_lifetime_has_passed() {
    let mut index = index();
    let stray = event(1, 1);
    let waiting = event(30618, 2);
    reject_final(&mut index, T0, &stray);
    reject_waiting(&mut index, T0, &waiting, "a");
    index.poll_persist();
    let both = [stray.id, waiting.id, event(1, 3).id];
    // With more than half its lifetime left, nothing changes and nothing is written.
    assert_eq!(index.handle_still_held(at(T0 + 3 * DAY), &both), 0);
    assert!(index.poll_persist().is_empty());
    // Past half of it, both are remembered for another lifetime, and written so.
    assert_eq!(index.handle_still_held(at(T0 + 4 * DAY), &both), 2);
    let written: Vec<(EventId, u64)> = index
        .poll_persist()
        .into_iter()
        .map(|(id, record)| (id, record.expect("kept").expires_at))
        .collect();
    let mut expected = vec![(stray.id, T0 + 11 * DAY), (waiting.id, T0 + 11 * DAY)];
    expected.sort_unstable();
    assert_eq!(written, expected);
    check_contains(
        &index,
        &stray.id,
        &[
            (T0 + 7 * DAY, true),
            (T0 + 11 * DAY - 1, true),
            (T0 + 11 * DAY, false),
        ],
    );
    // The renewed entry still waits for its dependency.
    index.handle_accepted(at(T0 + 8 * DAY), &EventId::all_zeros(), &[repo()]);
    assert_eq!(
        index.poll_refetch(at(T0 + 8 * DAY)),
        vec![(relay("a"), vec![waiting.id])]
    );
    // A released entry waits to be fetched again: it is not renewed.
    assert_eq!(index.handle_still_held(at(T0 + 10 * DAY), &[waiting.id]), 0);
}

#[test]
fn a_renewed_entry_is_the_newest_for_the_count_bound_and_on_restore() {
    let mut index = RejectedIndex::new(RejectedConfig {
        cold_capacity: 2,
        ..RejectedConfig::default()
    });
    let first = event(1, 1);
    let second = event(1, 2);
    reject_final(&mut index, T0, &first);
    reject_final(&mut index, T0 + DAY, &second);
    index.handle_still_held(at(T0 + 4 * DAY), &[first.id]);
    let records: Vec<_> = index
        .poll_persist()
        .into_iter()
        .filter_map(|(_, record)| record)
        .collect();
    // Restored in the order they expire, the renewed one last.
    let mut restored = RejectedIndex::new(RejectedConfig {
        cold_capacity: 2,
        ..RejectedConfig::default()
    });
    restored.handle_restored(at(T0 + 4 * DAY), records);
    for index in [&mut index, &mut restored] {
        reject_final(index, T0 + 4 * DAY, &event(1, 3));
        assert!(index.contains(at(T0 + 4 * DAY), &first.id));
        assert!(!index.contains(at(T0 + 4 * DAY), &second.id));
    }
}

#[test]
fn final_rejection_keeps_no_hot_copy() {
    let mut index = index();
    let stray = event(1, 1);
    reject_final(&mut index, T0, &stray);
    assert!(!index.is_hot(&stray.id));
    assert_eq!(index.cold_len(), 1);
}

#[test]
fn hot_cache_forgets_its_oldest_event_beyond_its_count() {
    let mut index = RejectedIndex::new(RejectedConfig {
        hot_capacity: 2,
        ..RejectedConfig::default()
    });
    let events: Vec<Event> = (0..3).map(|n| event(30618, n)).collect();
    for (n, event) in events.iter().enumerate() {
        reject_waiting(&mut index, T0 + n as u64, event, "a");
    }
    assert_eq!(index.hot_usage().0, 2);
    assert!(!index.is_hot(&events[0].id));
    assert!(index.is_hot(&events[1].id) && index.is_hot(&events[2].id));
    // Evicted from the hot cache, still known to the cold index.
    assert_eq!(index.cold_len(), 3);
    assert!(index.contains(at(T0 + 3), &events[0].id));
}

#[test]
fn hot_cache_forgets_its_oldest_events_beyond_its_bytes() {
    let big = sized_event(30618, 1, 10_000);
    let mut index = RejectedIndex::new(RejectedConfig {
        hot_max_bytes: 25_000,
        ..RejectedConfig::default()
    });
    let events: Vec<Event> = (0..3).map(|n| sized_event(30618, n, 10_000)).collect();
    for event in &events {
        reject_waiting(&mut index, T0, event, "a");
    }
    let (count, bytes) = index.hot_usage();
    assert_eq!(count, 2);
    assert!(bytes <= 25_000, "{bytes}");
    assert!(!index.is_hot(&events[0].id));
    // An event larger than the whole budget is kept cold only.
    let mut small = RejectedIndex::new(RejectedConfig {
        hot_max_bytes: 5_000,
        ..RejectedConfig::default()
    });
    reject_waiting(&mut small, T0, &big, "a");
    assert!(!small.is_hot(&big.id));
    assert!(small.contains(at(T0), &big.id));
}

#[test]
fn cold_index_forgets_its_oldest_id_beyond_its_count_with_its_hot_copy() {
    let mut index = RejectedIndex::new(RejectedConfig {
        cold_capacity: 2,
        ..RejectedConfig::default()
    });
    let events: Vec<Event> = (0..3).map(|n| event(30618, n)).collect();
    for event in &events {
        reject_waiting(&mut index, T0, event, "a");
    }
    assert_eq!(index.cold_len(), 2);
    assert!(!index.contains(at(T0), &events[0].id));
    assert!(!index.is_hot(&events[0].id));
    assert!(index.contains(at(T0), &events[2].id));
    let removed: Vec<EventId> = index
        .poll_persist()
        .into_iter()
        .filter(|(_, record)| record.is_none())
        .map(|(id, _)| id)
        .collect();
    assert_eq!(removed, vec![events[0].id]);
}

#[test]
fn usage_counts_evictions_by_the_bounds_but_not_expiry() {
    let mut index = RejectedIndex::new(RejectedConfig {
        hot_capacity: 1,
        cold_capacity: 2,
        ..RejectedConfig::default()
    });
    let events: Vec<Event> = (0..3).map(|n| event(30618, n)).collect();
    for event in &events {
        reject_waiting(&mut index, T0, event, "a");
    }
    let usage = index.usage();
    assert_eq!((usage.hot_events, usage.hot_capacity), (1, 1));
    assert_eq!((usage.cold_ids, usage.cold_capacity), (2, 2));
    // The second and third rejection each pushed a hot copy out; the third pushed out an ID.
    assert_eq!((usage.hot_evicted, usage.cold_evicted), (2, 1));
    index.handle_timeout(at(T0 + 8 * DAY));
    let usage = index.usage();
    assert_eq!((usage.hot_events, usage.cold_ids), (0, 0));
    assert_eq!((usage.hot_evicted, usage.cold_evicted), (2, 1));
}

#[test]
fn contains_is_true_for_hot_and_cold_ids_but_not_for_released_ones() {
    let mut index = index();
    let waiting = event(30618, 1);
    let other_waiting = event(30618, 2);
    let stray = event(1, 3);
    let unknown = event(1, 4);
    reject_waiting(&mut index, T0, &waiting, "a");
    reject_waiting(&mut index, T0, &other_waiting, "a");
    reject_final(&mut index, T0, &stray);
    let now = T0 + DAY;
    for (id, want) in [
        (waiting.id, true),
        (other_waiting.id, true),
        (stray.id, true),
        (unknown.id, false),
    ] {
        assert_eq!(index.contains(at(now), &id), want);
    }
    // `other_waiting`'s hot copy expired: released, it stays in the cold index (its reason is
    // still known) but is no longer "had", so it can be fetched again.
    index.handle_accepted(at(now), &EventId::all_zeros(), &[repo()]);
    assert!(!index.contains(at(now), &other_waiting.id));
    assert!(!index.contains(at(now), &waiting.id));
    assert_eq!(index.reason(at(now), &waiting.id), Some("blocked: waiting"));
    assert!(index.contains(at(now), &stray.id));
}

#[test]
fn released_hot_events_are_reprocessed_announcements_first() {
    let mut index = index();
    let issue = event(1621, 1);
    let state = event(30618, 2);
    let announcement = event(30617, 3);
    for event in [&issue, &state, &announcement] {
        reject_waiting(&mut index, T0, event, "a");
    }
    index.handle_accepted(at(T0 + MINUTE), &EventId::all_zeros(), &[repo()]);
    let order: Vec<EventId> = std::iter::from_fn(|| index.poll_reprocess())
        .map(|event| event.id)
        .collect();
    assert_eq!(order, vec![announcement.id, state.id, issue.id]);
    // Nothing is asked of relays: the full copies were at hand.
    assert!(index.poll_refetch(at(T0 + MINUTE)).is_empty());
}

#[test]
fn released_expired_events_are_reported_under_each_source_relay() {
    let mut index = index();
    let state = event(30618, 1);
    let announcement = event(30617, 2);
    reject_waiting(&mut index, T0, &state, "a");
    reject_waiting(&mut index, T0, &state, "b");
    reject_waiting(&mut index, T0, &announcement, "b");
    let now = T0 + DAY;
    index.handle_accepted(at(now), &EventId::all_zeros(), &[repo()]);
    assert_eq!(
        index.poll_refetch(at(now)),
        vec![
            (relay("a"), vec![state.id]),
            (relay("b"), vec![announcement.id, state.id]),
        ]
    );
    assert!(index.poll_refetch(at(now)).is_empty());
}

#[test]
fn released_id_is_reported_again_after_the_retry_until_the_report_limit() {
    let mut index = RejectedIndex::new(RejectedConfig {
        refetch_retry: Duration::from_secs(100),
        refetch_reports: 3,
        ..RejectedConfig::default()
    });
    let state = event(30618, 1);
    reject_waiting(&mut index, T0, &state, "a");
    let now = T0 + DAY;
    index.handle_accepted(at(now), &EventId::all_zeros(), &[repo()]);
    let reports: Vec<usize> = [0, 99, 100, 199, 200, 300, 10_000]
        .iter()
        .map(|offset| index.poll_refetch(at(now + offset)).len())
        .collect();
    assert_eq!(reports, vec![1, 0, 1, 0, 1, 0, 0]);
    // Unreported, it stays released until its cold entry expires.
    assert!(!index.contains(at(now + 10_000), &state.id));
    assert!(index.reason(at(now + 10_000), &state.id).is_some());
}

#[test]
fn accepted_or_stored_event_is_forgotten_in_both_tiers() {
    let mut index = index();
    let accepted = event(30618, 1);
    let stored = event(30618, 2);
    reject_waiting(&mut index, T0, &accepted, "a");
    reject_waiting(&mut index, T0, &stored, "a");
    index.poll_persist();
    index.handle_accepted(at(T0), &accepted.id, &[Dependency::Event(accepted.id)]);
    index.handle_stored(&stored.id);
    for id in [accepted.id, stored.id] {
        assert!(!index.contains(at(T0), &id));
        assert!(!index.is_hot(&id));
        assert_eq!(index.reason(at(T0), &id), None);
    }
    assert_eq!(index.cold_len(), 0);
    let mut expected = vec![(accepted.id, None), (stored.id, None)];
    expected.sort_unstable_by_key(|(id, _)| *id);
    assert_eq!(index.poll_persist(), expected);
    // Their dependency arriving later releases nothing.
    index.handle_accepted(at(T0), &EventId::all_zeros(), &[repo()]);
    assert_eq!(index.poll_reprocess(), None);
}

#[test]
fn restored_records_keep_their_waits_and_released_ones_are_due() {
    let mut index = index();
    let waiting = event(30618, 1);
    let released = event(30618, 2);
    let stray = event(1, 3);
    reject_waiting(&mut index, T0, &waiting, "a");
    index.handle_rejected(
        at(T0),
        &released,
        "blocked: waiting",
        vec![Dependency::Event(EventId::all_zeros())],
        Some(&relay("b")),
    );
    reject_final(&mut index, T0, &stray);
    index.handle_accepted(
        at(T0 + DAY),
        &EventId::all_zeros(),
        &[Dependency::Event(EventId::all_zeros())],
    );
    let records: Vec<_> = index
        .poll_persist()
        .into_iter()
        .filter_map(|(_, record)| record)
        .collect();
    assert_eq!(records.len(), 3);

    let mut restored = RejectedIndex::new(RejectedConfig::default());
    let now = T0 + 2 * DAY;
    restored.handle_restored(at(now), records);
    assert!(restored.poll_persist().is_empty());
    assert!(restored.contains(at(now), &waiting.id));
    assert!(restored.contains(at(now), &stray.id));
    assert!(!restored.contains(at(now), &released.id));
    assert_eq!(
        restored.poll_refetch(at(now)),
        vec![(relay("b"), vec![released.id])]
    );
    restored.handle_accepted(at(now), &EventId::all_zeros(), &[repo()]);
    assert_eq!(
        restored.poll_refetch(at(now)),
        vec![(relay("a"), vec![waiting.id])]
    );
    assert_eq!(restored.reason(at(now), &stray.id), Some("invalid: final"));
}

#[test]
fn restore_drops_and_deletes_expired_records() {
    let mut index = index();
    let stray = event(1, 1);
    reject_final(&mut index, T0, &stray);
    let records: Vec<_> = index
        .poll_persist()
        .into_iter()
        .filter_map(|(_, record)| record)
        .collect();
    let mut restored = RejectedIndex::new(RejectedConfig::default());
    restored.handle_restored(at(T0 + 7 * DAY), records);
    assert_eq!(restored.cold_len(), 0);
    assert_eq!(restored.poll_persist(), vec![(stray.id, None)]);
}

#[test]
fn dependency_round_trips_through_its_text_form() {
    let coordinate = format!("30617:{}:other", keys().public_key().to_hex());
    for dependency in [
        repo(),
        Dependency::Announcement(coordinate.parse().expect("valid coordinate")),
        Dependency::Event(event(1, 1).id),
        Dependency::Citation(event(1, 2).id),
    ] {
        assert_eq!(
            Dependency::decode(&dependency.encode()),
            Some(dependency.clone())
        );
    }
    assert_eq!(Dependency::decode("later:thing"), None);
    assert_eq!(Dependency::decode("event:not-hex"), None);
}

#[derive(Debug, Clone)]
enum Op {
    Reject { n: u8, waits: bool, size: u16 },
    Accept { n: u8 },
    Release,
    StillHeld { n: u8 },
    Advance { secs: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..24, any::<bool>(), 0u16..3_000)
            .prop_map(|(n, waits, size)| Op::Reject { n, waits, size }),
        1 => (0u8..24).prop_map(|n| Op::Accept { n }),
        1 => Just(Op::Release),
        1 => (0u8..24).prop_map(|n| Op::StillHeld { n }),
        1 => (0u16..400).prop_map(|secs| Op::Advance { secs }),
    ]
}

/// 24 events in three sizes each, signed once for every case.
fn pool() -> &'static [Vec<Event>] {
    static POOL: std::sync::OnceLock<Vec<Vec<Event>>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        (0..24u64)
            .map(|n| {
                [0usize, 1_000, 2_500]
                    .iter()
                    .map(|size| sized_event(30618, n, *size))
                    .collect()
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn tiers_never_exceed_their_bounds_and_hot_stays_within_cold(
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        let config = RejectedConfig {
            hot_ttl: Duration::from_secs(300),
            hot_capacity: 4,
            hot_max_bytes: 6_000,
            cold_ttl: Duration::from_secs(1_000),
            cold_capacity: 8,
            ..RejectedConfig::default()
        };
        let mut index = RejectedIndex::new(config);
        let events = pool();
        let mut now = T0;
        for op in ops {
            match op {
                Op::Reject { n, waits, size } => {
                    let event = &events[usize::from(n)][usize::from(size % 3)];
                    let waits = if waits { vec![repo()] } else { Vec::new() };
                    index.handle_rejected(at(now), event, "blocked: x", waits, Some(&relay("a")));
                }
                Op::Accept { n } => {
                    let id = events[usize::from(n)][0].id;
                    index.handle_accepted(at(now), &id, &[Dependency::Event(id)]);
                }
                Op::Release => {
                    index.handle_accepted(at(now), &EventId::all_zeros(), &[repo()]);
                    while index.poll_reprocess().is_some() {}
                }
                Op::StillHeld { n } => {
                    index.handle_still_held(at(now), &[events[usize::from(n)][0].id]);
                }
                Op::Advance { secs } => now += u64::from(secs),
            }
            index.poll_refetch(at(now));
            index.poll_persist();
            let (count, bytes) = index.hot_usage();
            prop_assert!(count <= 4);
            prop_assert!(bytes <= 6_000);
            prop_assert!(index.cold_len() <= 8);
            for row in events {
                for event in row {
                    if index.is_hot(&event.id) {
                        prop_assert!(index.reason(at(now), &event.id).is_some());
                        prop_assert!(index.contains(at(now), &event.id));
                    }
                }
            }
        }
    }
}
