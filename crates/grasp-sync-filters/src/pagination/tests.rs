//! Unit and property tests of pagination against a simulated relay whose quirks are switches:
//! result order, `until` semantics, per-filter or per-REQ caps, and same-second clusters.

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
fn event_of(n: u64, created_at: u64, topic: &str, kind: u16) -> Event {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&n.to_be_bytes());
    Event::new(
        EventId::from_byte_array(bytes),
        author(),
        Timestamp::from(created_at),
        Kind::from(kind),
        [Tag::hashtag(topic)],
        "",
        Signature::from_slice(&[1u8; 64]).unwrap(),
    )
}

fn event(n: u64, created_at: u64, topic: &str) -> Event {
    event_of(n, created_at, topic, 1)
}

fn topic_filter(topic: &str) -> Filter {
    Filter::new().hashtag(topic)
}

/// When a simulated relay sends the oldest matches first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OldestFirst {
    Never,
    WithoutLimit,
    Always,
}

/// A relay with switchable quirks. Results per filter are capped at `min(limit, cap)`; with
/// `per_request` the merged result is cut to `cap` too. Filters are answered one after another
/// and duplicates dropped, unless `merge_sorted`, which sorts the merged result newest first.
/// With `shuffled`, the relay picks the same events but sends each answer in an order of its
/// own (the seed's), as a relay merging shards or reading an unsorted index does. With
/// `duplicated`, it sends some events of each answer twice (the seed chooses which), each
/// counted once against its cap.
#[derive(Clone)]
struct SimRelay {
    events: Vec<Event>,
    cap: usize,
    oldest_first: OldestFirst,
    exclusive_until: bool,
    per_request: bool,
    merge_sorted: bool,
    shuffled: Option<u64>,
    duplicated: Option<u64>,
}

impl std::fmt::Debug for SimRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut seconds = std::collections::BTreeMap::<(u64, u16), usize>::new();
        for e in &self.events {
            *seconds
                .entry((e.created_at.as_secs(), e.kind.as_u16()))
                .or_default() += 1;
        }
        f.debug_struct("SimRelay")
            .field("events", &self.events.len())
            .field("per_second_and_kind", &seconds)
            .field("cap", &self.cap)
            .field("oldest_first", &self.oldest_first)
            .field("exclusive_until", &self.exclusive_until)
            .field("per_request", &self.per_request)
            .field("merge_sorted", &self.merge_sorted)
            .field("shuffled", &self.shuffled)
            .field("duplicated", &self.duplicated)
            .finish()
    }
}

impl SimRelay {
    fn new(events: Vec<Event>, cap: usize) -> Self {
        Self {
            events,
            cap,
            oldest_first: OldestFirst::Never,
            exclusive_until: false,
            per_request: false,
            merge_sorted: true,
            shuffled: None,
            duplicated: None,
        }
    }

    fn matches(&self, filter: &Filter, event: &Event) -> bool {
        let mut read = filter.clone();
        if self.exclusive_until
            && let Some(until) = filter.until
        {
            match until.as_secs().checked_sub(1) {
                Some(below) => read.until = Some(Timestamp::from(below)),
                None => return false,
            }
        }
        read.limit = None;
        read.match_event(event, nostr::filter::MatchEventOptions::new())
    }

