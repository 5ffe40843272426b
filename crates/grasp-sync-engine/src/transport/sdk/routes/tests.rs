//! What the session's round reader hands to each round.

use std::borrow::Cow;

use nostr::{RelayMessage, SubscriptionId};
use tokio::sync::mpsc::Receiver;
use tokio::sync::mpsc::error::TryRecvError;

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

/// Whether the route behind `round` is gone (after what it already holds).
fn dropped(round: &mut Receiver<RelayMessage<'static>>) -> bool {
    loop {
        match round.try_recv() {
            Ok(_) => continue,
            Err(TryRecvError::Disconnected) => return true,
            Err(TryRecvError::Empty) => return false,
        }
    }
}

#[test]
fn a_rounds_answers_go_to_it_alone() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("r")).expect("open");
    let mut other = routes.open(&sub("o")).expect("open");
    routes.deliver(&neg_msg("r"));
    routes.deliver(&closed("r"));
    routes.deliver(&RelayMessage::eose(sub("r")));
    routes.deliver(&closed("req"));
    assert_eq!(round.try_recv().ok(), Some(neg_msg("r")));
    assert_eq!(round.try_recv().ok(), Some(closed("r")));
    assert_eq!(round.try_recv().err(), Some(TryRecvError::Empty));
    assert_eq!(other.try_recv().err(), Some(TryRecvError::Empty));
}

#[test]
fn a_notice_goes_to_every_round() {
    let routes = RoundRoutes::default();
    let mut first = routes.open(&sub("a")).expect("open");
    let mut second = routes.open(&sub("b")).expect("open");
    let notice = RelayMessage::notice("ERROR: bad msg: unknown cmd");
    routes.deliver(&notice);
    assert_eq!(first.try_recv().ok(), Some(notice.clone()));
    assert_eq!(second.try_recv().ok(), Some(notice));
}

#[test]
fn a_round_that_falls_behind_loses_its_route() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("r")).expect("open");
    let mut notified = routes.open(&sub("n")).expect("open");
    for _ in 0..ROUTE_CAPACITY {
        routes.deliver(&neg_msg("r"));
    }
    assert!(!dropped(&mut notified));
    assert_eq!(routes.end_of(), RouteEnd::AnswersLost);
    // One more than the route holds: the round would miss it, so the route goes.
    routes.deliver(&neg_msg("r"));
    assert!(dropped(&mut round));
    // The same for a NOTICE; a round with room keeps its route.
    for _ in 0..ROUTE_CAPACITY {
        routes.deliver(&RelayMessage::notice("busy"));
    }
    assert!(!dropped(&mut notified));
    let mut full = routes.open(&sub("f")).expect("open");
    for _ in 0..=ROUTE_CAPACITY {
        routes.deliver(&RelayMessage::notice("busy"));
    }
    assert!(dropped(&mut full));
}

#[test]
fn lost_messages_fail_every_round_in_progress() {
    let routes = RoundRoutes::default();
    let mut first = routes.open(&sub("a")).expect("open");
    let mut second = routes.open(&sub("b")).expect("open");
    routes.fail_all();
    assert!(dropped(&mut first));
    assert!(dropped(&mut second));
    assert_eq!(routes.end_of(), RouteEnd::AnswersLost);
    // The session goes on: a later round gets a route.
    assert!(routes.open(&sub("c")).is_some());
}

#[test]
fn after_the_reader_stops_no_round_gets_a_route() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("a")).expect("open");
    routes.end();
    assert!(dropped(&mut round));
    assert_eq!(routes.end_of(), RouteEnd::SessionEnded);
    assert!(routes.open(&sub("b")).is_none());
}

#[test]
fn a_round_that_ends_or_is_dropped_leaves_no_route() {
    let routes = RoundRoutes::default();
    let mut round = routes.open(&sub("r")).expect("open");
    drop(routes.closing(sub("r")));
    assert!(dropped(&mut round));
    assert!(routes.is_empty());
}
