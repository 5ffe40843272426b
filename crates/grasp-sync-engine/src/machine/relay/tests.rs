//! The relay machine's rules on injected time: a session's start and end, what it transmits,
//! when it next wants the clock, and which of its timers fire.

use std::time::{Duration, Instant};

use grasp_sync_filters::{GroupedPagination, PageHints, RelayPageSession};
use grasp_sync_health::{HealthConfig, HealthState, PauseKind, RelayHealth};
use grasp_sync_ledger::{PermitClass, StartKind};
use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{Filter, SubscriptionId};

use super::*;
use crate::machine::nip77::{NoNip77, RoundStart};
use crate::machine::session::QueuedStart;

type Machine = RelayMachine<(), ()>;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn key(generation: u64) -> SessionKey {
    SessionKey {
        relay: RelayUrl::parse("wss://relay.example.com").expect("valid url"),
        generation,
    }
}

fn machine(now: Instant) -> Machine {
    let config = HealthConfig {
        jitter_percent: 0,
        ..HealthConfig::default()
    };
    RelayMachine::new(RelayHealth::new(config, false, 1, now).expect("health"))
}

/// `machine` with the session of generation `generation`, connected at `now`.
fn connected(machine: &mut Machine, now: Instant, generation: u64) {
    machine.health.handle_connect_started(now);
    machine.health.handle_connected(now);
    machine.handle_session_started(SessionState::new(
        key(generation),
        now,
        RelayPageSession::new(PageHints::default()),
        false,
    ));
}

fn queued_start() -> QueuedStart {
    QueuedStart {
        subscription_id: SubscriptionId::new("h1"),
        batch: BatchId(1),
        class: PermitClass::HistoricPage,
        kind: StartKind::Historic,
        pagination: GroupedPagination::new(
            vec![Filter::new()],
            &RelayPageSession::new(PageHints::default()),
        ),
        exact: false,
    }
}

#[test]
fn a_session_start_counts_a_connection_and_drops_the_last_sessions_checks() {
    let now = Instant::now();
    let mut machine = machine(now);
    machine
        .timers
        .set(RelayTimer::CompletionCheck, now + secs(6));
    machine
        .timers
        .set(RelayTimer::CoverageRetry, now + secs(60));
    machine
        .timers
        .set(RelayTimer::DailyReconciliation, now + secs(86_400));

    connected(&mut machine, now, 1);

    assert_eq!(machine.stats.connections, 1);
    assert!(machine.session_of(&key(1)).is_some());
    assert_eq!(
        machine.timers.poll_timeout(),
        Some(now + secs(86_400)),
        "only the daily reconciliation outlives a session's start"
    );
}

#[test]
fn only_the_current_generation_finds_the_session() {
    let now = Instant::now();
    let mut machine = machine(now);
    assert!(machine.session_of(&key(1)).is_none());
    connected(&mut machine, now, 2);
    assert!(machine.session_of(&key(1)).is_none(), "an ended generation");
    assert!(machine.session_of_mut(&key(2)).is_some());
}

#[test]
fn a_session_end_clears_what_died_with_the_connection() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    machine.announcements_batch = Some(BatchId(3));
    machine
        .timers
        .set(RelayTimer::CompletionCheck, now + secs(6));
    machine
        .timers
        .set(RelayTimer::DailyReconciliation, now + secs(86_400));
    machine
        .session
        .as_mut()
        .expect("connected")
        .transmit
        .push(Outbound::Close(SubscriptionId::new("l1")));

    let later = now + secs(5);
    machine.handle_session_ended(later, "connection reset");

    assert!(machine.session.is_none());
    assert_eq!(machine.announcements_batch, None);
    assert_eq!(
        machine.poll_transmit(),
        None,
        "the ended session's queue ended with it"
    );
    assert_eq!(machine.timers.poll_timeout(), Some(now + secs(86_400)));
    assert_eq!(
        machine.stats.last_error.as_deref(),
        Some("connection reset")
    );
    assert_ne!(
        machine.health.state(later),
        HealthState::Healthy,
        "health learned of the disconnect"
    );
}

