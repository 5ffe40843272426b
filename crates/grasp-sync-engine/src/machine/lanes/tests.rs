//! The extra connections' rules: core coverage only, the fewest connections filled in order
//! within each one's budget, one dial at a time, at most three, a failure or close stops the
//! rest for the session, and what no connection may hold goes to the catch-up without bounds;
//! each connection authenticates on its own (NIP-42).

use std::time::{Duration, Instant};

use grasp_sync_filters::{CoverageTier, TieredFilter};
use grasp_sync_ledger::{LearnedLimits, SessionBudget};
use grasp_sync_model::RelayUrl;
use nostr::{Filter, SubscriptionId};

use super::{AuthNotice, Dialled, LaneSession, LaneStep, LiveLanes, MAX_CONNECTIONS_PER_RELAY};
use crate::machine::session_auth::AUTH_WAIT;
use crate::machine::transmit::{Outbound, SessionKey};

/// Five slots leave two live groups per connection; one filter per REQ.
const SLOTS: usize = 5;
const LIVE_PER_CONNECTION: usize = 2;

fn relay() -> RelayUrl {
    RelayUrl::parse("wss://relay.example.com").expect("valid url")
}

fn key(generation: u64) -> SessionKey {
    SessionKey {
        relay: relay(),
        generation,
    }
}

fn learned() -> LearnedLimits {
    let mut learned = LearnedLimits::new();
    learned.handle_advertised_filter_limit(1);
    learned
}

/// Live coverage of repository `d`, with a `since` so the catch-up's copy can be seen to drop it.
fn core(d: &str) -> TieredFilter {
    TieredFilter::new(
        Filter::new()
            .limit(0)
            .identifier(d)
            .since(nostr::Timestamp::from_secs(1)),
        CoverageTier::Essential,
    )
}

fn coverage(n: usize) -> Vec<TieredFilter> {
    (0..n).map(|i| core(&format!("repo-{i:03}"))).collect()
}

/// Lanes driven on a counter of subscription IDs, with helpers that play the driver.
struct Driver {
    lanes: LiveLanes,
    now: Instant,
    next_id: u64,
    next_attempt: u64,
}

impl Driver {
    fn new() -> Driver {
        Driver {
            lanes: LiveLanes::default(),
            now: Instant::now(),
            next_id: 0,
            next_attempt: 0,
        }
    }

    /// Offers what waits to the open connections; returns the REQs queued.
    fn fill(&mut self) -> usize {
        let counter = &mut self.next_id;
        let fill = self.lanes.fill(self.now, &learned(), || {
            *counter += 1;
            SubscriptionId::new(format!("live-{counter}"))
        });
        assert!(fill.refused.is_empty(), "{:?}", fill.refused);
        fill.opened
    }

    /// Asks for the next step; dials when asked and returns the attempt.
    fn step(&mut self, may_dial: bool) -> Step {
        match self.lanes.next_step(may_dial) {
            LaneStep::Wait => Step::Wait,
            LaneStep::CatchUp(filters) => Step::CatchUp(filters),
            LaneStep::Dial => {
                self.next_attempt += 1;
                self.lanes.handle_dial_started(self.next_attempt);
                Step::Dialled(self.next_attempt)
            }
        }
    }

    /// Connects `attempt` as session `generation`, holding no key, and fills it.
    fn connect(&mut self, attempt: u64, generation: u64) -> usize {
        self.connect_answering(attempt, generation, false)
    }

    /// Connects `attempt` as session `generation`, answering NIP-42 challenges when
    /// `answers_auth`, and fills it.
    fn connect_answering(&mut self, attempt: u64, generation: u64, answers_auth: bool) -> usize {
        let opened = self.lanes.handle_dialled(
            self.now,
            attempt,
            Some(LaneSession {
                key: key(generation),
                budget: SessionBudget::from_slots(SLOTS),
                answers_auth,
            }),
        );
        assert!(matches!(opened, Dialled::Opened { .. }), "{opened:?}");
        self.fill()
    }

