//! The strict-relay conformance suite: a gitnostr-shaped network scaled to run in seconds,
//! synced on paused time through memory relays that enforce the limits of real implementations
//! (advertised or hidden) with their refusal texts, or answer queries with their quirks (oldest
//! first, exclusive `until`, a per-REQ cap, no EOSE for live REQs). For each profile: nothing
//! the relay holds is lost, hidden limits cost at most one refusal per kind, advertised ones
//! none, background starts on a connection are never less than one second apart, and no event
//! is sent twice on a connection except where paging must read a boundary second again, or, on
//! a relay known to take several filters per REQ (advertised, or proven by a REQ it accepted;
//! there a new store's first sync goes by REQ+EOSE), what a later page reads again. Hand-built
//! cases push each quirk past a page: a deep thread, a same-second burst, a wide REQ. Each run
//! prints its figures.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_engine::EngineConfig;
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RootKind, ThreadTag, reply, root};
use grasp_sync_testkit::{
    MemoryNetwork, NetworkSpec, RefusalKind, RootCount, SimulatedRelay, StrictStats,
    TestRelayConfig,
};
use nostr::{Event, EventId, Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, ids, start_paused_engine, test_config, tight_background_starts,
    wait_until,
};

/// What one profile run showed.
struct Figures {
    refusals: u64,
    refusal_kinds: Vec<(RefusalKind, u64)>,
    req_starts: usize,
    neg_opens: usize,
    peak_subscriptions: usize,
    events_sent: u64,
    duplicate_events: u64,
    held: usize,
    synced: usize,
    /// The most filters one REQ carried.
    widest_req: usize,
    /// Events the strict relay's later pages could send again (see [`page_rereads`]).
    page_rereads: u64,
}

/// The generated network synced from a default bootstrap relay and a relay of `profile`.
async fn run_profile(name: &str, profile: TestRelayConfig) -> Figures {
    let spec = NetworkSpec {
        relays: 2,
        repos: 40,
        roots: RootCount::Total(240),
        replies_per_root: 1,
        relays_per_repo: 2,
        share_not_listing_service: 0.1,
        ..NetworkSpec::small(23, SERVICE_URL)
    };
    let (network, generated) =
        MemoryNetwork::generate(&spec, &[TestRelayConfig::default(), profile]).expect("network");
    let urls = network.urls();
    let mut figures = measure(
        name,
        &network,
        &urls[1],
        &urls[..1],
        &generated.expected,
        None,
        false,
    )
    .await;
    figures.page_rereads = page_rereads(&network.stats(&urls[1]), &generated.relay_events[1]);
    figures
}

/// How many events the later pages in `stats` could send again: for each REQ of a walk after
/// its first (a page past a full one, or a short filter of a REQ that may have been cut read
/// again alone), the relay's events its filters match.
fn page_rereads(stats: &StrictStats, events: &[Event]) -> u64 {
    let matches = |filter: &nostr::Filter, event: &Event| {
        filter.match_event(event, nostr::filter::MatchEventOptions::new())
    };
    stats
        .starts
        .iter()
        .filter(|start| start.subscription_id.starts_with("gs-page-"))
        .map(|start| {
            events
                .iter()
                .filter(|event| start.filters.iter().any(|f| matches(f, event)))
                .count() as u64
        })
        .sum()
}

/// One repository announced on a default bootstrap relay and held, with `thread` built for
/// it, by a relay of `profile`; synced and measured.
async fn run_case(
    name: &str,
    profile: TestRelayConfig,
    thread: impl FnOnce(&RepoFixture) -> Case,
) -> Figures {
    run_case_with(name, profile, thread, false).await
}

