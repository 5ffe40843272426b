//! A relay's refusals as machine inputs, on injected time: a CLOSED of retired work, the
//! AUTH and budget remedies, health's judgement with what it teaches, the NOTICE that answers
//! an unanswered REQ, and a NEG-ERR for the query rate.

use std::time::Instant;

use grasp_sync_filters::{CoverageTier, FilterGroup, TieredFilter};
use grasp_sync_ledger::LivePlan;
use nostr::{Kind, SubscriptionId};

use super::*;
use crate::machine::live_plan::PlanOutcome;
use crate::machine::nip77::NipListing;
use crate::machine::refused::without_bounds;
use crate::machine::relay::testing;
use crate::machine::session_auth::SessionAuth;

type Machine = RelayMachine<(), ParkedWork>;

fn connected(now: Instant) -> Machine {
    testing::connected(now, 20, NipListing::Unknown)
}

/// The same, with a key: `auth-required:` refusals are parked for the session's AUTH.
fn connected_with_key(now: Instant) -> Machine {
    let mut machine = connected(now);
    machine.session.as_mut().expect("connected").auth = SessionAuth::new(true);
    machine
}

fn id(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

fn filter(n: u64) -> Filter {
    Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"))
}

/// Starts history page `name` of `batch` over `filters` at `now`.
fn start_page(machine: &mut Machine, now: Instant, name: &str, batch: u64, filters: Vec<Filter>) {
    testing::queue_page(machine, name, batch, filters);
    let drive = machine.drive_history(now);
    assert_eq!(drive.started.len(), 1, "the page starts");
    testing::transmitted(machine);
}

/// Opens one live group of `filters` per name at `now`.
fn open_live(machine: &mut Machine, now: Instant, groups: Vec<(&str, Vec<Filter>)>) {
    let (ids, open): (Vec<_>, Vec<_>) = groups
        .into_iter()
        .map(|(name, filters)| {
            let group = FilterGroup {
                filters: filters
                    .into_iter()
                    .map(|f| TieredFilter::new(f, CoverageTier::Essential))
                    .collect(),
                payload_bytes: 40,
            };
            (id(name), group)
        })
        .unzip();
    let plan = LivePlan {
        open,
        ..LivePlan::default()
    };
    let applied = machine.apply_live_plan(now, plan, ids);
    assert_eq!(applied.outcome, PlanOutcome::Applied);
    testing::transmitted(machine);
}

/// `filters` without the page's limit and bounds.
fn unbounded(filters: &[Filter]) -> Vec<Filter> {
    filters.iter().map(without_bounds).collect()
}

fn no_discovery(_: BatchId) -> Option<RefusalScope> {
    None
}

fn judged(answer: ClosedAnswer) -> Judged {
    match answer.outcome {
        ClosedOutcome::Judged(judged) => judged,
        other => panic!("not judged by health: {other:?}"),
    }
}

#[test]
fn a_refusal_of_a_retired_subscription_pauses_nothing_but_may_lower_the_ceiling() {
    let now = Instant::now();
    let mut machine = connected(now);
    let ceiling = machine.learned.filter_ceiling();

    let answer = machine.handle_closed(
        now,
        &id("gone"),
        "error: too many filters",
        Some(ceiling),
        no_discovery,
    );

    assert!(
        !answer.counted,
        "a stale refusal is not a refusal of held work"
    );
    let ClosedOutcome::Retired {
        stale,
        ceiling: lowered,
    } = answer.outcome
    else {
        panic!("not retired: {:?}", answer.outcome);
    };
    assert!(stale);
    assert_eq!(machine.stats.stale_refusals, 1);
    assert!(machine.stats.refusals.is_empty());
    assert!(lowered.is_some_and(|c| c < ceiling), "{lowered:?}");
    assert_eq!(Some(machine.learned.filter_ceiling()), lowered);
    assert_eq!(machine.health.sync_paused_until(now), None);

    // An answer without a message (the relay ended a page it had sent) is not stale.
    let answer = machine.handle_closed(now, &id("gone"), "", None, no_discovery);
    assert!(matches!(
        answer.outcome,
        ClosedOutcome::Retired {
            stale: false,
            ceiling: None
        }
    ));
    assert_eq!(machine.stats.stale_refusals, 1);
}

#[test]
fn an_auth_required_page_is_parked_while_the_auth_may_succeed() {
    let now = Instant::now();
    let mut machine = connected_with_key(now);
    start_page(&mut machine, now, "h1", 7, vec![filter(1)]);
    assert_eq!(machine.held_subscriptions(), 1);

    let answer = machine.handle_closed(
        now,
        &id("h1"),
        "auth-required: we only serve members",
        None,
        no_discovery,
    );

    assert!(answer.counted);
    assert!(matches!(
        answer.outcome,
        ClosedOutcome::Parked(AuthParked::Page { batch: BatchId(7) })
    ));
    assert_eq!(
        machine.held_subscriptions(),
        0,
        "the page's slot is given back"
    );
    assert_eq!(machine.health.sync_paused_until(now), None, "no pause");
    assert!(machine.refused.is_empty(), "nothing refused by policy");
    let session = machine.session.as_mut().expect("connected");
    let parked = session.auth.handle_authenticated();
    let [ParkedWork::Coverage(filters)] = parked.as_slice() else {
        panic!("not parked as coverage: {parked:?}");
    };
    assert_eq!(unbounded(filters), [filter(1)]);
}

#[test]
fn an_auth_required_page_without_a_key_pauses_only_its_coverage() {
    let now = Instant::now();
    let mut machine = connected(now);
    start_page(&mut machine, now, "h1", 7, vec![filter(1)]);

    let judged = judged(machine.handle_closed(
        now,
        &id("h1"),
        "auth-required: we only serve members",
        None,
        no_discovery,
    ));

    assert_eq!(judged.refused_coverage, Some(CoverageRefused::Paused));
    assert!(machine.refused.is_paused(now, &filter(1)));
    assert_eq!(
        judged.consequence,
        Consequence::FailBatch {
            batch: BatchId(7),
            rebuild_live: false
        }
    );
    assert_eq!(
        machine.health.sync_paused_until(now),
        None,
        "the relay goes on"
    );
}

#[test]
fn a_discovery_refused_for_auth_stays_in_its_batch() {
    let now = Instant::now();
    let mut machine = connected_with_key(now);
    start_page(&mut machine, now, "id1", 3, vec![filter(1)]);

    let answer = machine.handle_closed(
        now,
        &id("id1"),
        "auth-required: members only",
        None,
        |batch| (batch == BatchId(3)).then_some(RefusalScope::Identity),
    );

    assert!(matches!(
        answer.outcome,
        ClosedOutcome::Parked(AuthParked::Discovery)
    ));
    assert_eq!(machine.held_subscriptions(), 0);
    let session = machine.session.as_mut().expect("connected");
    let parked = session.auth.handle_authenticated();
    let [
        ParkedWork::Discovery {
            batch,
            subscription_id,
            filters,
        },
    ] = parked.as_slice()
    else {
        panic!("not parked as a discovery: {parked:?}");
    };
    assert_eq!((*batch, subscription_id), (BatchId(3), &id("id1")));
    assert_eq!(unbounded(filters), [filter(1)]);
}

#[test]
fn too_many_subscriptions_teaches_the_count_held_before_the_refused_req() {
    let now = Instant::now();
    let mut machine = connected(now);
    let groups = (1..=6)
        .map(|n| {
            (
                ["l1", "l2", "l3", "l4", "l5", "l6"][n - 1],
                vec![filter(n as u64)],
            )
        })
        .collect();
    open_live(&mut machine, now, groups);

    let answer = machine.handle_closed(
        now,
        &id("l6"),
        "error: too many subscriptions",
        None,
        no_discovery,
    );

    let ClosedOutcome::BudgetLearned(budget) = answer.outcome else {
        panic!("no budget learned: {:?}", answer.outcome);
    };
    assert_eq!(
        budget.learned, 5,
        "five were held when the sixth was refused"
    );
    assert_eq!(machine.learned_slots, Some(5));
    assert_eq!(
        machine.health.sync_paused_until(now),
        None,
        "the budget is the remedy"
    );
}

#[test]
fn too_many_subscriptions_under_the_smallest_budget_is_judged_by_health() {
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 4, NipListing::Unknown);
    open_live(&mut machine, now, vec![("l1", vec![filter(1)])]);

    let answer = machine.handle_closed(
        now,
        &id("l1"),
        "error: too many subscriptions",
        None,
        no_discovery,
    );

    assert!(
        matches!(answer.outcome, ClosedOutcome::Judged(_)),
        "{answer:?}"
    );
    assert_eq!(machine.learned_slots, None);
}

