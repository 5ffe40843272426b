//! Tests of matching `OK` replies to waiters.

use std::collections::HashMap;

use nostr::EventId;
use tokio::sync::oneshot;

use super::{OkReply, Waiters, take_oldest};

#[test]
fn an_ok_goes_to_the_oldest_waiter_for_its_event_only() {
    let id = EventId::all_zeros();
    let (first, mut first_reply) = oneshot::channel::<OkReply>();
    let (second, mut second_reply) = oneshot::channel::<OkReply>();
    let mut waiters: Waiters = HashMap::new();
    waiters.entry(id).or_default().extend([first, second]);

    let reply = |message: &str| OkReply {
        accepted: true,
        message: message.to_owned(),
    };
    take_oldest(&mut waiters, &id)
        .expect("first waiter")
        .send(reply(""))
        .expect("send");
    assert_eq!(first_reply.try_recv().expect("first answered"), reply(""));
    assert!(second_reply.try_recv().is_err(), "second still waits");

    take_oldest(&mut waiters, &id)
        .expect("second waiter")
        .send(reply("duplicate: already have this event"))
        .expect("send");
    assert_eq!(
        second_reply.try_recv().expect("second answered").message,
        "duplicate: already have this event"
    );
    assert!(waiters.is_empty());
    assert!(take_oldest(&mut waiters, &id).is_none());
}
