//! Unit tests of grouped pagination against a simulated relay with a per-filter page cap.

use std::collections::BTreeSet;

use nostr::secp256k1::schnorr::Signature;
use nostr::{Event, EventId, Filter, Kind, PublicKey, Tag, Timestamp};
use proptest::prelude::*;

use super::*;

fn author() -> PublicKey {
    PublicKey::from_slice(&[2u8; 32])
        .or_else(|_| PublicKey::from_slice(&[3u8; 32]))
        .unwrap()
}

/// An unsigned test event: pagination never verifies, it only counts and reads `created_at`.
fn event(n: u64, created_at: u64, topic: &str) -> Event {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&n.to_be_bytes());
    Event::new(
        EventId::from_byte_array(bytes),
        author(),
        Timestamp::from(created_at),
        Kind::TextNote,
        [Tag::hashtag(topic)],
        "",
        Signature::from_slice(&[1u8; 64]).unwrap(),
    )
}

fn topic_filter(topic: &str) -> Filter {
    Filter::new().hashtag(topic)
}

/// A relay that applies `cap` to each filter independently, newest first.
struct SimRelay {
    events: Vec<Event>,
    cap: usize,
}

impl SimRelay {
    fn page(&self, filters: &[Filter]) -> Vec<Event> {
        let mut out: Vec<Event> = Vec::new();
        for filter in filters {
            let mut matching: Vec<&Event> = self
                .events
                .iter()
                .filter(|e| filter.match_event(e, nostr::filter::MatchEventOptions::new()))
                .collect();
            matching.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
            out.extend(matching.into_iter().take(self.cap).cloned());
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        out.dedup_by(|a, b| a.id == b.id);
        out
    }
}

struct Run {
    pages: usize,
    delivered: BTreeSet<EventId>,
    truncated: Vec<Truncation>,
}

/// Drives one grouped pagination to completion (bounded, so a livelock fails the test).
fn drive(relay: &SimRelay, filters: Vec<Filter>, session: &mut RelayPageSession) -> Run {
    let mut planner = GroupedPagination::new(filters.clone());
    let mut current = filters;
    let mut delivered = BTreeSet::new();
    for pages in 1..=1_000 {
        for event in relay.page(&current) {
            planner.handle_event(&event);
            delivered.insert(event.id);
        }
        match planner.handle_eose(session) {
            PageStep::Next(next) => current = next,
            PageStep::Complete { truncated } => {
                return Run {
                    pages,
                    delivered,
                    truncated,
                };
            }
        }
    }
    panic!("pagination did not terminate");
}

fn all_ids(events: &[Event]) -> BTreeSet<EventId> {
    events.iter().map(|e| e.id).collect()
}

#[test]
fn threshold_is_ninety_percent_of_the_estimated_cap_never_below_ninety() {
    let check = |largest: usize, hint: Option<usize>, expected: usize| {
        let mut session = RelayPageSession::new(hint);
        session.observe_page(largest);
        assert_eq!(
            session.threshold(),
            expected,
            "largest {largest}, hint {hint:?}"
        );
    };
    check(0, None, 90);
    check(100, None, 90);
    check(101, None, 90);
    check(111, None, 99);
    check(500, None, 450);
    check(999, None, 899);
    check(0, Some(1000), 900);
    check(600, Some(500), 540);
    check(0, Some(0), 90);
    check(
        usize::MAX,
        None,
        usize::MAX / 10 * 9 + usize::MAX % 10 * 9 / 10,
    );
}

#[test]
fn every_raw_delivery_counts_including_repeats() {
    let mut planner = GroupedPagination::new(vec![topic_filter("t")]);
    let repeated = event(1, 100, "t");
    for _ in 0..90 {
        assert!(planner.handle_event(&repeated));
    }
    assert!(!planner.handle_event(&event(2, 100, "other")));
    let mut session = RelayPageSession::new(None);
    assert_eq!(
        planner.handle_eose(&mut session),
        PageStep::Next(vec![topic_filter("t").until(Timestamp::from(100))])
    );
}

#[test]
fn next_page_until_is_the_oldest_created_at_so_same_second_events_are_kept() {
    // 150 events; the 100-event page boundary falls inside a second holding 20 events.
    let mut events: Vec<Event> = (0..130).map(|n| event(n, 1_000 - n, "t")).collect();
    events.extend((130..150).map(|n| event(n, 1_000 - 99, "t")));
    let relay = SimRelay {
        events: events.clone(),
        cap: 100,
    };
    let run = drive(
        &relay,
        vec![topic_filter("t")],
        &mut RelayPageSession::new(None),
    );
    assert_eq!(run.delivered, all_ids(&events));
    assert!(run.truncated.is_empty());
}

#[test]
fn next_pages_stay_grouped_with_their_own_cursors() {
    let mut events: Vec<Event> = (0..200).map(|n| event(n, 1_000 - n, "a")).collect();
    events.extend((200..400).map(|n| event(n, 2_000 - n, "b")));
    events.extend((400..410).map(|n| event(n, 3_000 - n, "c")));
    let relay = SimRelay { events, cap: 100 };
    let filters = vec![topic_filter("a"), topic_filter("b"), topic_filter("c")];
    let mut planner = GroupedPagination::new(filters.clone());
    for e in relay.page(&filters) {
        planner.handle_event(&e);
    }
    assert_eq!(
        planner.handle_eose(&mut RelayPageSession::new(None)),
        PageStep::Next(vec![
            topic_filter("a").until(Timestamp::from(901)),
            topic_filter("b").until(Timestamp::from(1_701)),
        ])
    );
}

#[test]
fn a_page_stuck_at_one_second_terminates_and_reports_truncation() {
    let events: Vec<Event> = (0..300).map(|n| event(n, 500, "t")).collect();
    let relay = SimRelay { events, cap: 100 };
    let run = drive(
        &relay,
        vec![topic_filter("t")],
        &mut RelayPageSession::new(None),
    );
    assert_eq!(run.pages, 2);
    assert_eq!(
        run.truncated,
        vec![Truncation {
            filter: topic_filter("t"),
            at: Timestamp::from(500),
            delivered: 100,
        }]
    );
}

#[test]
fn a_wrong_high_hint_is_dropped_after_its_verification_page_finds_new_events() {
    let events: Vec<Event> = (0..2_000).map(|n| event(n, 10_000 - n, "t")).collect();
    let relay = SimRelay {
        events: events.clone(),
        cap: 500,
    };
    let mut session = RelayPageSession::new(Some(1_000));
    let run = drive(&relay, vec![topic_filter("t")], &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert!(session.hint_dropped());
    assert_eq!(session.threshold(), 450);
}

#[test]
fn a_correct_hint_survives_verification_and_then_saves_pages() {
    let topic_a: Vec<Event> = (0..300).map(|n| event(n, 10_000 - n, "a")).collect();
    let topic_b: Vec<Event> = (300..600).map(|n| event(n, 10_000 - n, "b")).collect();
    let relay = SimRelay {
        events: [topic_a.clone(), topic_b.clone()].concat(),
        cap: 500,
    };
    let mut session = RelayPageSession::new(Some(500));
    let first = drive(&relay, vec![topic_filter("a")], &mut session);
    assert_eq!(first.pages, 2, "one verification page");
    assert_eq!(first.delivered, all_ids(&topic_a));
    assert_eq!(session.trusted_hint(), Some(500));
    let second = drive(&relay, vec![topic_filter("b")], &mut session);
    assert_eq!(
        second.pages, 1,
        "the verified hint declares 300 < 450 exhausted"
    );
    assert_eq!(second.delivered, all_ids(&topic_b));
}

#[test]
fn without_a_hint_a_relay_capping_at_100_is_fully_paginated() {
    let events: Vec<Event> = (0..1_000).map(|n| event(n, 50_000 - n * 3, "t")).collect();
    let relay = SimRelay {
        events: events.clone(),
        cap: 100,
    };
    let run = drive(
        &relay,
        vec![topic_filter("t")],
        &mut RelayPageSession::new(None),
    );
    assert_eq!(run.delivered, all_ids(&events));
}

#[test]
fn current_filters_empty_once_complete() {
    let mut planner = GroupedPagination::new(vec![topic_filter("t")]);
    assert_eq!(planner.current_filters(), vec![topic_filter("t")]);
    let step = planner.handle_eose(&mut RelayPageSession::new(None));
    assert_eq!(
        step,
        PageStep::Complete {
            truncated: Vec::new()
        }
    );
    assert!(planner.is_complete());
    assert!(planner.current_filters().is_empty());
}

/// One adversarial page: how many events, the newest second, and how many seconds they spread.
fn arb_page() -> impl Strategy<Value = (usize, u64, u64)> {
    (0usize..400, 0u64..60, 0u64..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever a relay sends (same timestamps, shrinking pages, events outside the cursor),
    /// every filter finishes within one page per distinct second plus the first page.
    #[test]
    fn pagination_always_terminates_on_adversarial_pages(
        pages in prop::collection::vec(arb_page(), 1..20),
        filters in 1usize..4,
        hint in prop::option::of(0usize..1_500),
    ) {
        let topics = ["a", "b", "c"];
        let filters: Vec<Filter> = topics[..filters].iter().map(|t| topic_filter(t)).collect();
        let mut planner = GroupedPagination::new(filters);
        let mut session = RelayPageSession::new(hint);
        let mut n = 0u64;
        let mut finished = false;
        // Timestamps are below 60: at most 61 cursors per filter, plus the first page.
        for step in 0..62 {
            let (count, newest, spread) = pages[step % pages.len()];
            for i in 0..count as u64 {
                n += 1;
                let created_at = newest.saturating_sub(i % (spread + 1));
                let topic = topics[(i % 3) as usize];
                planner.handle_event(&event(n % 97, created_at, topic));
            }
            if let PageStep::Complete { .. } = planner.handle_eose(&mut session) {
                finished = true;
                break;
            }
        }
        prop_assert!(finished);
        prop_assert!(planner.is_complete());
    }
}