    /// Expects a dial, connects it as session `generation` and drains what it queued.
    fn dial_and_connect(&mut self, generation: u64) {
        let Step::Dialled(attempt) = self.step(true) else {
            panic!("expected a dial");
        };
        self.connect(attempt, generation);
        self.reqs(generation);
    }

    /// Every REQ queued on connection `generation`, and drains its queue.
    fn reqs(&mut self, generation: u64) -> Vec<Outbound> {
        let mut sent = Vec::new();
        for (k, transmit) in self.lanes.transmits_mut() {
            if *k == key(generation) {
                sent.extend(std::iter::from_fn(|| transmit.poll_transmit()));
            }
        }
        sent
    }
}

#[derive(Debug, PartialEq)]
enum Step {
    Wait,
    Dialled(u64),
    CatchUp(Vec<Filter>),
}

fn unbounded(filters: &[TieredFilter]) -> Vec<Filter> {
    filters
        .iter()
        .map(|f| crate::machine::refused::without_bounds(&f.filter))
        .collect()
}

#[test]
fn only_new_core_coverage_waits_for_a_connection() {
    let mut lanes = LiveLanes::default();
    let descendant = TieredFilter::new(
        Filter::new().limit(0).identifier("d"),
        CoverageTier::DescendantCanonical,
    );
    assert!(!lanes.handle_overflow(vec![descendant]));
    assert!(!lanes.has_waiting());
    assert!(lanes.handle_overflow(vec![core("a")]));
    // The same filter again is nothing new.
    assert!(!lanes.handle_overflow(vec![core("a")]));
    assert!(lanes.has_waiting());
}

#[test]
fn one_dial_at_a_time_and_none_while_nothing_waits() {
    let mut driver = Driver::new();
    assert_eq!(driver.step(true), Step::Wait);
    driver.lanes.handle_overflow(coverage(1));
    assert_eq!(driver.step(true), Step::Dialled(1));
    assert!(driver.lanes.owns_attempt(1));
    driver.lanes.handle_overflow(coverage(5));
    assert_eq!(driver.step(true), Step::Wait, "a dial is in flight");
}

#[test]
fn connections_fill_in_order_within_their_budget_and_the_next_is_dialled_only_when_full() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(5));
    let Step::Dialled(first) = driver.step(true) else {
        panic!("expected a dial");
    };
    assert_eq!(driver.connect(first, 10), LIVE_PER_CONNECTION);
    let Step::Dialled(second) = driver.step(true) else {
        panic!("expected a second dial for the three left");
    };
    assert_eq!(driver.connect(second, 11), LIVE_PER_CONNECTION);
    let Step::Dialled(third) = driver.step(true) else {
        panic!("expected a third dial for the one left");
    };
    assert_eq!(driver.connect(third, 12), 1);
    assert_eq!(driver.step(true), Step::Wait, "everything is held");
    assert_eq!(driver.lanes.connected(), 3);
    assert_eq!(driver.lanes.live_groups(), 5);
    // The first connection holds the first two filters in filter order, each in a REQ of its own.
    let first_reqs = driver.reqs(10);
    let expected: Vec<Vec<Filter>> = coverage(2)
        .into_iter()
        .map(|f| vec![f.filter.clone()])
        .collect();
    let sent: Vec<Vec<Filter>> = first_reqs
        .into_iter()
        .map(|o| match o {
            Outbound::Req { filters, .. } => filters,
            other => panic!("only REQs: {other:?}"),
        })
        .collect();
    assert_eq!(sent, expected);
}

#[test]
fn equal_coverage_lands_on_equal_connections_whatever_order_it_arrives_in() {
    let placed = |order: Vec<TieredFilter>| -> Vec<Vec<Outbound>> {
        let mut driver = Driver::new();
        driver.lanes.handle_overflow(order);
        let mut held = Vec::new();
        for generation in 10.. {
            let Step::Dialled(attempt) = driver.step(true) else {
                break;
            };
            driver.connect(attempt, generation);
            held.push(driver.reqs(generation));
        }
        held
    };
    let mut reversed = coverage(5);
    reversed.reverse();
    assert_eq!(placed(coverage(5)), placed(reversed));
}

