//! A relay that advertises no `max_filters` and keeps a filter cap hidden: a REQ of several
//! filters it accepted proves it takes that many, so a new store's first sync there goes by
//! REQ+EOSE packing no more than that, refused nothing, in fewer starts than NIP-77. On paused
//! time over memory relays.

use std::time::Duration;

use grasp_sync_testkit::{
    Dialect, FilterLimit, QueryStart, StartKind, StrictLimits, TestRelayConfig,
};

use crate::support::{
    BOOTSTRAP, HOME, RepoFixture, SERVICE_URL, ids, memory_network, start_paused_engine,
    test_config,
};

/// Filters per REQ the relay takes; it says so to nobody.
/// Filters per REQ the relay takes, said to nobody: the live groups of one repository fit,
/// the ceiling the engine starts at (10) does not.
const HIDDEN_CAP: usize = 8;

/// A strict relay with NIP-77 and a hidden filter cap, refused in the rust-nostr relay
/// builder's words (no number).
fn hidden_cap() -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        negentropy_enabled: true,
        filters_per_req: Some(FilterLimit {
            max: HIDDEN_CAP,
            dialect: Dialect::RustNostr,
            advertised: false,
        }),
        ..StrictLimits::default()
    })
}

/// What the hidden-cap relay saw of one run.
#[derive(Debug)]
struct Run {
    /// Refusals of any kind.
    refusals: u64,
    /// NEG-OPENs after the second repository was listed.
    later_neg_opens: usize,
    /// Historic REQs of semantic coverage after the second repository was listed.
    later_history_reqs: usize,
    /// Historic REQs that carried more filters than any REQ the relay had accepted before
    /// (more than one filter with none accepted).
    unproven_history_reqs: Vec<(String, usize)>,
}

/// A new store syncs one repository from the hidden-cap relay; once that settled (its live
/// REQs accepted), a second repository on the same relay is listed, and its first sync runs.
async fn run(first_sync_by_req: bool) -> Run {
    let first = RepoFixture::new("proven-first");
    let second = RepoFixture::new("proven-second");
    let listing = [SERVICE_URL.to_owned(), HOME.to_owned()];
    let first_thread = first.thread(1_700_000_100);
    let second_thread = second.thread(1_700_000_200);
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            TestRelayConfig::default(),
            vec![first.announcement(&listing, 1_700_000_000)],
        ),
        (
            HOME,
            hidden_cap(),
            first_thread.iter().chain(&second_thread).cloned().collect(),
        ),
    ]);
    let urls = network.urls();
    let (bootstrap, home) = (&urls[0], &urls[1]);
    let config = grasp_sync_engine::EngineConfig {
        first_sync_by_req,
        ..test_config(&urls[..1])
    };
    let run = start_paused_engine(&network, config).await;
    run.wait_for_store(&ids(&first_thread), Duration::from_secs(600))
        .await;
    run.settle(home, Duration::from_secs(600)).await;
    let before = network.stats(home).starts.len();

    network.publish(bootstrap, second.announcement(&listing, 1_700_000_050));
    run.wait_for_store(&ids(&second_thread), Duration::from_secs(600))
        .await;
    run.settle(home, Duration::from_secs(600)).await;
    run.engine.shutdown().await;

    let stats = network.stats(home);
    // Historic REQs of semantic coverage (not live groups, not exact-ID fetches).
    let history =
        |s: &QueryStart| s.kind == StartKind::Req && s.subscription_id.starts_with("gs-hist-");
    let mut accepted = 0;
    let mut unproven = Vec::new();
    for start in stats.starts.iter().filter(|s| s.kind == StartKind::Req) {
        if history(start) && start.filters.len() > accepted.max(1) {
            unproven.push((start.subscription_id.clone(), start.filters.len()));
        }
        if start.refused.is_none() {
            accepted = accepted.max(start.filters.len());
        }
    }
    let later = &stats.starts[before..];
    Run {
        refusals: stats.total_refusals(),
        later_neg_opens: later
            .iter()
            .filter(|s| s.kind == StartKind::NegOpen)
            .count(),
        later_history_reqs: later.iter().filter(|s| history(s)).count(),
        unproven_history_reqs: unproven,
    }
}

#[tokio::test(start_paused = true)]
async fn a_first_sync_goes_by_req_on_a_hidden_filter_cap_proven_by_an_accepted_req() {
    let (with_rule, without) = tokio::join!(run(true), run(false));
    // The second repository's first sync: several filters per REQ, each no larger than a REQ
    // the relay had accepted, so its hidden cap refused nothing.
    assert_eq!(with_rule.refusals, 0, "{with_rule:?}");
    assert!(
        with_rule.unproven_history_reqs.is_empty(),
        "historic REQs above the proven count: {with_rule:?}"
    );
    assert!(with_rule.later_history_reqs >= 1, "{with_rule:?}");
    assert!(
        with_rule.later_neg_opens < without.later_neg_opens,
        "NIP-77 rounds for the second repository: {} with the rule, {} without",
        with_rule.later_neg_opens,
        without.later_neg_opens
    );
    eprintln!("with the rule: {with_rule:?}\nwithout: {without:?}");
}