/// [`run_case`], with the first page of each batch riding on its live groups or not
/// (`live_first_page`).
async fn run_case_with(
    name: &str,
    profile: TestRelayConfig,
    thread: impl FnOnce(&RepoFixture) -> Case,
    live_first_page: bool,
) -> Figures {
    let bootstrap = "ws://bootstrap.memory".to_owned();
    let strict = "ws://strict.memory".to_owned();
    let fixture = RepoFixture::new("deep");
    let Case {
        events,
        known_before,
    } = thread(&fixture);
    let known = ids(&known_before);
    // The bootstrap relay is listed too when it holds part of the thread.
    let mut listed = vec![SERVICE_URL.to_owned(), strict.clone()];
    if !known.is_empty() {
        listed.push(bootstrap.clone());
    }
    let announcement = fixture.announcement(&listed, 1_700_000_000);
    let mut expected = ids(&events);
    expected.insert(announcement.id);
    let network = MemoryNetwork::new(vec![
        (
            bootstrap.clone(),
            SimulatedRelay::new(
                TestRelayConfig::default(),
                known_before
                    .into_iter()
                    .chain([announcement.clone()])
                    .collect(),
            ),
        ),
        (
            strict.clone(),
            SimulatedRelay::new(profile, events.into_iter().chain([announcement]).collect()),
        ),
    ]);
    // With events known beforehand, the strict relay joins once they are stored, so its first
    // REQ covers them all.
    let late = (!known.is_empty()).then_some(&known);
    measure(
        name,
        &network,
        &strict,
        &[bootstrap],
        &expected,
        late,
        live_first_page,
    )
    .await
}

/// The events of a hand-built case: all on the strict relay, some also on the bootstrap
/// relay, so the engine knows them before it first asks the strict relay.
struct Case {
    events: Vec<Event>,
    known_before: Vec<Event>,
}

impl Case {
    /// Every event on the strict relay only.
    fn strict_only(events: Vec<Event>) -> Self {
        Self {
            events,
            known_before: Vec::new(),
        }
    }
}

/// Syncs from `bootstrap` until the store holds `expected`, then checks and prints what the
/// strict relay saw. With `join_after`, the strict relay is down until the store holds those
/// events.
#[allow(clippy::print_stderr)]
async fn measure(
    name: &str,
    network: &MemoryNetwork,
    strict: &str,
    bootstrap: &[String],
    expected: &BTreeSet<EventId>,
    join_after: Option<&BTreeSet<EventId>>,
    live_first_page: bool,
) -> Figures {
    if join_after.is_some() {
        network.kill(strict);
    }
    let config = EngineConfig {
        live_first_page,
        ..test_config(bootstrap)
    };
    let run = start_paused_engine(network, config).await;
    if let Some(known) = join_after {
        let stored = wait_until(Duration::from_secs(60), || async {
            run.count_stored(known).await == known.len()
        })
        .await;
        assert!(
            stored,
            "{name}: the bootstrap relay's events did not arrive"
        );
        network.revive(strict);
    }
    let complete = wait_until(Duration::from_secs(120), || async {
        run.count_stored(expected).await == expected.len()
    })
    .await;
    let status = run.engine.status().await.expect("status");
    let strict_key = RelayUrl::parse(strict).expect("url").to_string();
    assert!(
        complete,
        "{name}: stored {} of {}: {status:#?}",
        run.count_stored(expected).await,
        expected.len()
    );
    // Every event the strict relay holds that a correct sync keeps ends in the store.
    let held: BTreeSet<EventId> = network
        .events(strict)
        .iter()
        .map(|e| e.id)
        .filter(|id| expected.contains(id))
        .collect();
    let synced = run.count_stored(&held).await;
    run.engine.shutdown().await;
    let stats = network.stats(strict);
    let refusal_kinds: Vec<(RefusalKind, u64)> =
        stats.refusals.iter().map(|(k, v)| (*k, *v)).collect();
    // Background starts (history, pages, exact-ID fetches, negentropy rounds) at least one
    // second apart per connection, as the relay reads them; live subscriptions may start at
    // once.
    let tight = tight_background_starts(&stats);
    assert!(
        tight.is_empty(),
        "{name}: background starts less than a second apart: {tight:?}"
    );
    let figures = Figures {
        refusals: stats.total_refusals(),
        refusal_kinds,
        req_starts: stats.req_starts().count(),
        neg_opens: stats.neg_opens(),
        peak_subscriptions: stats.peak_open_subscriptions(),
        events_sent: stats.events_sent(),
        duplicate_events: stats.duplicate_events(),
        held: held.len(),
        synced,
        widest_req: widest_req(&stats),
        page_rereads: 0,
    };
    eprintln!(
        "| {name} | {} {:?} | {} | {} | {} | {} / {} | {} ({} twice) | {} | {} |",
        figures.refusals,
        figures.refusal_kinds,
        figures.req_starts,
        figures.neg_opens,
        figures.peak_subscriptions,
        figures.synced,
        figures.held,
        figures.events_sent,
        figures.duplicate_events,
        status
            .relays
            .get(&strict_key)
            .map_or(0, |r| r.subscription_budget),
        figures.widest_req,
    );
    assert_eq!(figures.synced, figures.held, "{name}: events lost");
    figures
}

