//! A session's transmits: performed in the order decided, and nothing after a disconnect.

use nostr::{Filter, Kind, SubscriptionId};

use super::{Outbound, Transmits};

fn req(id: &str) -> Outbound {
    Outbound::Req {
        subscription_id: SubscriptionId::new(id),
        filters: vec![Filter::new().kind(Kind::GitPatch)],
    }
}

fn drain(transmits: &mut Transmits) -> Vec<Outbound> {
    std::iter::from_fn(|| transmits.poll_transmit()).collect()
}

#[test]
fn messages_are_performed_in_the_order_they_were_decided() {
    let mut transmits = Transmits::default();
    assert_eq!(transmits.poll_transmit(), None);
    assert!(transmits.push(req("a")));
    assert!(transmits.push(Outbound::Close(SubscriptionId::new("old"))));
    assert!(transmits.push(req("b")));

    assert_eq!(
        drain(&mut transmits),
        vec![
            req("a"),
            Outbound::Close(SubscriptionId::new("old")),
            req("b")
        ]
    );
    assert_eq!(transmits.poll_transmit(), None);
}

#[test]
fn nothing_queued_after_a_disconnect_is_kept() {
    let mut transmits = Transmits::default();
    assert!(transmits.push(Outbound::Close(SubscriptionId::new("live"))));
    assert!(transmits.push(Outbound::Disconnect));
    assert!(!transmits.push(req("late")), "the connection is ending");
    assert!(
        !transmits.push(Outbound::Disconnect),
        "one disconnect is enough"
    );

    assert_eq!(
        drain(&mut transmits),
        vec![
            Outbound::Close(SubscriptionId::new("live")),
            Outbound::Disconnect
        ]
    );
    assert!(
        !transmits.push(req("after")),
        "a drained disconnect still ends the session's queue"
    );
    assert_eq!(transmits.poll_transmit(), None);
}