#[test]
fn at_most_three_extra_connections_then_the_rest_goes_to_the_catch_up_without_bounds() {
    let mut driver = Driver::new();
    let all = coverage(LIVE_PER_CONNECTION * (MAX_CONNECTIONS_PER_RELAY - 1) + 2);
    driver.lanes.handle_overflow(all.clone());
    for generation in 10..10 + (MAX_CONNECTIONS_PER_RELAY as u64 - 1) {
        let Step::Dialled(attempt) = driver.step(true) else {
            panic!("expected a dial");
        };
        driver.connect(attempt, generation);
    }
    let left = &all[all.len() - 2..];
    assert_eq!(driver.step(true), Step::CatchUp(unbounded(left)));
    assert!(!driver.lanes.has_waiting());
    assert_eq!(
        driver.lanes.live_groups(),
        LIVE_PER_CONNECTION * (MAX_CONNECTIONS_PER_RELAY - 1)
    );
}

#[test]
fn a_paused_relay_gets_no_dial_and_its_waiting_coverage_is_caught_up() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(1));
    assert_eq!(driver.step(false), Step::CatchUp(unbounded(&coverage(1))));
}

#[test]
fn a_failed_dial_opens_no_other_connection_this_session() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(3));
    let Step::Dialled(attempt) = driver.step(true) else {
        panic!("expected a dial");
    };
    assert_eq!(
        driver.lanes.handle_dialled(driver.now, attempt, None),
        Dialled::Failed
    );
    assert!(!driver.lanes.owns_attempt(attempt));
    assert_eq!(driver.step(true), Step::CatchUp(unbounded(&coverage(3))));
    // A report of an attempt these connections did not make is not theirs.
    assert_eq!(
        driver.lanes.handle_dialled(driver.now, 99, None),
        Dialled::Unknown
    );
}

#[test]
fn a_closed_connection_hands_back_its_coverage_disconnects_and_stops_further_dials() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(3));
    driver.dial_and_connect(10);
    let held = SubscriptionId::new("live-1");
    assert!(driver.lanes.holds(&key(10), &held));
    assert!(driver.lanes.owns_session(&key(10)));

    let mut closed = driver.lanes.close(&key(10)).expect("an open connection");
    assert_eq!(closed.key, key(10));
    assert_eq!(closed.coverage, unbounded(&coverage(2)));
    assert_eq!(closed.transmit.poll_transmit(), Some(Outbound::Disconnect));
    assert!(!driver.lanes.owns_session(&key(10)));
    assert!(driver.lanes.close(&key(10)).is_none(), "closed once");
    // The third filter still waited: no connection may open for it now.
    assert_eq!(
        driver.step(true),
        Step::CatchUp(unbounded(&coverage(3)[2..]))
    );
}

#[test]
fn closing_them_all_closes_every_live_group_and_forgets_what_waits() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(3));
    driver.dial_and_connect(10);
    let Step::Dialled(_dialling) = driver.step(true) else {
        panic!("expected a second dial");
    };

    let mut closed = driver.lanes.close_all();
    assert_eq!(
        closed.len(),
        1,
        "only open connections have anything to perform"
    );
    let last: Vec<Outbound> = std::iter::from_fn(|| closed[0].transmit.poll_transmit()).collect();
    assert_eq!(
        last,
        vec![
            Outbound::Close(SubscriptionId::new("live-1")),
            Outbound::Close(SubscriptionId::new("live-2")),
            Outbound::Disconnect,
        ]
    );
    assert!(closed[0].coverage.is_empty());
    assert!(!driver.lanes.has_waiting());
    assert_eq!(driver.lanes.connected(), 0);
    // A new session starts afresh: dials are allowed again.
    driver.lanes.handle_overflow(coverage(1));
    assert!(matches!(driver.step(true), Step::Dialled(_)));
}

