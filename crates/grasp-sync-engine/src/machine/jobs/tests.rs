//! Jobs are performed in the order decided; history slots bound the rounds running at once.

use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{Filter, Kind, SubscriptionId};

use super::{HaveSource, HistorySlots, Job, Jobs};
use crate::machine::transmit::SessionKey;

fn key(generation: u64) -> SessionKey {
    SessionKey {
        relay: RelayUrl::parse("wss://relay.example.com").expect("valid url"),
        generation,
    }
}

#[test]
fn jobs_are_performed_in_the_order_decided_with_the_session_that_asked() {
    let mut jobs = Jobs::default();
    assert_eq!(jobs.poll_job(), None);
    let filter = Filter::new().kind(Kind::GitPatch);
    let read = Job::ReadHaveSet {
        subscription_id: SubscriptionId::new("neg-2"),
        filter: filter.clone(),
        source: HaveSource::Store,
    };
    let round = Job::RunRound {
        subscription_id: SubscriptionId::new("neg-1"),
        filter: filter.clone(),
        have: Vec::new(),
        probe: true,
        holdings: false,
        learn: false,
    };
    let held = Job::ReadHeld {
        batch: BatchId(7),
        filters: vec![filter],
        max_held: 100,
    };
    jobs.push(key(1), read.clone());
    jobs.push(key(1), round.clone());
    jobs.push(key(2), held.clone());

    assert_eq!(jobs.poll_job(), Some((key(1), read)));
    assert_eq!(jobs.poll_job(), Some((key(1), round)));
    assert_eq!(jobs.poll_job(), Some((key(2), held)));
    assert_eq!(jobs.poll_job(), None);
}

#[test]
fn history_slots_bound_the_rounds_running_at_once() {
    let mut slots = HistorySlots::new(2);
    assert!(slots.try_take());
    assert!(slots.try_take());
    assert!(!slots.is_free());
    assert!(!slots.try_take(), "both slots are taken");

    slots.release();
    assert!(slots.is_free());
    assert!(slots.try_take(), "a released slot is free again");
    assert!(!slots.try_take());

    slots.release();
    slots.release();
    slots.release();
    assert!(slots.try_take());
    assert!(slots.try_take());
    assert!(
        !slots.try_take(),
        "a release with no slot taken is ignored: still two slots, not three"
    );
}
