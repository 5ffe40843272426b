//! The rate-limit unwind, on paused time over a memory relay whose query allowance is smaller
//! than a full sync needs: it refuses a start with "too many queries"; the engine must keep the
//! connection, send nothing during the configured cooldown, drop NIP-77 for the session, space
//! every later start (live ones included) by the reactive interval, and still store everything.
//! Every start is read at its exact virtual instant, so the rules are checked exactly.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{
    MemoryNetwork, NetworkSpec, QueryStart, RefusalKind, RootCount, StartKind, StrictLimits,
    TestRelayConfig,
};
use tokio::time::Instant;

use crate::support::{SERVICE_URL, start_paused_engine, test_config, wait_until};

/// Query starts the strict relay allows in any [`WINDOW`] on one connection.
const ALLOWANCE: u32 = 3;
/// The relay's sliding query window. At session start the engine opens this network's live
/// coverage (three groups) and its first background start at once and the next background
/// start a second later, more than [`ALLOWANCE`] starts within one window: a full sync cannot
/// avoid a refusal.
const WINDOW: Duration = Duration::from_millis(1500);
/// The engine's configured first rate-limit cooldown. It outlasts [`WINDOW`], so when it ends
/// every start made before the refusal has left the relay's window.
const COOLDOWN: Duration = Duration::from_secs(3);
/// The reactive gate's spacing after the first episode. Four starts span at least
/// 3 × 600 ms = 1.8 s, more than [`WINDOW`]: once the cooldown is over the relay never sees
/// more than [`ALLOWANCE`] starts in a window and never refuses again.
const REACTIVE_INTERVAL: Duration = Duration::from_millis(600);
/// The most refusals a correct engine can draw. There is exactly one episode, and in it the
/// relay can refuse only the starts the engine sent at the instant of the first refusal, before
/// it read it. Before any refusal only live coverage starts in a burst, so those are at most
/// one live burst (three groups here) and one background start.
const MAX_REFUSALS: usize = 4;
/// How long the whole sync may take, in virtual time (an engine that keeps the rules needs 10 to
/// 16 s here).
const SYNC_DEADLINE: Duration = Duration::from_secs(30);

/// What the relay saw, measured against the rules.
struct Figures {
    refusals: Vec<Instant>,
    /// Starts that reached the relay after the instant of the first refusal (when the engine
    /// read it) but before the cooldown ended, as (seconds after the first refusal,
    /// subscription ID).
    during_cooldown: Vec<(f64, String)>,
    /// NEG-OPENs read after the instant of the first refusal.
    neg_opens_after: usize,
    /// Consecutive starts after the cooldown closer than the reactive interval allows, as
    /// (gap in ms, the later start's subscription ID).
    tight_after: Vec<(u128, String)>,
    /// Smallest gap between consecutive starts after the cooldown.
    min_gap_after: Option<Duration>,
    /// Starts read after the cooldown ended.
    starts_after: usize,
}

fn measure(starts: &[QueryStart]) -> Figures {
    let mut starts: Vec<&QueryStart> = starts.iter().collect();
    starts.sort_by_key(|s| s.at);
    let refusals: Vec<Instant> = starts
        .iter()
        .filter(|s| s.refused == Some(RefusalKind::TooManyQueries))
        .map(|s| s.at)
        .collect();
    let Some(&first) = refusals.first() else {
        return Figures {
            refusals,
            during_cooldown: Vec::new(),
            neg_opens_after: 0,
            tight_after: Vec::new(),
            min_gap_after: None,
            starts_after: 0,
        };
    };
    let cooldown_end = first + COOLDOWN;
    let during_cooldown = starts
        .iter()
        .filter(|s| s.at > first && s.at < cooldown_end)
        .map(|s| {
            (
                s.at.duration_since(first).as_secs_f64(),
                s.subscription_id.clone(),
            )
        })
        .collect();
    let neg_opens_after = starts
        .iter()
        .filter(|s| s.at > first && s.kind == StartKind::NegOpen)
        .count();
    let after: Vec<&&QueryStart> = starts.iter().filter(|s| s.at >= cooldown_end).collect();
    let gaps: Vec<(Duration, String)> = after
        .windows(2)
        .map(|w| {
            (
                w[1].at.duration_since(w[0].at),
                w[1].subscription_id.clone(),
            )
        })
        .collect();
    Figures {
        during_cooldown,
        neg_opens_after,
        tight_after: gaps
            .iter()
            .filter(|(gap, _)| *gap < REACTIVE_INTERVAL)
            .map(|(gap, id)| (gap.as_millis(), id.clone()))
            .collect(),
        min_gap_after: gaps.iter().map(|(gap, _)| *gap).min(),
        starts_after: after.len(),
        refusals,
    }
}

/// The first few items of a long list, for a readable failure message.
fn first_few<T>(items: &[T]) -> &[T] {
    &items[..items.len().min(8)]
}