#[test]
fn a_connection_dialled_for_coverage_holds_it_at_once_and_more_later() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(1));
    let Step::Dialled(attempt) = driver.step(true) else {
        panic!("expected a dial");
    };
    assert_eq!(driver.connect(attempt, 10), 1);
    driver.now += Duration::from_secs(60);
    driver.lanes.handle_overflow(vec![core("zzz")]);
    assert_eq!(driver.fill(), 1, "the open connection had one more slot");
    assert_eq!(driver.step(true), Step::Wait);
    assert_eq!(driver.lanes.live_groups(), 2);
}

/// One connection holding two groups, with a key when `answers_auth`; their REQs drained.
fn one_connection(answers_auth: bool) -> Driver {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(2));
    let Step::Dialled(attempt) = driver.step(true) else {
        panic!("expected a dial");
    };
    driver.connect_answering(attempt, 10, answers_auth);
    assert_eq!(driver.reqs(10).len(), 2);
    driver
}

#[test]
fn a_group_refused_for_auth_is_parked_on_its_connection_and_sent_again_once_it_authenticated() {
    let mut driver = one_connection(true);
    let first = SubscriptionId::new("live-1");
    driver.lanes.handle_auth_challenge(&key(10));
    assert!(
        driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &first)
    );
    assert_eq!(driver.lanes.poll_timeout(), Some(driver.now + AUTH_WAIT));
    assert_eq!(
        driver.lanes.live_groups(),
        2,
        "the parked group keeps its slot"
    );
    assert!(
        driver.reqs(10).is_empty(),
        "nothing is sent before the AUTH"
    );

    assert_eq!(driver.lanes.handle_authenticated(&key(10)), 1);
    assert_eq!(
        driver.reqs(10),
        vec![Outbound::Req {
            subscription_id: first.clone(),
            filters: vec![coverage(1)[0].filter.clone()],
        }]
    );
    assert_eq!(driver.lanes.poll_timeout(), None);
    // Refused again after authenticating: a refusal, never a loop.
    assert!(
        !driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &first)
    );
}

#[test]
fn without_a_key_an_auth_refusal_is_a_refusal() {
    let mut driver = one_connection(false);
    let first = SubscriptionId::new("live-1");
    assert!(
        !driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &first)
    );
    assert_eq!(driver.lanes.poll_timeout(), None);
}

#[test]
fn a_group_not_held_on_the_connection_is_never_parked() {
    let mut driver = one_connection(true);
    let elsewhere = SubscriptionId::new("live-99");
    assert!(
        !driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &elsewhere)
    );
    assert!(!driver.lanes.handle_auth_refusal(
        driver.now,
        &key(11),
        &SubscriptionId::new("live-1")
    ));
}

#[test]
fn a_connection_whose_auth_has_no_outcome_in_time_is_due_for_closing() {
    let mut driver = one_connection(true);
    driver.lanes.handle_auth_challenge(&key(10));
    assert!(
        driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &SubscriptionId::new("live-2"))
    );
    let deadline = driver.now + AUTH_WAIT;
    assert!(
        driver
            .lanes
            .poll_auth_expired(deadline - Duration::from_millis(1))
            .is_empty()
    );
    assert_eq!(driver.lanes.poll_auth_expired(deadline), vec![key(10)]);
    assert_eq!(driver.lanes.poll_timeout(), None, "reported once");
    let closed = driver.lanes.close(&key(10)).expect("open");
    assert_eq!(closed.coverage, unbounded(&coverage(2)));
}