/// A relay known to take several filters per REQ (advertised, or proven by a REQ it
/// accepted) has a new store's first sync taken by REQ+EOSE, which pages: only what a later
/// page can read again comes twice.
fn assert_only_page_rereads_fetched_twice(name: &str, figures: &Figures) {
    assert!(
        figures.duplicate_events <= figures.page_rereads,
        "{name}: {} events fetched twice, more than the {} its later pages could read again",
        figures.duplicate_events,
        figures.page_rereads
    );
}

/// Paging through a relay that pages by timestamp must read a page's boundary second again
/// (NIP-01 has no cursor inside a second), and a short filter of a REQ that may have been cut
/// is read again alone: only those events come twice. `pages` bounds how many re-reads a walk
/// can make; each re-reads at most `per_read` events.
fn assert_only_boundaries_fetched_twice(name: &str, figures: &Figures, per_read: u64) {
    let bound = figures.req_starts as u64 * per_read;
    assert!(
        figures.duplicate_events <= bound,
        "{name}: {} events fetched twice, more than {} REQs re-reading {per_read} each",
        figures.duplicate_events,
        figures.req_starts
    );
}

#[tokio::test(start_paused = true)]
async fn nos_lol_like_advertised_limits_cost_no_refusal() {
    let figures = run_profile("nos.lol-like", TestRelayConfig::nos_lol_like()).await;
    assert_only_page_rereads_fetched_twice("nos.lol-like", &figures);
    assert_eq!(figures.refusals, 0);
    assert!(figures.peak_subscriptions <= 20);
}

#[tokio::test(start_paused = true)]
async fn nostream_like_advertised_limits_cost_no_refusal() {
    let figures = run_profile("nostream-like", TestRelayConfig::nostream_like()).await;
    assert_only_page_rereads_fetched_twice("nostream-like", &figures);
    assert_eq!(figures.refusals, 0);
    assert!(figures.peak_subscriptions <= 10);
}

#[tokio::test(start_paused = true)]
async fn strfry_filter_validation_like_hidden_filter_cap_is_learned_from_one_refusal() {
    let figures = run_profile(
        "strfry-filterValidation-like",
        TestRelayConfig::strfry_filter_validation_like(),
    )
    .await;
    // Once the refusal named the cap, or accepted REQs proved a filter count, a new store's
    // first sync may go by REQ+EOSE here too, which pages.
    assert_only_page_rereads_fetched_twice("strfry-filterValidation-like", &figures);
    for (kind, count) in &figures.refusal_kinds {
        assert!(*count <= 1, "{kind:?} refused {count} times");
    }
}

#[tokio::test(start_paused = true)]
async fn ditto_like_hidden_page_size_is_paged_through_without_refusal() {
    let figures = run_profile("ditto-like", TestRelayConfig::ditto_like()).await;
    assert_only_page_rereads_fetched_twice("ditto-like", &figures);
    assert_eq!(figures.refusals, 0);
}