#[test]
fn a_rate_limited_page_fails_its_batch_under_the_cooldown() {
    let now = Instant::now();
    let mut machine = connected(now);
    start_page(&mut machine, now, "h1", 7, vec![filter(1)]);

    let judged = judged(machine.handle_closed(
        now,
        &id("h1"),
        "rate-limited: slow down",
        None,
        no_discovery,
    ));

    assert_eq!(
        judged.consequence,
        Consequence::FailBatch {
            batch: BatchId(7),
            rebuild_live: false
        }
    );
    assert_eq!(judged.retry_discovery, None);
    let paused = machine.health.sync_paused_until(now).expect("a rate pause");
    let session = machine.session.as_ref().expect("connected");
    assert_eq!(
        session.reactive.poll_timeout(),
        Some(paused),
        "the reactive cooldown ends with the pause"
    );
    assert_eq!(machine.stats.refusals.get("rate_limited"), Some(&1));
}

#[test]
fn a_rate_limited_discovery_is_asked_again_under_the_pause() {
    let now = Instant::now();
    let mut machine = connected(now);
    start_page(&mut machine, now, "mb1", 4, vec![filter(1)]);

    let judged =
        judged(
            machine.handle_closed(now, &id("mb1"), "rate-limited: slow down", None, |_| {
                Some(RefusalScope::Mailbox)
            }),
        );

    assert_eq!(judged.retry_discovery, Some(BatchId(4)));
}