#[test]
fn a_refusal_of_what_a_group_asks_costs_that_group_only() {
    use grasp_sync_health::RefusalCategory as C;
    for spares in [C::Blocked, C::Restricted, C::InvalidFilter, C::Invalid] {
        assert!(super::refusal_spares_connection(spares), "{spares:?}");
    }
    for closes in [
        C::RateLimited,
        C::TooManySubscriptions,
        C::TooManyConcurrentNeg,
        C::TooManyFilters,
        C::RetainedBytesExceeded,
        C::AuthRequired,
        C::Error,
        C::Unknown,
    ] {
        assert!(!super::refusal_spares_connection(closes), "{closes:?}");
    }

    let mut driver = one_connection(false);
    let refused = SubscriptionId::new("live-1");
    let group = driver
        .lanes
        .handle_refused_group(driver.now, &key(10), &refused)
        .expect("held");
    assert_eq!(group, coverage(1));
    assert!(!driver.lanes.holds(&key(10), &refused));
    assert!(driver.lanes.owns_session(&key(10)), "the connection stays");
    assert_eq!(driver.lanes.live_groups(), 1);
    assert!(driver.reqs(10).is_empty(), "the relay closed it already");
    assert!(
        driver
            .lanes
            .handle_refused_group(driver.now, &key(10), &refused)
            .is_none()
    );
    // Its slot is free again, and dials are still allowed.
    driver
        .lanes
        .handle_overflow(vec![core("zzz"), core("zzzz")]);
    assert_eq!(driver.fill(), 1);
    assert!(matches!(driver.step(true), Step::Dialled(_)));
}

#[test]
fn a_rebuilt_live_set_repacks_the_open_connections_without_a_new_handshake() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(coverage(4));
    for generation in [10, 11] {
        let Step::Dialled(attempt) = driver.step(true) else {
            panic!("expected a dial");
        };
        driver.connect(attempt, generation);
        driver.reqs(generation);
    }
    assert_eq!(driver.lanes.live_groups(), 4);

    // Rebuilt from scratch, the overflow is three filters, one of them new.
    driver.lanes.handle_repack(driver.now);
    assert_eq!(driver.lanes.connected(), 2, "both connections stay open");
    assert_eq!(driver.lanes.live_groups(), 0);
    let mut rebuilt = coverage(2);
    rebuilt.push(core("new"));
    driver.lanes.handle_overflow(rebuilt.clone());
    assert_eq!(driver.fill(), 3);
    assert_eq!(
        driver.step(true),
        Step::Wait,
        "no dial: the open connections hold it"
    );

    let closes = |sent: &[Outbound]| {
        sent.iter()
            .filter(|o| matches!(o, Outbound::Close(_)))
            .count()
    };
    let first = driver.reqs(10);
    let second = driver.reqs(11);
    // Each connection closes what it held before it opens what it holds now.
    assert_eq!((closes(&first), closes(&second)), (2, 2));
    assert!(matches!(
        first[..2],
        [Outbound::Close(_), Outbound::Close(_)]
    ));
    assert_eq!(first.len() + second.len() - 4, 3);
    assert!(
        first
            .iter()
            .chain(&second)
            .all(|o| o != &Outbound::Disconnect)
    );
}

#[test]
fn an_auth_notice_parks_the_oldest_unanswered_group_and_it_is_sent_again_once_authenticated() {
    let mut driver = one_connection(true);
    let (first, second) = (SubscriptionId::new("live-1"), SubscriptionId::new("live-2"));
    driver.lanes.handle_auth_challenge(&key(10));
    // Both REQs await an answer: a relay that wants an AUTH refuses each in order, so the
    // first NOTICE answers the first.
    assert_eq!(
        driver.lanes.handle_auth_notice(driver.now, &key(10)),
        AuthNotice::Parked
    );
    assert_eq!(driver.lanes.poll_timeout(), Some(driver.now + AUTH_WAIT));
    // The second REQ's EOSE comes: it was accepted, and nothing else awaits an answer, so a
    // further NOTICE refuses nothing of ours.
    driver.lanes.handle_eose(&key(10), &second);
    assert_eq!(
        driver.lanes.handle_auth_notice(driver.now, &key(10)),
        AuthNotice::Unmatched
    );
    assert!(driver.reqs(10).is_empty());

    assert_eq!(driver.lanes.handle_authenticated(&key(10)), 1);
    assert_eq!(
        driver.reqs(10),
        vec![Outbound::Req {
            subscription_id: first,
            filters: vec![coverage(2)[0].filter.clone()],
        }]
    );
    // Once authenticated, an authentication NOTICE is a refusal.
    assert_eq!(
        driver.lanes.handle_auth_notice(driver.now, &key(10)),
        AuthNotice::Refused
    );
}

