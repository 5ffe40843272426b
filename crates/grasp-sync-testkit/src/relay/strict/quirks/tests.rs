//! Unit tests for `QueryQuirks::answer`: each switch alone, their combinations, and the
//! invariants every answer keeps, over a small fixed store.

use nostr::{Event, EventBuilder, Filter, Keys, Kind, Timestamp};
use proptest::prelude::*;

use super::{FilterCaps, QueryQuirks};

/// Caps for every case: 3 without `limit`, explicit limits up to 4.
const CAPS: FilterCaps = FilterCaps {
    default_limit: 3,
    max_limit: Some(4),
};

/// A kind-`kind` event whose content is `label`, at `created_at`, by one fixed key.
fn event(label: &str, created_at: u64, kind: u16) -> Event {
    let keys = Keys::parse("0000000000000000000000000000000000000000000000000000000000000001")
        .expect("fixed key");
    EventBuilder::new(Kind::from(kind), label)
        .custom_created_at(Timestamp::from_secs(created_at))
        .sign_with_keys(&keys)
        .expect("event signs")
}

/// Notes `a`..`f` (kind 1) at 10..60 and reactions `x`, `y` (kind 7) at 35 and 55.
fn store() -> Vec<Event> {
    let mut events: Vec<Event> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .zip(1..)
        .map(|(label, i)| event(label, i * 10, 1))
        .collect();
    events.push(event("x", 35, 7));
    events.push(event("y", 55, 7));
    events
}

fn notes() -> Filter {
    Filter::new().kind(Kind::TextNote)
}

fn reactions() -> Filter {
    Filter::new().kind(Kind::Reaction)
}

/// The labels `quirks` answers `filters` with over `store()`, space-separated in sending
/// order, compared with `expected`.
fn check(quirks: QueryQuirks, filters: Vec<Filter>, expected: &str) {
    let store = store();
    let got: Vec<String> = quirks
        .answer(&filters, &store, CAPS)
        .into_iter()
        .map(|e| e.content)
        .collect();
    assert_eq!(got.join(" "), expected, "{quirks:?} {filters:?}");
}

const OLDEST_FIRST: QueryQuirks = QueryQuirks {
    oldest_first_without_limit: true,
    exclusive_until: false,
    per_req_cap: None,
    no_eose_for_live: false,
    skip_live_every: None,
};

const EXCLUSIVE_UNTIL: QueryQuirks = QueryQuirks {
    oldest_first_without_limit: false,
    exclusive_until: true,
    per_req_cap: None,
    no_eose_for_live: false,
    skip_live_every: None,
};

fn per_req_cap(max: usize) -> QueryQuirks {
    QueryQuirks {
        per_req_cap: Some(max),
        ..QueryQuirks::default()
    }
}

#[test]
fn without_quirks_a_filter_gets_its_newest_matches_newest_first() {
    check(QueryQuirks::default(), vec![notes()], "f e d");
    check(QueryQuirks::default(), vec![notes().limit(2)], "f e");
}

#[test]
fn an_explicit_limit_is_cut_to_the_max_limit() {
    check(QueryQuirks::default(), vec![notes().limit(10)], "f e d c");
}

#[test]
fn without_quirks_until_and_since_are_inclusive() {
    let page = notes()
        .since(Timestamp::from_secs(20))
        .until(Timestamp::from_secs(40));
    check(QueryQuirks::default(), vec![page], "d c b");
}

#[test]
fn without_quirks_several_filters_merge_newest_first() {
    check(
        QueryQuirks::default(),
        vec![notes().limit(2), reactions()],
        "f y e x",
    );
}

#[test]
fn oldest_first_a_filter_without_limit_gets_its_oldest_matches_oldest_first() {
    check(OLDEST_FIRST, vec![notes()], "a b c");
    check(OLDEST_FIRST, vec![notes(), reactions()], "a b c x y");
}

#[test]
fn oldest_first_a_filter_with_limit_still_gets_its_newest_newest_first() {
    check(OLDEST_FIRST, vec![notes().limit(2)], "f e");
}

#[test]
fn oldest_first_a_req_mixing_both_kinds_of_filter_is_sent_newest_first() {
    check(OLDEST_FIRST, vec![notes(), reactions().limit(1)], "y c b a");
}

#[test]
fn oldest_first_a_limit_zero_filter_does_not_decide_the_order() {
    check(OLDEST_FIRST, vec![notes(), reactions().limit(0)], "a b c");
}

#[test]
fn exclusive_until_leaves_out_the_until_second() {
    let until = notes().until(Timestamp::from_secs(40));
    check(EXCLUSIVE_UNTIL, vec![until.clone()], "c b a");
    check(QueryQuirks::default(), vec![until], "d c b");
}

#[test]
fn exclusive_until_keeps_since_inclusive() {
    let page = notes()
        .since(Timestamp::from_secs(20))
        .until(Timestamp::from_secs(40));
    check(EXCLUSIVE_UNTIL, vec![page], "c b");
}