#[tokio::test(start_paused = true)]
async fn rust_nostr_like_hidden_limits_cost_at_most_one_refusal_each() {
    let figures = run_profile("rust-nostr-like", TestRelayConfig::rust_nostr_like()).await;
    assert_only_page_rereads_fetched_twice("rust-nostr-like", &figures);
    for (kind, count) in &figures.refusal_kinds {
        assert!(*count <= 1, "{kind:?} refused {count} times");
    }
}

#[tokio::test(start_paused = true)]
async fn oldest_first_without_limit_like_network_is_complete() {
    let profile = TestRelayConfig::oldest_first_without_limit_like();
    let figures = run_profile("oldest-first-like", profile).await;
    assert_only_boundaries_fetched_twice("oldest-first-like", &figures, 2);
}

#[tokio::test(start_paused = true)]
async fn exclusive_until_like_network_is_complete() {
    let figures = run_profile(
        "exclusive-until-like",
        TestRelayConfig::exclusive_until_like(),
    )
    .await;
    assert_only_boundaries_fetched_twice("exclusive-until-like", &figures, 2);
}

#[tokio::test(start_paused = true)]
async fn per_req_cap_like_network_is_complete() {
    let figures = run_profile("per-REQ-cap-like", TestRelayConfig::per_req_cap_like()).await;
    assert_only_boundaries_fetched_twice("per-REQ-cap-like", &figures, 150);
}

#[tokio::test(start_paused = true)]
async fn quirks_mixed_network_is_complete() {
    let figures = run_profile("quirks-mixed", TestRelayConfig::quirks_mixed()).await;
    assert_only_boundaries_fetched_twice("quirks-mixed", &figures, 200);
    for (kind, count) in &figures.refusal_kinds {
        assert!(*count <= 1, "{kind:?} refused {count} times");
    }
}