    fn page(&self, filters: &[Filter]) -> Vec<Event> {
        let mut out: Vec<Event> = Vec::new();
        for filter in filters {
            let mut matching: Vec<&Event> = self
                .events
                .iter()
                .filter(|e| self.matches(filter, e))
                .collect();
            matching.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
            let ascending = match self.oldest_first {
                OldestFirst::Never => false,
                OldestFirst::WithoutLimit => filter.limit.is_none(),
                OldestFirst::Always => true,
            };
            if ascending {
                matching.reverse();
            }
            let cap = filter.limit.map_or(self.cap, |l| l.min(self.cap));
            for e in matching.into_iter().take(cap) {
                if !out.iter().any(|o| o.id == e.id) {
                    out.push(e.clone());
                }
            }
        }
        if self.merge_sorted {
            out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
            if self.oldest_first == OldestFirst::Always {
                out.reverse();
            }
        }
        if self.per_request {
            out.truncate(self.cap);
        }
        let draw = |seed: u64, id: EventId| {
            let mut hasher = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&(seed, id), &mut hasher);
            std::hash::Hasher::finish(&hasher)
        };
        if let Some(seed) = self.shuffled {
            out.sort_by_key(|e| draw(seed, e.id));
        }
        if let Some(seed) = self.duplicated {
            out = out
                .into_iter()
                .flat_map(|e| {
                    let times = if draw(seed, e.id) % 4 == 0 { 2 } else { 1 };
                    std::iter::repeat_n(e, times)
                })
                .collect();
        }
        out
    }

    fn matching(&self, filters: &[Filter]) -> BTreeSet<EventId> {
        self.events
            .iter()
            .filter(|e| {
                filters
                    .iter()
                    .any(|f| f.match_event(e, nostr::filter::MatchEventOptions::new()))
            })
            .map(|e| e.id)
            .collect()
    }
}

#[derive(Debug)]
struct Run {
    pages: usize,
    deliveries: usize,
    delivered: BTreeSet<EventId>,
    truncated: Vec<Truncation>,
    largest_req: usize,
}

/// Drives one walk, every REQ it asks for, to completion (bounded: a livelock fails).
fn drive(relay: &SimRelay, filters: Vec<Filter>, session: &mut RelayPageSession) -> Run {
    let mut run = Run {
        pages: 0,
        deliveries: 0,
        delivered: BTreeSet::new(),
        truncated: Vec::new(),
        largest_req: 0,
    };
    let mut queue = vec![GroupedPagination::new(filters, session)];
    while let Some(mut planner) = queue.pop() {
        run.pages += 1;
        assert!(run.pages <= 20_000, "pagination did not terminate");
        let filters = planner.current_filters();
        run.largest_req = run.largest_req.max(filters.len());
        for filter in &filters {
            assert_eq!(
                filter.limit,
                Some(session.page_limit()),
                "every page carries limit"
            );
        }
        let page = relay.page(&filters);
        for event in page {
            planner.handle_event(&event);
            run.deliveries += 1;
            run.delivered.insert(event.id);
        }
        match planner.handle_eose(session) {
            PageStep::Next(next) => queue.extend(next),
            PageStep::Complete { truncated } => run.truncated.extend(truncated),
        }
    }
    run
}

fn all_ids(events: &[Event]) -> BTreeSet<EventId> {
    events.iter().map(|e| e.id).collect()
}

fn session() -> RelayPageSession {
    RelayPageSession::new(PageHints::default())
}

