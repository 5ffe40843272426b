//! The session's rules: which unanswered REQ a NOTICE answers, and how queued live groups are
//! sent, on injected time.

use std::time::Instant;

use grasp_sync_filters::{
    CoverageTier, FilterGroup, GroupedPagination, PageHints, PageStep, RelayPageSession,
    TieredFilter,
};
use grasp_sync_ledger::{PermitClass, ReleaseReason, SessionBudget, SubscriptionLedger};
use grasp_sync_model::BatchId;
use nostr::{Filter, Kind, SubscriptionId};

use super::*;
use crate::machine::unanswered::NoticeTarget;

type Session = SessionState<(), ()>;

fn session(now: Instant) -> Session {
    let key = SessionKey {
        relay: grasp_sync_model::RelayUrl::parse("wss://relay.example").expect("relay URL"),
        generation: 1,
    };
    SessionState::new(key, now, RelayPageSession::new(PageHints::default()), false)
}

fn id(n: u64) -> SubscriptionId {
    SubscriptionId::new(format!("s{n}"))
}

/// A live group of one filter, admitted by `ledger`, whose REQ waits in the live queue.
fn queue_live(session: &mut Session, ledger: &mut SubscriptionLedger, now: Instant, n: u64) {
    let filter = Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"));
    let group = FilterGroup {
        filters: vec![TieredFilter::new(filter, CoverageTier::Essential)],
        payload_bytes: 40,
    };
    let permit = ledger
        .admit_live(now, ledger.generation(), vec![id(n)])
        .expect("admitted")
        .remove(0);
    session.live.insert(
        id(n),
        LiveGroup {
            group: group.into(),
            permit,
            sent: UNSENT,
            history: None,
        },
    );
    session.live_queue.push_back(id(n));
}

#[test]
fn the_relay_answering_a_req_takes_it_off_the_unanswered_list_once() {
    let mut session = session(Instant::now());
    assert_eq!(session.next_sent(&id(1), 3), 1);
    assert_eq!(session.next_sent(&id(2), 1), 2);
    assert_eq!(session.handle_answer(&id(1)), Some(3));
    assert_eq!(session.handle_answer(&id(1)), None);
    assert_eq!(session.handle_answer(&id(2)), Some(1));
}

#[test]
fn an_auth_notice_answers_the_oldest_unanswered_req_and_a_limit_notice_the_newest_held() {
    let now = Instant::now();
    let mut session = session(now);
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    for n in 1..=4 {
        queue_live(&mut session, &mut ledger, now, n);
        session.next_sent(&id(n), 1);
    }
    // s1 was closed by a rebuild before the relay's answer to it arrived.
    session.live.remove(&id(1));
    assert_eq!(
        session.take_oldest_unanswered(),
        Some(NoticeTarget::Retired(id(1), 1))
    );
    assert_eq!(
        session.take_oldest_unanswered(),
        Some(NoticeTarget::Held(id(2)))
    );
    assert_eq!(session.take_newest_unanswered(), Some(id(4)));
    assert_eq!(session.take_newest_unanswered(), Some(id(3)));
    assert_eq!(session.take_newest_unanswered(), None);
}

#[test]
fn a_filter_count_notice_answers_the_widest_unanswered_req_held_the_newest_among_equals() {
    let now = Instant::now();
    let mut session = session(now);
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    for n in 1..=4 {
        queue_live(&mut session, &mut ledger, now, n);
    }
    // s1 and s3 went out with three filters, s2 with one, s4 with three but is no longer held.
    for (n, filters) in [(1, 3), (2, 1), (3, 3), (4, 3)] {
        session.next_sent(&id(n), filters);
    }
    session.live.remove(&id(4));
    assert_eq!(session.take_widest_unanswered(), Some(id(3)));
    assert_eq!(session.take_widest_unanswered(), Some(id(1)));
    // A REQ of one filter is never refused for its count.
    assert_eq!(session.take_widest_unanswered(), None);
    assert_eq!(session.take_newest_unanswered(), Some(id(2)));
}