#[test]
fn an_auth_notice_for_a_req_closed_since_parks_nothing() {
    // The relay refused a REQ the connection then closed (a repack) and replaced before the
    // NOTICE arrived: the NOTICE answers the closed one, and the new REQs, which the relay may
    // refuse for another reason, are not sent again after the AUTH.
    let mut driver = one_connection(true);
    driver.lanes.handle_auth_challenge(&key(10));
    driver.lanes.handle_repack(driver.now);
    driver.lanes.handle_overflow(coverage(2));
    assert_eq!(driver.fill(), 2);
    driver.reqs(10);
    for _ in 0..2 {
        assert_eq!(
            driver.lanes.handle_auth_notice(driver.now, &key(10)),
            AuthNotice::Unmatched
        );
    }
    assert_eq!(driver.lanes.handle_authenticated(&key(10)), 0);
    assert!(driver.reqs(10).is_empty());
}

#[test]
fn a_notice_then_a_closed_for_one_group_parks_it_once() {
    // nostrcheck-server answers with both; the group is sent again once, not twice.
    let mut driver = one_connection(true);
    let first = SubscriptionId::new("live-1");
    driver.lanes.handle_auth_challenge(&key(10));
    assert_eq!(
        driver.lanes.handle_auth_notice(driver.now, &key(10)),
        AuthNotice::Parked
    );
    assert!(
        driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &first)
    );
    assert_eq!(driver.lanes.handle_authenticated(&key(10)), 1);
    assert_eq!(driver.reqs(10).len(), 1);
}

#[test]
fn without_a_key_an_auth_notice_is_a_refusal() {
    let mut driver = one_connection(false);
    assert_eq!(
        driver.lanes.handle_auth_notice(driver.now, &key(10)),
        AuthNotice::Refused
    );
}

#[test]
fn a_connection_whose_parked_groups_all_left_is_not_closed_when_its_auth_times_out() {
    let mut driver = one_connection(true);
    let first = SubscriptionId::new("live-1");
    driver.lanes.handle_auth_challenge(&key(10));
    assert!(
        driver
            .lanes
            .handle_auth_refusal(driver.now, &key(10), &first)
    );
    // A rebuild repacks the connection: the parked group is closed with the rest.
    driver.lanes.handle_repack(driver.now);
    let deadline = driver.now + AUTH_WAIT;
    assert!(driver.lanes.poll_auth_expired(deadline).is_empty());
}

/// Live coverage of several repositories in one filter, shaped as [`core`]'s.
fn core_over(ds: &[&str]) -> TieredFilter {
    TieredFilter::new(
        Filter::new()
            .limit(0)
            .identifiers(ds.iter().copied())
            .since(nostr::Timestamp::from_secs(1)),
        CoverageTier::Essential,
    )
}

#[test]
fn coverage_the_connections_hold_in_another_packing_does_not_wait_again() {
    let mut driver = Driver::new();
    driver.lanes.handle_overflow(vec![core("a"), core("b")]);
    driver.dial_and_connect(10);
    assert!(!driver.lanes.has_waiting(), "the connection holds both");
    // One filter over both values, packed unlike the two held.
    assert!(!driver.lanes.handle_overflow(vec![core_over(&["b", "a"])]));
    assert!(!driver.lanes.has_waiting());
    // Only the value no connection holds waits.
    assert!(driver.lanes.handle_overflow(vec![core_over(&["a", "c"])]));
    assert_eq!(driver.lanes.unplaced, vec![core_over(&["c"])]);
}