#[test]
fn transmits_come_out_in_the_order_decided_and_only_while_connected() {
    let now = Instant::now();
    let mut machine = machine(now);
    assert_eq!(machine.poll_transmit(), None);
    connected(&mut machine, now, 1);
    let session = machine.session.as_mut().expect("connected");
    session
        .transmit
        .push(Outbound::Close(SubscriptionId::new("a")));
    session.transmit.push(Outbound::Disconnect);

    assert_eq!(
        machine.poll_transmit(),
        Some(Outbound::Close(SubscriptionId::new("a")))
    );
    assert_eq!(machine.poll_transmit(), Some(Outbound::Disconnect));
    assert_eq!(machine.poll_transmit(), None);
}

#[test]
fn the_timeout_is_the_earliest_of_the_relays_and_the_sessions_timers() {
    let now = Instant::now();
    let mut machine = machine(now);
    assert_eq!(machine.poll_timeout(), None, "nothing armed");
    machine
        .timers
        .set(RelayTimer::DailyReconciliation, now + secs(86_400));
    assert_eq!(machine.poll_timeout(), Some(now + secs(86_400)));

    connected(&mut machine, now, 1);
    machine
        .session
        .as_mut()
        .expect("connected")
        .timers
        .set(SessionTimer::LiveRepair, now + secs(30));
    assert_eq!(machine.poll_timeout(), Some(now + secs(30)));

    machine.handle_session_ended(now + secs(1), "closed");
    assert_eq!(
        machine.poll_timeout(),
        Some(now + secs(86_400)),
        "the session's timers ended with it"
    );
}

#[test]
fn a_coverage_retry_waits_out_a_health_pause() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    machine.timers.set(RelayTimer::CoverageRetry, now + secs(5));
    assert!(!machine.take_coverage_retry(now), "not due yet");

    machine.health.handle_failure(PauseKind::Request, now);
    let paused = machine
        .health
        .sync_paused_until(now + secs(5))
        .expect("a request pause");
    assert!(paused > now + secs(5));
    assert!(!machine.take_coverage_retry(now + secs(5)), "paused");
    assert!(
        machine
            .timers
            .is_waiting(RelayTimer::CoverageRetry, now + secs(5)),
        "re-armed for the pause's end"
    );
    assert!(!machine.take_coverage_retry(paused - secs(1)));

    assert!(machine.take_coverage_retry(paused), "the pause is over");
    assert!(!machine.take_coverage_retry(paused), "fired once");
}

#[test]
fn a_live_repair_is_a_rebuild_only_when_one_was_deferred() {
    let now = Instant::now();
    let mut machine = machine(now);
    assert_eq!(machine.take_live_repair(now), None, "no session");
    connected(&mut machine, now, 1);
    let session = machine.session.as_mut().expect("connected");
    session.timers.set(SessionTimer::LiveRepair, now + secs(2));
    session.rebuild_pending = true;

    assert_eq!(machine.take_live_repair(now + secs(1)), None, "not due");
    assert_eq!(
        machine.take_live_repair(now + secs(2)),
        Some(LiveRepair::Rebuild)
    );
    assert_eq!(machine.take_live_repair(now + secs(2)), None, "fired once");

    let session = machine.session.as_mut().expect("connected");
    assert!(!session.rebuild_pending, "the deferred rebuild was taken");
    session.timers.set(SessionTimer::LiveRepair, now + secs(3));
    assert_eq!(
        machine.take_live_repair(now + secs(3)),
        Some(LiveRepair::Repair)
    );
}

#[test]
fn queued_starts_are_driven_unless_a_gate_asked_them_to_wait() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    assert!(!machine.wants_drive(now), "nothing queued");

    let session = machine.session.as_mut().expect("connected");
    session.queue.push_back(queued_start());
    session.timers.set(SessionTimer::GateWait, now + secs(1));
    assert!(!machine.wants_drive(now), "the gate asked to wait");
    assert!(machine.wants_drive(now + secs(1)), "the wait is over");
}

#[test]
fn a_relay_is_dialled_once_at_a_time_and_only_the_attempt_in_flight_counts() {
    let now = Instant::now();
    let mut machine = machine(now);
    assert_eq!(machine.handle_tick(now), Tick::MayDial);
    machine.handle_dial_queued(7);
    assert_eq!(
        machine.poll_dial(),
        Some(Dial {
            attempt: 7,
            purpose: DialPurpose::Session
        }),
        "handed to the dial workers"
    );
    assert_eq!(machine.poll_dial(), None, "once");
    assert_eq!(
        machine.handle_tick(now),
        Tick::Waiting,
        "attempt 7 in flight"
    );

    assert!(!machine.handle_dial_finished(6), "a stale attempt");
    assert_eq!(machine.dialing, Some(7));
    assert!(machine.handle_dial_finished(7));
    assert_eq!(machine.dialing, None);
}