#[test]
fn the_per_req_cap_sums_over_the_filters() {
    let old = notes().until(Timestamp::from_secs(20)).limit(2);
    check(
        per_req_cap(4),
        vec![notes().limit(2), reactions().limit(2), old.clone()],
        "f y e x",
    );
    check(
        QueryQuirks::default(),
        vec![notes().limit(2), reactions().limit(2), old],
        "f y e x b a",
    );
}

#[test]
fn the_per_req_cap_counts_an_event_two_filters_match_once() {
    check(
        per_req_cap(4),
        vec![notes().limit(3), notes().limit(3)],
        "f e d",
    );
}

#[test]
fn the_per_req_cap_keeps_the_oldest_when_the_req_is_sent_oldest_first() {
    let quirks = QueryQuirks {
        per_req_cap: Some(4),
        ..OLDEST_FIRST
    };
    check(quirks, vec![notes(), reactions()], "a b c x");
}

#[test]
fn a_limit_zero_filter_gets_nothing() {
    check(QueryQuirks::default(), vec![notes().limit(0)], "");
    check(per_req_cap(2), vec![notes().limit(0), reactions()], "y x");
}

#[test]
fn a_filter_with_ids_and_no_limit_gets_one_result_per_id() {
    let store = store();
    let ids: Vec<_> = store.iter().take(5).map(|e| e.id).collect();
    check(
        QueryQuirks::default(),
        vec![Filter::new().ids(ids.clone())],
        "e d c b a",
    );
    check(OLDEST_FIRST, vec![Filter::new().ids(ids)], "a b c d e");
}

#[test]
fn every_switch_together() {
    let quirks = QueryQuirks {
        oldest_first_without_limit: true,
        exclusive_until: true,
        per_req_cap: Some(3),
        no_eose_for_live: true,
        skip_live_every: None,
    };
    let until = |secs| Timestamp::from_secs(secs);
    // Oldest first below 50: notes a b c (their cap) and x, of which the per-REQ cap keeps
    // three.
    check(
        quirks,
        vec![notes().until(until(50)), reactions().until(until(50))],
        "a b c",
    );
    // With a limit: the newest below 40, newest first.
    check(quirks, vec![notes().until(until(40)).limit(4)], "c b a");
}

#[test]
fn ties_are_sent_by_id_ascending_newest_first_and_descending_oldest_first() {
    let twins = vec![event("p", 100, 1), event("q", 100, 1), event("r", 100, 1)];
    let mut by_id = twins.clone();
    by_id.sort_by_key(|e| e.id);
    let labels = |events: Vec<Event>| events.into_iter().map(|e| e.content).collect::<Vec<_>>();
    let newest = QueryQuirks::default().answer(&[notes()], &twins, CAPS);
    assert_eq!(labels(newest), labels(by_id.clone()));
    let oldest = OLDEST_FIRST.answer(&[notes()], &twins, CAPS);
    by_id.reverse();
    assert_eq!(labels(oldest), labels(by_id));
}

#[test]
fn repeats_in_the_store_are_answered_once() {
    let store = store();
    let twice: Vec<&Event> = store.iter().chain(store.iter()).collect();
    let got = QueryQuirks::default().answer(&[notes().limit(4)], twice, CAPS);
    assert_eq!(got.len(), 4);
}

fn quirks_strategy() -> impl Strategy<Value = QueryQuirks> {
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(0usize..8),
        any::<bool>(),
    )
        .prop_map(|(oldest, exclusive, cap, live)| QueryQuirks {
            oldest_first_without_limit: oldest,
            exclusive_until: exclusive,
            per_req_cap: cap,
            no_eose_for_live: live,
            skip_live_every: None,
        })
}

fn filter_strategy() -> impl Strategy<Value = Filter> {
    (
        prop_oneof![Just(1u16), Just(7u16)],
        proptest::option::of(0usize..6),
        proptest::option::of(0u64..70),
    )
        .prop_map(|(kind, limit, until)| {
            let mut filter = Filter::new().kind(Kind::from(kind));
            filter.limit = limit;
            filter.until = until.map(Timestamp::from_secs);
            filter
        })
}

proptest! {
    /// Every answered event matches a filter, none repeats, no filter's cap or the per-REQ cap
    /// is exceeded, and the answer is in one of the two orders.
    #[test]
    fn answers_keep_their_caps_and_order(
        quirks in quirks_strategy(),
        filters in proptest::collection::vec(filter_strategy(), 0..4),
    ) {
        let store = store();
        let answer = quirks.answer(&filters, &store, CAPS);
        let caps_sum: usize = filters.iter().map(|f| CAPS.cap(f)).sum();
        prop_assert!(answer.len() <= caps_sum);
        if let Some(max) = quirks.per_req_cap {
            prop_assert!(answer.len() <= max);
        }
        for event in &answer {
            prop_assert!(filters.iter().any(|f| quirks.matches(f, event)));
        }
        let newest_first = answer.windows(2).all(|w| w[0] < w[1]);
        let oldest_first = answer.windows(2).all(|w| w[0] > w[1]);
        prop_assert!(newest_first || oldest_first);
    }
}
