//! What the session's reader hands to rounds and what it leaves for the engine.

use std::borrow::Cow;

use nostr::{RelayMessage, SubscriptionId};

use super::{ROUTE_CAPACITY, RoundRoutes, RouteEnd};

fn sub(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

fn neg_msg(name: &str) -> RelayMessage<'static> {
    RelayMessage::NegMsg {
        subscription_id: Cow::Owned(sub(name)),
        message: Cow::Owned("61".to_owned()),
    }
}

fn closed(name: &str) -> RelayMessage<'static> {
    RelayMessage::Closed {
        subscription_id: Cow::Owned(sub(name)),
        message: Cow::Owned("error: no".to_owned()),
    }
}

#[test]
fn a_rounds_answers_go_to_it_alone() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("r")).expect("open");
    assert_eq!(routes.deliver(neg_msg("r")), None);
    assert_eq!(routes.deliver(closed("r")), None);
    assert_eq!(round.try_recv().ok(), Some(neg_msg("r")));
    assert_eq!(round.try_recv().ok(), Some(closed("r")));
    // Another ID's answers and an ordinary REQ's CLOSED are the engine's.
    assert_eq!(routes.deliver(neg_msg("other")), Some(neg_msg("other")));
    assert_eq!(routes.deliver(closed("req")), Some(closed("req")));
    let eose = RelayMessage::eose(sub("r"));
    assert_eq!(routes.deliver(eose.clone()), Some(eose));
    assert!(round.try_recv().is_err());
}

#[test]
fn a_notice_goes_to_the_engine_and_every_round() {
    let routes = RoundRoutes::default();
    let mut first = routes.open(&sub("a")).expect("open");
    let mut second = routes.open(&sub("b")).expect("open");
    let notice = RelayMessage::notice("ERROR: bad msg: unknown cmd");
    assert_eq!(routes.deliver(notice.clone()), Some(notice.clone()));
    assert_eq!(first.try_recv().ok(), Some(notice.clone()));
    assert_eq!(second.try_recv().ok(), Some(notice));
}

#[test]
fn a_round_that_falls_behind_loses_its_route() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("r")).expect("open");
    for _ in 0..ROUTE_CAPACITY {
        assert_eq!(routes.deliver(neg_msg("r")), None);
    }
    // One more than the route holds: the round would miss it, so the route goes.
    assert_eq!(routes.deliver(neg_msg("r")), None);
    for _ in 0..ROUTE_CAPACITY {
        assert!(round.try_recv().is_ok());
    }
    assert!(round.blocking_recv().is_none());
    assert_eq!(routes.end_of(), RouteEnd::AnswersLost);
}

#[test]
fn lost_messages_fail_every_round_in_progress() {
    let routes = RoundRoutes::default();
    let mut first = routes.open(&sub("a")).expect("open");
    let mut second = routes.open(&sub("b")).expect("open");
    routes.fail_all();
    assert!(first.blocking_recv().is_none());
    assert!(second.blocking_recv().is_none());
    assert_eq!(routes.end_of(), RouteEnd::AnswersLost);
    // The session goes on: a later round gets a route.
    assert!(routes.open(&sub("c")).is_some());
}

#[test]
fn after_the_reader_stops_no_round_gets_a_route() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("a")).expect("open");
    routes.end();
    assert!(round.blocking_recv().is_none());
    assert_eq!(routes.end_of(), RouteEnd::SessionEnded);
    assert!(routes.open(&sub("b")).is_none());
}

#[test]
fn a_closed_round_leaves_its_answers_to_the_engine() {
    let routes = RoundRoutes::default();
    let round = routes.open(&sub("r")).expect("open");
    routes.close(&sub("r"));
    drop(round);
    assert_eq!(routes.deliver(neg_msg("r")), Some(neg_msg("r")));
}