#[test]
fn dials_and_jobs_come_out_in_the_order_decided_with_the_session_that_asked() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 3);
    machine.handle_dial_queued(1);
    machine.handle_lane_dial_queued(4);
    assert_eq!(
        std::iter::from_fn(|| machine.poll_dial())
            .map(|dial| (dial.attempt, dial.purpose))
            .collect::<Vec<_>>(),
        [(1, DialPurpose::Session), (4, DialPurpose::LiveOnly)],
        "the extra connection's dial says it holds live groups only"
    );

    let read = |n: u64| crate::machine::jobs::Job::ReadHeld {
        batch: BatchId(n),
        filters: vec![Filter::new()],
        max_held: 10,
    };
    machine.jobs.push(key(3), read(1));
    machine.jobs.push(key(3), read(2));
    let jobs: Vec<_> = std::iter::from_fn(|| machine.poll_job()).collect();
    assert_eq!(jobs, [(key(3), read(1)), (key(3), read(2))]);
    assert_eq!(machine.poll_job(), None);

    let round = crate::machine::jobs::Job::RunRound {
        subscription_id: SubscriptionId::new("neg-1"),
        filter: Filter::new(),
        have: Vec::new(),
        probe: false,
        holdings: false,
        learn: false,
    };
    machine.jobs.push(key(3), read(3));
    machine.jobs.push(key(3), round.clone());
    machine.jobs.push(key(3), round);
    assert_eq!(
        machine.abandon_jobs(),
        2,
        "a retired relay's unperformed rounds give their history slots back"
    );
    assert_eq!(machine.poll_job(), None, "nothing is performed after");
}

#[test]
fn a_failed_attempt_backs_off_before_the_next_dial() {
    let now = Instant::now();
    let mut machine = machine(now);
    machine.handle_dial_queued(1);
    machine.handle_dial_started(1, now);
    assert!(machine.handle_dial_finished(1));
    machine.handle_connect_failed(now, "refused".to_owned());

    assert_eq!(machine.stats.last_error.as_deref(), Some("refused"));
    assert_eq!(machine.handle_tick(now), Tick::Waiting, "backing off");
    let retry = machine
        .health
        .poll_timeout()
        .expect("health arms the next dial");
    assert_eq!(machine.handle_tick(retry), Tick::MayDial);
}

#[test]
fn a_connection_starts_the_ledger_under_the_advertised_budget_lowered_to_what_was_taught() {
    let now = Instant::now();
    let mut machine = machine(now);
    let advertised = Advertised {
        max_subscriptions: Some(20),
        max_filters: Some(5),
        nip77: NipListing::NotListed,
    };
    let budget = machine.handle_connected(now, advertised);
    assert_eq!(budget.slots(), 20);
    assert_eq!(
        machine.ledger.as_ref().map(|l| l.budget().slots()),
        Some(20)
    );
    assert_eq!(
        machine.learned.filter_ceiling(),
        5,
        "the advertised ceiling"
    );
    assert_eq!(
        machine.nip77.poll_round(),
        RoundStart::Off(NoNip77::NotListed),
        "its document lacks NIP-77"
    );
    let first = machine.ledger.as_ref().map(|l| l.generation());

    machine.learned_slots = Some(8);
    let later = now + secs(60);
    let budget = machine.handle_connected(later, advertised);
    assert_eq!(budget.slots(), 8, "a refusal taught fewer");
    assert_ne!(
        machine.ledger.as_ref().map(|l| l.generation()),
        first,
        "the ledger's next generation"
    );
    assert_eq!(
        machine.handle_tick(later),
        Tick::Waiting,
        "no dial while connecting"
    );
}

#[test]
fn a_connected_relay_retries_its_coverage_when_a_pause_ends() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    assert_eq!(
        machine.handle_tick(now),
        Tick::Connected { probe_due: false }
    );
    machine.health.handle_failure(PauseKind::Request, now);
    let until = machine
        .health
        .sync_paused_until(now)
        .expect("a request pause");
    assert_eq!(
        machine.handle_tick(until),
        Tick::Connected { probe_due: true }
    );
    assert!(machine.timers.is_due(RelayTimer::CoverageRetry, until));
}