#[test]
fn a_byte_cap_refusal_of_a_live_group_rebuilds_within_the_learned_cap() {
    let now = Instant::now();
    let mut machine = connected(now);
    open_live(&mut machine, now, vec![("l1", vec![filter(1)])]);

    let judged = judged(machine.handle_closed(
        now,
        &id("l1"),
        "error: active subscriptions exceed max size 65536 bytes",
        None,
        no_discovery,
    ));

    assert_eq!(judged.learned.byte_cap, Some(65_536));
    assert_eq!(judged.consequence, Consequence::RebuildLive);
    assert_eq!(
        machine.learned.transient_req_cap(),
        1,
        "transient REQs serialised"
    );
}

#[test]
fn a_policy_refusal_of_several_live_filters_makes_them_suspects() {
    let now = Instant::now();
    let mut machine = connected(now);
    open_live(&mut machine, now, vec![("l1", vec![filter(1), filter(2)])]);

    let judged =
        judged(machine.handle_closed(now, &id("l1"), "blocked: not allowed", None, no_discovery));

    assert_eq!(
        judged.refused_coverage,
        Some(CoverageRefused::Suspects { filters: 2 })
    );
    assert_eq!(
        judged.consequence,
        Consequence::RepairLive {
            split_suspects: true
        }
    );
    assert_eq!(judged.refused_filters.len(), 2);
    assert_eq!(machine.health.sync_paused_until(now), None);
}

#[test]
fn a_refusal_notice_answers_the_newest_unanswered_req_and_closes_it() {
    let now = Instant::now();
    let mut machine = connected(now);
    open_live(
        &mut machine,
        now,
        vec![("l1", vec![filter(1)]), ("l2", vec![filter(2)])],
    );

    let answer = machine.handle_notice(now, "ERROR: bad req: unindexed tag filter", no_discovery);

    let NoticeAnswer::Closed {
        subscription_id,
        answer,
    } = answer
    else {
        panic!("the NOTICE answers no REQ: {answer:?}");
    };
    assert_eq!(subscription_id, id("l2"));
    assert!(answer.counted);
    assert_eq!(
        testing::transmitted(&mut machine),
        ["CLOSE l2"],
        "its slot is freed at the relay"
    );
    assert_eq!(machine.stats.refusals.get("invalid_filter"), Some(&1));
}

#[test]
fn an_auth_required_notice_with_nothing_unanswered_refuses_nothing() {
    let now = Instant::now();
    let mut machine = connected_with_key(now);

    let answer = machine.handle_notice(now, "auth-required: please authenticate", no_discovery);

    assert!(matches!(
        answer,
        NoticeAnswer::Relay {
            outcome: NoticeOutcome::AuthRequiredAlone,
            ..
        }
    ));
    assert_eq!(machine.stats.refusals.get("auth_required"), Some(&1));
    assert_eq!(machine.health.sync_paused_until(now), None);
    assert!(testing::transmitted(&mut machine).is_empty());
}

#[test]
fn an_unknown_notice_is_no_refusal() {
    let now = Instant::now();
    let mut machine = connected(now);
    let answer = machine.handle_notice(now, "welcome to the relay", no_discovery);
    assert!(matches!(answer, NoticeAnswer::Unknown));
    assert!(machine.stats.refusals.is_empty());
}

#[test]
fn a_neg_err_for_the_rate_pauses_and_cools_down() {
    let now = Instant::now();
    let mut machine = connected(now);

    let (refusal, learned) = machine.handle_rate_refusal(now, "rate-limited: too many queries");

    assert_eq!(refusal.category, RefusalCategory::RateLimited);
    assert_eq!(learned, LimitsLearned::default());
    let paused = machine.health.sync_paused_until(now).expect("a rate pause");
    let session = machine.session.as_ref().expect("connected");
    assert_eq!(session.reactive.poll_timeout(), Some(paused));
    assert!(
        !session.reactive.nip77_allowed(),
        "NIP-77 is off for the session"
    );
}