#[test]
fn queued_live_groups_are_sent_in_order_and_a_retired_one_is_skipped() {
    let now = Instant::now();
    let mut session = session(now);
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    for n in 1..=3 {
        queue_live(&mut session, &mut ledger, now, n);
    }
    assert_eq!(
        session.held_subscriptions(),
        0,
        "nothing is on the wire yet"
    );
    session.live.remove(&id(2));
    let driven = session.drive_live(now);
    assert_eq!(driven.sent, 2);
    assert!(!driven.waiting && driven.rejected.is_none());
    let sent: Vec<SubscriptionId> = std::iter::from_fn(|| session.transmit.poll_transmit())
        .map(|m| match m {
            Outbound::Req {
                subscription_id, ..
            } => subscription_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sent, vec![id(1), id(3)]);
    assert_eq!(session.sent_order(&id(3)), Some(2));
    assert_eq!(session.held_subscriptions(), 2);
    assert_eq!(session.held_before(2), 1);
}

#[test]
fn without_a_cooldown_live_planning_is_not_deferred() {
    let now = Instant::now();
    let mut session = session(now);
    assert!(!session.defer_for_cooldown(now));
    assert_eq!(session.timers.poll_timeout(), None);
}

#[test]
fn during_a_query_rate_cooldown_queued_live_groups_wait_and_planning_is_deferred() {
    let now = Instant::now();
    let mut session = session(now);
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    queue_live(&mut session, &mut ledger, now, 1);
    session.reactive.handle_query_rate_refusal(now);
    let until = session.reactive.poll_timeout().expect("a cooldown");
    assert!(until > now);

    let driven = session.drive_live(now);
    assert_eq!(driven.sent, 0);
    assert!(driven.waiting);
    assert_eq!(session.live_queue.len(), 1, "the group still waits");
    assert!(session.transmit.poll_transmit().is_none());
    assert!(session.timers.is_waiting(SessionTimer::GateWait, now));

    assert!(session.defer_for_cooldown(now));
    assert!(session.timers.is_waiting(SessionTimer::LiveRepair, now));
    // Once the cooldown is over, the group goes out.
    let later = session.timers.poll_timeout().expect("a timer").max(until);
    assert_eq!(session.drive_live(later).sent, 1);
}

/// Everything the session queued for its connection, in order.
fn transmitted(session: &mut Session) -> Vec<Outbound> {
    std::iter::from_fn(|| session.transmit.poll_transmit()).collect()
}

/// A historic REQ of one filter for `batch`, admitted by `ledger` at `now` and in flight.
fn send_page(
    session: &mut Session,
    ledger: &mut SubscriptionLedger,
    now: Instant,
    n: u64,
    batch: u64,
) {
    let permit = ledger
        .acquire(now, ledger.generation(), PermitClass::HistoricPage, id(n))
        .expect("admitted");
    let sent = session.next_sent(&id(n), 1);
    let pages = RelayPageSession::new(PageHints::default());
    session.transients.insert(
        id(n),
        Transient {
            batch: BatchId(batch),
            permit: Some(permit),
            pagination: GroupedPagination::new(vec![Filter::new().kind(Kind::from(1617))], &pages),
            watchdog_closing: false,
            sent,
            exact: false,
        },
    );
}

#[test]
fn an_unanswered_page_gets_one_close_at_its_watchdog_and_its_batch_fails_once() {
    use grasp_sync_ledger::WATCHDOG_TIMEOUT;
    use std::time::Duration;

    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    let mut session = session(now);
    send_page(&mut session, &mut ledger, now, 1, 7);
    let later = now + Duration::from_secs(60);
    send_page(&mut session, &mut ledger, later, 2, 8);
    let before = now + WATCHDOG_TIMEOUT - Duration::from_secs(1);
    assert!(session.handle_watchdog(&mut ledger, before).is_empty());
    assert!(transmitted(&mut session).is_empty());
    let first = now + WATCHDOG_TIMEOUT;
    assert_eq!(session.handle_watchdog(&mut ledger, first), [BatchId(7)]);
    assert_eq!(transmitted(&mut session), [Outbound::Close(id(1))]);
    assert!(
        session.handle_watchdog(&mut ledger, first).is_empty(),
        "each page expires once"
    );
    assert!(
        session.transients[&id(1)].permit.is_some(),
        "its slot stays taken until the CLOSE was sent"
    );
    let free = ledger.residual();
    assert!(!session.handle_close_sent(&mut ledger, &id(2), first));
    assert!(session.handle_close_sent(&mut ledger, &id(1), first));
    assert_eq!(
        ledger.residual(),
        free + 1,
        "the CLOSE was sent: its slot is free"
    );
    assert!(!session.transients.contains_key(&id(1)));
    assert_eq!(
        session.handle_watchdog(&mut ledger, later + WATCHDOG_TIMEOUT),
        [BatchId(8)]
    );
    assert_eq!(transmitted(&mut session), [Outbound::Close(id(2))]);
}

#[test]
fn a_page_at_its_eose_is_closed_once_its_slot_released_and_its_walk_moved_on() {
    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    let mut session = session(now);
    let free = ledger.residual();
    send_page(&mut session, &mut ledger, now, 1, 7);
    assert_eq!(ledger.residual(), free - 1);
    let Some(Eose::Page(page)) = session.handle_eose(&mut ledger, &id(1), now) else {
        panic!("a page ended");
    };
    assert_eq!(page.batch, BatchId(7));
    assert_eq!(page.filters.len(), 1, "the filters its REQ carried");
    assert_eq!(
        page.filters[0].kinds,
        Some([Kind::from(1617)].into_iter().collect())
    );
    assert!(
        matches!(page.step, PageStep::Complete { ref truncated } if truncated.is_empty()),
        "an empty page ends its walk"
    );
    assert!(page.learned_quirks.is_empty());
    assert_eq!(ledger.residual(), free, "its slot is free again");
    assert_eq!(transmitted(&mut session), [Outbound::Close(id(1))]);
    assert!(
        session.handle_eose(&mut ledger, &id(1), now).is_none(),
        "a second EOSE proves nothing"
    );
}

#[test]
fn a_live_groups_eose_leaves_it_open() {
    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    let mut session = session(now);
    queue_live(&mut session, &mut ledger, now, 3);
    assert!(matches!(
        session.handle_eose(&mut ledger, &id(3), now),
        Some(Eose::Live { filters: 1 })
    ));
    assert!(session.live.contains_key(&id(3)));
    assert!(session.transmit.poll_transmit().is_none(), "no CLOSE");
}

/// A historic start of `batch` waiting in the session's queue.
fn queue_page(session: &mut Session, n: u64, batch: u64) {
    let pages = RelayPageSession::new(PageHints::default());
    session.queue.push_back(QueuedStart {
        subscription_id: id(n),
        batch: BatchId(batch),
        class: PermitClass::HistoricPage,
        kind: grasp_sync_ledger::StartKind::Historic,
        pagination: GroupedPagination::new(vec![Filter::new().kind(Kind::from(1617))], &pages),
        exact: false,
    });
}

#[test]
fn closing_a_batchs_pages_frees_their_slots_drops_its_queue_and_spares_the_rest() {
    use grasp_sync_ledger::WATCHDOG_TIMEOUT;

    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    let mut session = session(now);
    let free = ledger.residual();
    send_page(&mut session, &mut ledger, now, 1, 7);
    send_page(&mut session, &mut ledger, now, 2, 8);
    queue_page(&mut session, 3, 7);
    queue_page(&mut session, 4, 8);
    session.close_pages(&mut ledger, Some(BatchId(7)), now);
    assert_eq!(transmitted(&mut session), [Outbound::Close(id(1))]);
    assert_eq!(ledger.residual(), free - 1);
    assert_eq!(
        session
            .queue
            .iter()
            .map(|q| q.subscription_id.clone())
            .collect::<Vec<_>>(),
        [id(4)]
    );
    // A page the watchdog is closing keeps its slot until that CLOSE was sent.
    assert_eq!(
        session.handle_watchdog(&mut ledger, now + WATCHDOG_TIMEOUT),
        [BatchId(8)]
    );
    let _ = session.transmit.poll_transmit();
    session.close_pages(&mut ledger, None, now + WATCHDOG_TIMEOUT);
    assert!(
        session.transmit.poll_transmit().is_none(),
        "no second CLOSE"
    );
    assert!(session.queue.is_empty());
    assert_eq!(ledger.residual(), free - 1);
}

#[test]
fn a_page_or_live_group_the_relay_ended_gives_its_slot_back_once() {
    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    let mut session = session(now);
    let free = ledger.residual();
    send_page(&mut session, &mut ledger, now, 1, 7);
    queue_live(&mut session, &mut ledger, now, 2);
    assert_eq!(ledger.residual(), free - 2);
    session.release_page(&mut ledger, &id(1), ReleaseReason::Closed, now);
    session.release_page(&mut ledger, &id(1), ReleaseReason::Closed, now);
    session.retire_live(&mut ledger, &id(2), now);
    session.retire_live(&mut ledger, &id(2), now);
    assert_eq!(ledger.residual(), free);
    assert!(session.transients.is_empty() && session.live.is_empty());
    assert!(
        session.transmit.poll_transmit().is_none(),
        "the relay ended them"
    );
}

#[test]
fn a_retired_live_group_is_closed_only_if_its_req_was_sent() {
    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_slots(10));
    let mut session = session(now);
    let free = ledger.residual();
    queue_live(&mut session, &mut ledger, now, 1);
    queue_live(&mut session, &mut ledger, now, 2);
    // Group 1's REQ goes out; group 2's still waits.
    session.live.get_mut(&id(1)).expect("held").sent = 1;
    assert!(session.close_live(&mut ledger, &id(1), now));
    assert!(session.close_live(&mut ledger, &id(2), now));
    assert!(!session.close_live(&mut ledger, &id(2), now));
    assert_eq!(transmitted(&mut session), [Outbound::Close(id(1))]);
    assert_eq!(ledger.residual(), free);
    // Descendant groups are auxiliary; core ones stay.
    for n in 3..6 {
        queue_live(&mut session, &mut ledger, now, n);
    }
    for n in [3, 4] {
        let group = session.live.get_mut(&id(n)).expect("held");
        let mut filters = group.group.to_group();
        filters.filters[0].tier = CoverageTier::DescendantCanonical;
        group.group = filters.into();
        group.sent = n;
    }
    assert_eq!(session.close_auxiliary(&mut ledger, now), 2);
    assert_eq!(
        transmitted(&mut session),
        [Outbound::Close(id(3)), Outbound::Close(id(4))]
    );
    assert_eq!(session.live.keys().cloned().collect::<Vec<_>>(), [id(5)]);
}