#[test]
fn an_event_counts_for_its_exact_fetchs_hydration_and_the_relays_first_sync() {
    use grasp_sync_filters::RelayPageSession as Pages;
    use nostr::{EventBuilder, Keys};

    use crate::machine::neg_batch::NegBatch;
    use crate::machine::session::Transient;

    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    let event = EventBuilder::text_note("patch")
        .sign_with_keys(&Keys::generate())
        .expect("signed");
    let mut hydrating = NegBatch::rounds(Vec::new(), false, 100);
    hydrating.handle_round_diff([event.id]);
    hydrating.handle_rounds_done();
    machine.neg_batches.insert(BatchId(2), hydrating);
    let session = machine.session.as_mut().expect("connected");
    for (name, exact) in [("x1", true), ("h1", false)] {
        session.transients.insert(
            SubscriptionId::new(name),
            Transient {
                batch: BatchId(2),
                permit: None,
                pagination: GroupedPagination::new(
                    vec![Filter::new()],
                    &Pages::new(PageHints::default()),
                ),
                watchdog_closing: false,
                sent: 1,
                exact,
            },
        );
    }
    let progress = |machine: &Machine| {
        machine.neg_batches[&BatchId(2)]
            .hydration_progress()
            .map(|(_, delivered, _)| delivered)
    };

    machine.handle_event(&SubscriptionId::new("h1"), &event, false);
    assert_eq!(progress(&machine), Some(0), "not an exact fetch");
    assert!(machine.delivered.delivered_none_of(&[event.id]));

    machine.handle_event(&SubscriptionId::new("x1"), &event, true);
    assert_eq!(progress(&machine), Some(1));
    assert!(
        !machine.delivered.delivered_none_of(&[event.id]),
        "remembered during a new store's first sync"
    );
    assert_eq!(machine.stats.events_received, 2);
}

#[test]
fn an_unsaved_event_of_a_pending_page_keeps_its_batch_incomplete_and_any_other_is_recovered() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    machine.handle_connected(now, Advertised::default());
    let session = machine.session.as_mut().expect("connected");
    session.queue.push_back(queued_start());
    assert_eq!(machine.drive_history(now).started.len(), 1);
    let page = SubscriptionId::new("h1");
    let id = nostr::EventId::all_zeros();

    assert_eq!(
        machine.handle_unsaved(&page, id, |batch| batch == BatchId(1)),
        Unsaved::Batch(BatchId(1))
    );
    assert_eq!(
        machine
            .incomplete
            .unsaved_ids(BatchId(1))
            .map(|ids| ids.len()),
        Some(1)
    );
    assert_eq!(
        machine.handle_unsaved(&page, id, |_| false),
        Unsaved::Recover,
        "its batch is no longer pending"
    );
    assert_eq!(
        machine.handle_unsaved(&SubscriptionId::new("live"), id, |_| true),
        Unsaved::Recover,
        "not a page"
    );
    assert_eq!(machine.stats.unsaved_events, 3);
}

#[test]
fn a_page_the_watchdog_gave_up_frees_its_slot_once_its_close_was_sent() {
    let now = Instant::now();
    let mut machine = machine(now);
    connected(&mut machine, now, 1);
    machine.handle_connected(now, Advertised::default());
    machine
        .session
        .as_mut()
        .expect("connected")
        .queue
        .push_back(queued_start());
    assert_eq!(machine.drive_history(now).started.len(), 1);
    let page = SubscriptionId::new("h1");
    assert!(
        !machine.handle_close_sent(now, &page),
        "a CLOSE the watchdog did not send frees nothing"
    );

    let due = now + grasp_sync_ledger::WATCHDOG_TIMEOUT;
    let (session, ledger) = (
        machine.session.as_mut().expect("connected"),
        machine.ledger.as_mut().expect("a ledger"),
    );
    assert_eq!(session.handle_watchdog(ledger, due), [BatchId(1)]);
    assert_eq!(
        machine.held_subscriptions(),
        1,
        "held until the CLOSE is sent"
    );
    assert!(machine.handle_close_sent(due, &page));
    assert_eq!(machine.held_subscriptions(), 0);
}