/// Every matching event the walk did not deliver lies in a reported truncation.
fn assert_complete_or_reported(relay: &SimRelay, filters: &[Filter], run: &Run) {
    for id in relay.matching(filters).difference(&run.delivered) {
        let event = relay.events.iter().find(|e| e.id == *id).unwrap();
        let reported = run.truncated.iter().any(|cut| {
            cut.at == event.created_at
                && cut
                    .part
                    .match_event(event, nostr::filter::MatchEventOptions::new())
        });
        assert!(
            reported,
            "{id} at {} kind {} lost without a truncation: {} pages, {} delivered, {:?}",
            event.created_at.as_secs(),
            event.kind,
            run.pages,
            run.delivered.len(),
            run.truncated
                .iter()
                .map(|c| (
                    c.at.as_secs(),
                    c.part.kinds.clone(),
                    c.part.generic_tags.clone()
                ))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn threshold_is_ninety_percent_of_the_estimated_cap_never_below_ninety_nor_above_the_limit() {
    let check = |largest: usize, hints: PageHints, expected: usize| {
        let mut session = RelayPageSession::new(hints);
        session.observe_page(largest);
        assert_eq!(
            session.threshold(),
            expected,
            "largest {largest}, {hints:?}"
        );
    };
    let none = PageHints::default();
    let max = |limit| PageHints {
        max_limit: Some(limit),
        default_limit: None,
    };
    check(0, none, 90);
    check(100, none, 90);
    check(111, none, 99);
    check(500, none, 450);
    check(999, none, 450);
    check(0, max(1_000), 90);
    check(600, max(500), 450);
    check(0, max(50), 50);
    check(0, max(0), 90);
    check(2_000, max(usize::MAX), 1_800);
}

#[test]
fn the_page_limit_is_the_advertised_max_limit_else_default_limit_else_500() {
    let limit = |max_limit, default_limit| {
        RelayPageSession::new(PageHints {
            max_limit,
            default_limit,
        })
        .page_limit()
    };
    assert_eq!(limit(None, None), 500);
    assert_eq!(limit(Some(1_000), Some(100)), 1_000);
    assert_eq!(limit(None, Some(300)), 300);
    assert_eq!(limit(Some(1_000_000), None), MAX_PAGE_LIMIT);
}

#[test]
fn every_raw_delivery_counts_including_repeats() {
    let mut planner = GroupedPagination::new(vec![topic_filter("t")], &session());
    let repeated = event(1, 100, "t");
    for _ in 0..90 {
        assert!(planner.handle_event(&repeated));
    }
    assert!(!planner.handle_event(&event(2, 100, "other")));
    let mut session = session();
    // 90 deliveries in one second: before splitting around it, that second is read on its own
    // to learn how the relay reads `until`.
    let PageStep::Next(mut next) = planner.handle_eose(&mut session) else {
        panic!("the second is read again");
    };
    assert_eq!(next.len(), 1);
    let sent: Vec<Filter> = next[0].current_filters();
    let second = topic_filter("t")
        .since(Timestamp::from(100))
        .until(Timestamp::from(100));
    assert_eq!(sent, vec![second.limit(500)]);
    let mut probe = next.remove(0);
    for _ in 0..90 {
        probe.handle_event(&repeated);
    }
    // `until` is inclusive; the one-value filter cannot be split, and nothing yet says which
    // side of the second the relay left unread.
    let PageStep::Next(next) = probe.handle_eose(&mut session) else {
        panic!("the rest of the window goes on");
    };
    let sent: Vec<Vec<Filter>> = next.iter().map(|p| p.current_filters()).collect();
    assert_eq!(
        sent,
        vec![
            vec![topic_filter("t").until(Timestamp::from(99)).limit(500)],
            vec![topic_filter("t").since(Timestamp::from(101)).limit(500)],
        ]
    );
    assert_eq!(
        next[0].truncated,
        vec![Truncation {
            filter: topic_filter("t"),
            part: topic_filter("t"),
            at: Timestamp::from(100),
            delivered: 90,
        }]
    );
}

#[test]
fn a_same_second_boundary_inside_a_page_is_read_again() {
    // 150 events; the 100-event page boundary falls inside a second holding 20 events.
    let mut events: Vec<Event> = (0..130).map(|n| event(n, 1_000 - n, "t")).collect();
    events.extend((130..150).map(|n| event(n, 1_000 - 99, "t")));
    let relay = SimRelay::new(events.clone(), 100);
    let run = drive(&relay, vec![topic_filter("t")], &mut session());
    assert_eq!(run.delivered, all_ids(&events));
    assert!(run.truncated.is_empty());
}

#[test]
fn an_oldest_first_relay_is_walked_forward_with_since() {
    let events: Vec<Event> = (0..1_000).map(|n| event(n, 10_000 + n, "t")).collect();
    let relay = SimRelay {
        oldest_first: OldestFirst::Always,
        ..SimRelay::new(events.clone(), 250)
    };
    let mut session = session();
    let run = drive(&relay, vec![topic_filter("t")], &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert!(session.quirks().oldest_first);
    assert!(run.pages <= 6, "{} pages", run.pages);
}

/// A relay that picks the right page but sends it in no order: the order of its answers says
/// nothing about which end of the window it read, so neither end is taken for read.
#[test]
fn a_relay_sending_its_pages_in_no_order_is_walked_to_completion() {
    let events: Vec<Event> = (0..1_000).map(|n| event(n, 10_000 + n, "t")).collect();
    for oldest_first in [OldestFirst::Never, OldestFirst::Always] {
        for seed in 0..8 {
            let relay = SimRelay {
                oldest_first,
                shuffled: Some(seed),
                ..SimRelay::new(events.clone(), 250)
            };
            let mut session = session();
            let run = drive(&relay, vec![topic_filter("t")], &mut session);
            assert_eq!(
                run.delivered,
                all_ids(&events),
                "{oldest_first:?}, seed {seed}"
            );
            // A newest-first relay is never taken for an oldest-first one.
            if oldest_first == OldestFirst::Never {
                assert!(!session.quirks().oldest_first, "seed {seed}");
            }
        }
    }
}

/// A page sent in no order that steps between seconds only once or twice comes out sorted
/// by chance: such a page tells no order, so an unordered relay whose pages each hold a busy
/// second and a quiet one loses nothing, whichever end it reads.
#[test]
fn a_page_stepping_between_seconds_too_seldom_tells_no_order() {
    // Each page: 99 events in one second and one in the next.
    let mut events = Vec::new();
    for block in 0..12u64 {
        for i in 0..100u64 {
            let at = 10_000 + block * 3 + u64::from(i == 99);
            events.push(event(block * 100 + i, at, "t"));
        }
    }
    for oldest_first in [OldestFirst::Never, OldestFirst::Always] {
        for seed in 0..32 {
            let relay = SimRelay {
                oldest_first,
                shuffled: Some(seed),
                ..SimRelay::new(events.clone(), 100)
            };
            let run = drive(&relay, vec![topic_filter("t")], &mut session());
            let lost = all_ids(&events).difference(&run.delivered).count();
            assert_eq!(lost, 0, "{oldest_first:?}, seed {seed}: events lost");
        }
    }
}

/// An ordered relay's pages teach its order once they step between seconds often enough,
/// and later pages that step too seldom to tell go by what the session learned.
#[test]
fn an_ordered_relay_is_walked_by_its_learned_order_through_pages_that_tell_none() {
    // First 300 events one per second, then blocks of a busy second and a quiet one.
    let mut events: Vec<Event> = (0..300).map(|n| event(n, 20_000 - n, "t")).collect();
    for block in 0..6u64 {
        for i in 0..100u64 {
            let at = 19_000 - block * 3 - u64::from(i == 99);
            events.push(event(1_000 + block * 100 + i, at, "t"));
        }
    }
    let relay = SimRelay::new(events.clone(), 100);
    let mut session = session();
    let run = drive(&relay, vec![topic_filter("t")], &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert_eq!(session.known_order(), super::page::Order::NewestFirst);
    // Three pages of one event per second, then per block a page and its boundary second:
    // reading both ends of every block's page as well would take 27.
    assert!(run.pages <= 16, "{} pages", run.pages);
}

/// A relay that sends some events twice: a page counts each event once, so a duplicate never
/// raises the estimated cap above the relay's, and a later full page is still full.
#[test]
fn events_sent_twice_count_once_against_the_page() {
    // Two filters: the first page of each holds duplicates, the second is exactly the cap.
    let events: Vec<Event> = (0..600)
        .map(|n| event(n, 10_000 + n, if n % 2 == 0 { "a" } else { "b" }))
        .collect();
    for seed in 0..8 {
        let relay = SimRelay {
            duplicated: Some(seed),
            ..SimRelay::new(events.clone(), 100)
        };
        let mut session = session();
        let run = drive(
            &relay,
            vec![topic_filter("a"), topic_filter("b")],
            &mut session,
        );
        assert_eq!(run.delivered, all_ids(&events), "seed {seed}");
        assert_eq!(session.largest_page(), 100, "seed {seed}");
    }
}

#[test]
fn oldest_first_without_limit_costs_nothing_because_every_page_carries_limit() {
    let events: Vec<Event> = (0..1_000).map(|n| event(n, 10_000 + n, "t")).collect();
    let relay = SimRelay {
        oldest_first: OldestFirst::WithoutLimit,
        ..SimRelay::new(events.clone(), 250)
    };
    let mut session = session();
    let run = drive(&relay, vec![topic_filter("t")], &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert!(!session.quirks().oldest_first);
}

#[test]
fn exclusive_until_is_learned_and_the_boundary_second_read_on_its_own() {
    // Three events per second: every page boundary splits a second.
    let events: Vec<Event> = (0..600).map(|n| event(n, 5_000 - n / 3, "t")).collect();
    let relay = SimRelay {
        exclusive_until: true,
        ..SimRelay::new(events.clone(), 100)
    };
    let mut session = session();
    let run = drive(&relay, vec![topic_filter("t")], &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert!(session.quirks().exclusive_until);
    assert!(run.truncated.is_empty());
}

#[test]
fn a_400_event_second_over_40_values_is_split_until_each_part_fits_a_120_cap() {
    let topics: Vec<String> = (0..40).map(|n| format!("topic-{n}")).collect();
    let events: Vec<Event> = (0..400)
        .map(|n| event(n, 7_777, &topics[(n % 40) as usize]))
        .collect();
    let relay = SimRelay {
        exclusive_until: true,
        ..SimRelay::new(events.clone(), 120)
    };
    let filters = vec![Filter::new().hashtags(topics.clone())];
    let run = drive(&relay, filters.clone(), &mut session());
    assert_eq!(run.delivered, all_ids(&events));
    assert!(run.truncated.is_empty(), "{:?}", run.truncated);
}

#[test]
fn a_single_value_second_over_the_cap_is_reported_truncated_not_finished() {
    let events: Vec<Event> = (0..300).map(|n| event(n, 500, "t")).collect();
    let relay = SimRelay::new(events, 100);
    let run = drive(&relay, vec![topic_filter("t")], &mut session());
    assert_eq!(run.truncated.len(), 1);
    assert_eq!(run.truncated[0].at, Timestamp::from(500));
    assert_eq!(run.truncated[0].part, topic_filter("t"));
}

/// Ten topics `t0`..`t9` of 40, 70, … 310 events, newest first within each topic.
fn ten_topics() -> Vec<Event> {
    (0..10u64)
        .flat_map(|topic| {
            (0..(40 + topic * 30)).map(move |n| {
                event(
                    topic * 1_000 + n,
                    20_000 - n * 7 - topic,
                    &format!("t{topic}"),
                )
            })
        })
        .collect()
}

#[test]
fn a_per_request_cap_is_learned_and_ten_filters_are_paged_one_per_request() {
    let events = ten_topics();
    let relay = SimRelay {
        per_request: true,
        ..SimRelay::new(events.clone(), 150)
    };
    let filters: Vec<Filter> = (0..10).map(|t| topic_filter(&format!("t{t}"))).collect();
    let mut session = session();
    let run = drive(&relay, filters, &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert!(matches!(
        session.quirks().cap_scope,
        CapScope::PerRequest { cap: 150 }
    ));
    assert_eq!(session.filters_per_request(), Some(1));
}

/// A relay that caps whole REQs and sends some events twice: its REQ totals and proven
/// pages are counted in distinct events, so duplicates neither pass for a per-filter
/// allowance nor raise the learned per-REQ cap above the relay's.
#[test]
fn a_per_request_cap_is_learned_in_distinct_events_when_events_come_twice() {
    let events = ten_topics();
    let filters: Vec<Filter> = (0..10).map(|t| topic_filter(&format!("t{t}"))).collect();
    for seed in 0..16 {
        let relay = SimRelay {
            per_request: true,
            duplicated: Some(seed),
            ..SimRelay::new(events.clone(), 150)
        };
        let mut session = session();
        // A single filter first proves a cut page, as the walk of another REQ would.
        drive(&relay, vec![topic_filter("t9")], &mut session);
        let run = drive(&relay, filters.clone(), &mut session);
        let lost = all_ids(&events).difference(&run.delivered).count();
        assert_eq!(lost, 0, "seed {seed}: events lost");
        assert_eq!(
            session.quirks().cap_scope,
            CapScope::PerRequest { cap: 150 },
            "seed {seed}"
        );
    }
}

/// 40 events on each of three topics, one topic per second in turn.
fn three_topics() -> Vec<Event> {
    (0..3u64)
        .flat_map(|topic| {
            (0..40u64)
                .map(move |n| event(topic * 100 + n, 5_000 - n * 3 - topic, &format!("t{topic}")))
        })
        .collect()
}

/// Three short filters whose REQ reached the threshold in total: each may have been cut by a
/// cap on the whole REQ, so each is read on past what it got, all three in one REQ, not one
/// REQ each; on a relay that caps each filter that REQ brings only the boundary seconds again.
#[test]
fn short_filters_of_a_request_that_may_have_been_cut_are_read_on_together() {
    let events = three_topics();
    let relay = SimRelay::new(events.clone(), 100);
    let filters: Vec<Filter> = (0..3).map(|t| topic_filter(&format!("t{t}"))).collect();
    let mut session = session();
    let run = drive(&relay, filters, &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    // The first REQ, then one REQ reading on for all three (it was 1 + 3).
    assert_eq!(run.pages, 2, "{run:?}");
    assert_eq!(session.quirks().cap_scope, CapScope::Unknown);
}

/// The same filters on a relay that cuts the whole REQ at 90: reading on brings events the
/// first REQ cut, which teaches the per-REQ cap, and every event still arrives.
#[test]
fn reading_on_short_filters_teaches_a_per_request_cap_and_loses_nothing() {
    let events = three_topics();
    let relay = SimRelay {
        per_request: true,
        ..SimRelay::new(events.clone(), 90)
    };
    let filters: Vec<Filter> = (0..3).map(|t| topic_filter(&format!("t{t}"))).collect();
    let mut session = session();
    let run = drive(&relay, filters, &mut session);
    assert_eq!(run.delivered, all_ids(&events));
    assert_eq!(session.quirks().cap_scope, CapScope::PerRequest { cap: 90 });
}

#[test]
fn a_per_filter_relay_is_recognised_once_a_request_exceeds_a_proven_single_cap() {
    let a: Vec<Event> = (0..300).map(|n| event(n, 9_000 - n, "a")).collect();
    let b: Vec<Event> = (300..600).map(|n| event(n, 9_000 - n, "b")).collect();
    let relay = SimRelay::new([a.clone(), b.clone()].concat(), 100);
    let mut session = session();
    drive(&relay, vec![topic_filter("a")], &mut session);
    let run = drive(
        &relay,
        vec![topic_filter("a"), topic_filter("b")],
        &mut session,
    );
    assert_eq!(session.quirks().cap_scope, CapScope::PerFilter);
    assert_eq!(run.delivered, all_ids(&[a, b].concat()));
}

#[test]
fn an_advertised_max_limit_sets_the_limit_but_never_raises_the_threshold() {
    // The relay advertises 500 and serves 150: a 135-event filter next to a 150-cap proves
    // nothing, so every filter is paged until a page falls below the learned threshold.
    let a: Vec<Event> = (0..135).map(|n| event(n, 10_000 - n, "a")).collect();
    let b: Vec<Event> = (135..600).map(|n| event(n, 10_000 - n, "b")).collect();
    let relay = SimRelay::new([a.clone(), b.clone()].concat(), 150);
    let mut session = RelayPageSession::new(PageHints {
        max_limit: Some(500),
        default_limit: None,
    });
    let first = drive(&relay, vec![topic_filter("a")], &mut session);
    assert_eq!(first.delivered, all_ids(&a));
    let second = drive(&relay, vec![topic_filter("b")], &mut session);
    assert_eq!(second.delivered, all_ids(&b));
    assert_eq!(session.page_limit(), 500);
    assert_eq!(session.threshold(), 135);
}

#[test]
fn next_pages_stay_grouped_up_to_the_first_requests_filter_count() {
    let mut events: Vec<Event> = (0..200).map(|n| event(n, 1_000 - n, "a")).collect();
    events.extend((200..400).map(|n| event(n, 2_000 - n, "b")));
    events.extend((400..410).map(|n| event(n, 3_000 - n, "c")));
    let relay = SimRelay::new(events.clone(), 100);
    let filters = vec![topic_filter("a"), topic_filter("b"), topic_filter("c")];
    let run = drive(&relay, filters, &mut session());
    assert_eq!(run.delivered, all_ids(&events));
    assert!(run.largest_req <= 3);
}

#[test]
fn current_filters_are_empty_once_complete() {
    let planner = GroupedPagination::new(vec![topic_filter("t")], &session());
    assert_eq!(
        planner.current_filters(),
        vec![topic_filter("t").limit(DEFAULT_PAGE_LIMIT)]
    );
    let step = planner.handle_eose(&mut session());
    assert_eq!(
        step,
        PageStep::Complete {
            truncated: Vec::new()
        }
    );
}

#[test]
fn split_filter_halves_tags_then_kinds_then_authors() {
    let two_tags = Filter::new()
        .hashtags(["a", "b", "c"])
        .kinds([Kind::from(1), Kind::from(2)]);
    let [low, high] = split_filter(&two_tags).unwrap();
    assert_eq!(
        low,
        Filter::new()
            .hashtags(["a", "b"])
            .kinds([Kind::from(1), Kind::from(2)])
    );
    assert_eq!(
        high,
        Filter::new()
            .hashtag("c")
            .kinds([Kind::from(1), Kind::from(2)])
    );
    let [low, high] = split_filter(
        &Filter::new()
            .hashtag("a")
            .kinds([Kind::from(1), Kind::from(2)]),
    )
    .unwrap();
    assert_eq!(low, Filter::new().hashtag("a").kind(Kind::from(1)));
    assert_eq!(high, Filter::new().hashtag("a").kind(Kind::from(2)));
    assert_eq!(
        split_filter(&Filter::new().hashtag("a").kind(Kind::from(1))),
        None
    );
}

/// A relay's behaviour and data: clusters of same-second events over topics and kinds.
fn arb_relay() -> impl Strategy<Value = SimRelay> {
    let cluster = (0u64..40, 1usize..200, 0usize..6, 0u16..3);
    (
        prop::collection::vec(cluster, 1..12),
        prop::sample::select(vec![90usize, 100, 120, 150, 250, 500]),
        prop::sample::select(vec![
            OldestFirst::Never,
            OldestFirst::WithoutLimit,
            OldestFirst::Always,
        ]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
    )
        .prop_map(
            |(
                clusters,
                cap,
                oldest_first,
                exclusive_until,
                per_request,
                merge_sorted,
                shuffled,
                duplicated,
            )| {
                let mut events = Vec::new();
                let mut n = 0u64;
                for (second, size, topics, kinds) in clusters {
                    for i in 0..size {
                        n += 1;
                        let topic = format!("t{}", i % (topics + 1));
                        let kind = 1 + (i as u16 % (kinds + 1));
                        events.push(event_of(
                            n,
                            1_000 + second * 3 + (i as u64 % 2),
                            &topic,
                            kind,
                        ));
                    }
                }
                SimRelay {
                    events,
                    cap,
                    oldest_first,
                    exclusive_until,
                    per_request,
                    merge_sorted,
                    shuffled,
                    duplicated,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the relay's order, `until` semantics, cap kind and size, and however its
    /// events cluster in seconds, the walk delivers every matching event or reports the
    /// second and part it could not reach.
    #[test]
    fn the_walk_returns_the_matching_set_or_reports_truncation(
        relay in arb_relay(),
        groups in 1usize..4,
        hint in prop::option::of(prop::sample::select(vec![100usize, 500, 1_000])),
    ) {
        let filters: Vec<Filter> = (0..groups)
            .map(|g| {
                let topics: Vec<String> = (0..6).filter(|t| t % groups == g).map(|t| format!("t{t}")).collect();
                Filter::new().hashtags(topics).kinds([Kind::from(1), Kind::from(2), Kind::from(3)])
            })
            .collect();
        let mut session = RelayPageSession::new(PageHints { max_limit: hint, default_limit: None });
        let run = drive(&relay, filters.clone(), &mut session);
        assert_complete_or_reported(&relay, &filters, &run);
        for cut in &run.truncated {
            // A truncation is one value of one kind in one second, over the cap.
            prop_assert!(split_filter(&cut.part).is_none());
        }
    }
}