#[allow(clippy::print_stderr)]
#[tokio::test(start_paused = true)]
async fn a_query_rate_refusal_pauses_the_connection_for_the_cooldown_then_paces_every_start() {
    let spec = NetworkSpec {
        relays: 2,
        repos: 12,
        roots: RootCount::Total(48),
        replies_per_root: 1,
        relays_per_repo: 2,
        share_not_listing_service: 0.1,
        ..NetworkSpec::small(29, SERVICE_URL)
    };
    let limited = TestRelayConfig::strict(StrictLimits {
        queries_per_minute: Some(ALLOWANCE),
        query_window: WINDOW,
        ..StrictLimits::default()
    });
    let (network, generated) =
        MemoryNetwork::generate(&spec, &[TestRelayConfig::default(), limited]).expect("network");
    let urls = network.urls();
    let relay = &urls[1];
    let mut config = test_config(&urls[..1]);
    config.health.rate_limit_cooldown = COOLDOWN;
    config.health.validate().expect("a valid health config");
    let began = Instant::now();
    let run = start_paused_engine(&network, config).await;
    let expected = generated.expected.clone();
    let complete = wait_until(SYNC_DEADLINE, || async {
        run.count_stored(&expected).await == expected.len()
    })
    .await;
    let elapsed = began.elapsed();
    let status = run.engine.status().await.expect("status");
    // Every event the limited relay holds that a correct sync keeps.
    let held: BTreeSet<_> = network
        .events(relay)
        .iter()
        .map(|e| e.id)
        .filter(|id| expected.contains(id))
        .collect();
    let synced = run.count_stored(&held).await;
    let stored = run.count_stored(&expected).await;
    run.engine.shutdown().await;
    let stats = network.stats(relay);
    let figures = measure(&stats.starts);
    let key = RelayUrl::parse(relay).expect("url").to_string();
    let relay_status = status.relays.get(&key).cloned().unwrap_or_default();
    eprintln!(
        "| rate-limit unwind | refusals {} | starts {} ({} after the cooldown, min gap {:?}) | \
         starts during the cooldown {} | NEG-OPENs after {} | connections {} | \
         {synced} / {} held, {stored} / {} expected | {:.1} s |",
        figures.refusals.len(),
        stats.starts.len(),
        figures.starts_after,
        figures.min_gap_after,
        figures.during_cooldown.len(),
        figures.neg_opens_after,
        stats.connections(),
        held.len(),
        expected.len(),
        elapsed.as_secs_f64(),
    );
    let mut broken: Vec<String> = Vec::new();
    if figures.refusals.is_empty() {
        broken.push("the relay never refused a start: the test did not reach the allowance".into());
    }
    if !figures.during_cooldown.is_empty() {
        broken.push(format!(
            "{} starts reached the relay during the {COOLDOWN:?} cooldown after the first \
             refusal, first ones (seconds after it, subscription): {:?}",
            figures.during_cooldown.len(),
            first_few(&figures.during_cooldown)
        ));
    }
    if figures.neg_opens_after > 0 {
        broken.push(format!(
            "{} NEG-OPENs sent after a query-rate refusal on the same connection",
            figures.neg_opens_after
        ));
    }
    if !figures.tight_after.is_empty() {
        broken.push(format!(
            "{} starts after the cooldown closer than {REACTIVE_INTERVAL:?} to the one before, \
             first ones (gap in ms, subscription): {:?}",
            figures.tight_after.len(),
            first_few(&figures.tight_after)
        ));
    }
    if let Some(&first) = figures.refusals.first() {
        let late: Vec<f64> = figures
            .refusals
            .iter()
            .filter(|at| **at > first)
            .map(|at| at.duration_since(first).as_secs_f64())
            .collect();
        if !late.is_empty() {
            broken.push(format!(
                "{} refusals after the instant of the first, first ones (seconds after it): {:?}",
                late.len(),
                first_few(&late)
            ));
        }
    }
    if figures.refusals.len() > MAX_REFUSALS {
        broken.push(format!(
            "{} refusals, more than {MAX_REFUSALS}",
            figures.refusals.len()
        ));
    }
    let reconnects = (
        stats.connections(),
        relay_status.connections,
        relay_status.quick_reconnects + relay_status.long_reconnects,
    );
    if reconnects != (1, 1, 0) {
        broken.push(format!(
            "the connection did not stay open: (relay connections, engine connections, \
             reconnects) = {reconnects:?}"
        ));
    }
    if !complete || synced != held.len() {
        broken.push(format!(
            "events lost: {synced} of {} held by the limited relay and {stored} of {} expected \
             stored after {elapsed:?}",
            held.len(),
            expected.len()
        ));
    }
    assert!(
        broken.is_empty(),
        "{}\n{relay_status:#?}",
        broken.join("\n")
    );
}