/// An issue with 1,000 replies, two a second, and 300 replies to those replies.
fn deep_thread(fixture: &RepoFixture) -> Case {
    let author = Keys::generate();
    let at = |s: u64| Timestamp::from_secs(1_700_000_100 + s);
    let repos = std::slice::from_ref(&fixture.repo);
    let issue = root(&author, RootKind::Issue, repos, "deep", at(0)).expect("issue");
    let replies: Vec<Event> = (0..1_000u64)
        .map(|i| {
            reply(
                &author,
                &issue,
                ThreadTag::LowerE,
                &format!("r{i}"),
                at(10 + i / 2),
            )
        })
        .collect::<Result<_, _>>()
        .expect("replies");
    let nested: Vec<Event> = replies
        .iter()
        .take(300)
        .enumerate()
        .map(|(i, parent)| {
            reply(
                &author,
                parent,
                ThreadTag::LowerE,
                &format!("n{i}"),
                at(2_000 + i as u64),
            )
        })
        .collect::<Result<_, _>>()
        .expect("nested replies");
    Case::strict_only(
        std::iter::once(issue)
            .chain(replies)
            .chain(nested)
            .collect(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_thousand_reply_thread_arrives_whole_from_an_oldest_first_relay_capped_at_250() {
    let name = "deep thread, oldest-first-like";
    let figures = run_case(
        name,
        TestRelayConfig::oldest_first_without_limit_like(),
        deep_thread,
    )
    .await;
    assert_eq!(figures.synced, 1_302);
    assert_only_boundaries_fetched_twice(name, &figures, 2);
}

/// 40 issues, then 400 replies to them, ten each, all in one second.
fn same_second_burst(fixture: &RepoFixture) -> Case {
    let author = Keys::generate();
    let repos = std::slice::from_ref(&fixture.repo);
    let issues: Vec<Event> = (0..40u64)
        .map(|i| {
            root(
                &author,
                RootKind::Issue,
                repos,
                &format!("issue {i}"),
                Timestamp::from_secs(1_700_000_100 + i),
            )
        })
        .collect::<Result<_, _>>()
        .expect("issues");
    let burst = Timestamp::from_secs(1_700_050_000);
    let replies: Vec<Event> = issues
        .iter()
        .flat_map(|issue| (0..10).map(move |i| (issue, i)))
        .map(|(issue, i)| {
            reply(
                &author,
                issue,
                ThreadTag::LowerE,
                &format!("burst {i}"),
                burst,
            )
        })
        .collect::<Result<_, _>>()
        .expect("replies");
    Case::strict_only(issues.into_iter().chain(replies).collect())
}

#[tokio::test(start_paused = true)]
async fn a_400_event_second_arrives_whole_from_an_exclusive_until_relay_capped_at_120() {
    let name = "same-second burst, exclusive-until-like";
    let figures = run_case(
        name,
        TestRelayConfig::exclusive_until_like(),
        same_second_burst,
    )
    .await;
    assert_eq!(figures.synced, 441);
    assert_only_boundaries_fetched_twice(name, &figures, 120);
}

/// 30 issues with three replies by every thread tag, known from the bootstrap relay too, so
/// the first REQ to the strict relay covers the repository and its state (`#a`, `#A`, `#q`,
/// `#d`) and the issues (`#e`, `#E`, `#q`) at once: seven filters, the widest historic REQ the
/// engine builds (direct members come in a batch of their own). On the strict relay only: 90
/// comments on the repository and a reply to each of 90 replies.
fn wide_history(fixture: &RepoFixture) -> Case {
    use grasp_sync_testkit::nip34::{RepoTag, repo_comment};
    let author = Keys::generate();
    let repos = std::slice::from_ref(&fixture.repo);
    let mut known = Vec::new();
    let mut strict_only = Vec::new();
    let mut second = 1_700_000_100u64;
    let mut next = || {
        second += 7;
        Timestamp::from_secs(second)
    };
    for i in 0..30 {
        let issue = root(
            &author,
            RootKind::Issue,
            repos,
            &format!("issue {i}"),
            next(),
        )
        .expect("issue");
        for how in ThreadTag::ALL {
            for j in 0..3 {
                let reply =
                    reply(&author, &issue, how, &format!("reply {i}.{j}"), next()).expect("reply");
                if j == 0 {
                    strict_only.push(
                        grasp_sync_testkit::nip34::reply(
                            &author,
                            &reply,
                            ThreadTag::LowerE,
                            &format!("nested {i}"),
                            next(),
                        )
                        .expect("nested"),
                    );
                }
                known.push(reply);
            }
        }
        known.push(issue);
    }
    for how in RepoTag::ALL {
        for i in 0..30 {
            strict_only.push(
                repo_comment(&author, &fixture.repo, how, &format!("comment {i}"), next())
                    .expect("comment"),
            );
        }
    }
    Case {
        events: known.iter().cloned().chain(strict_only).collect(),
        known_before: known,
    }
}

#[tokio::test(start_paused = true)]
async fn a_seven_filter_req_arrives_whole_from_a_relay_capping_150_per_req() {
    // With `live_first_page`, the first pages ride on live groups of fewer filters; the
    // history is complete.
    let name = "wide history on live groups, per-REQ-cap-like";
    let figures = run_case_with(
        name,
        TestRelayConfig::per_req_cap_like(),
        wide_history,
        true,
    )
    .await;
    assert_eq!(figures.synced, 481);
    assert_only_boundaries_fetched_twice(name, &figures, 150);

    // Fetched apart from the live groups, the batch's seven filters go in one historic REQ.
    let name = "wide REQ, per-REQ-cap-like";
    let figures = run_case(name, TestRelayConfig::per_req_cap_like(), wide_history).await;
    assert_eq!(figures.synced, 481);
    assert!(
        figures.widest_req >= 7,
        "{name}: the widest REQ had only {} filters",
        figures.widest_req
    );
    assert_only_boundaries_fetched_twice(name, &figures, 150);
}

/// The most filters one REQ carried to the strict relay.
fn widest_req(stats: &StrictStats) -> usize {
    stats
        .req_starts()
        .map(|s| s.filters.len())
        .max()
        .unwrap_or(0)
}
