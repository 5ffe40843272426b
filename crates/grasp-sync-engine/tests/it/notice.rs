//! Refusals sent as NOTICE, which name no subscription: each is matched to a REQ the relay had
//! not answered (for a filter-count refusal the one with the most filters, otherwise the
//! newest), frees its slot and is classified like that REQ's CLOSED. On paused time over memory
//! relays, so a burst of REQs is answered in the relay's order, deterministically.

use std::time::Duration;

use grasp_sync_testkit::nip34::{RepoTag, ThreadTag, reply, repo_comment};
use grasp_sync_testkit::{
    Dialect, FilterLimit, MemoryNetwork, SimulatedRelay, StrictLimits, TestRelayConfig,
};
use nostr::{Keys, Timestamp};

use crate::support::{RepoFixture, SERVICE_URL, ids, start_paused_engine, test_config, wait_until};

const BOOTSTRAP: &str = "ws://bootstrap.memory";
const STRICT: &str = "ws://strict.memory";

#[tokio::test(start_paused = true)]
async fn a_filter_cap_refused_by_notice_is_learned_and_live_coverage_still_delivers() {
    // nostream's filter cap, not advertised, refused with its NOTICE.
    let strict = TestRelayConfig::strict(StrictLimits {
        filters_per_req: Some(FilterLimit {
            max: 2,
            dialect: Dialect::Nostream,
            advertised: false,
        }),
        ..StrictLimits::default()
    });
    let fixture = RepoFixture::new("noticed");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), STRICT.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement.clone()]),
        ),
        (
            STRICT.to_owned(),
            SimulatedRelay::new(
                strict,
                thread.iter().cloned().chain([announcement]).collect(),
            ),
        ),
    ]);
    let urls = network.urls();
    let (bootstrap, key) = (&urls[0], &urls[1]);
    // The default first sync by REQ+EOSE. A NOTICE names no subscription, so the ceiling it
    // teaches is only the ladder's next step (5), a guess that may be above the real cap (2):
    // a first-sync REQ packs no more filters than a REQ the relay accepted, so history is
    // refused nothing. (The live groups find the cap by the ladder, a refusal per step.) The
    // live groups go out in one burst: a refusal of one of them must not be taken for a
    // refusal of a later one-filter group, which would pause that coverage by policy.
    let config = test_config(std::slice::from_ref(bootstrap));
    let run = start_paused_engine(&network, config).await;
    run.wait_for_store(&ids(&thread), Duration::from_secs(60))
        .await;
    let engine = &run.engine;
    let settled = wait_until(Duration::from_secs(30), || async {
        engine.status().await.is_some_and(|s| {
            s.relays
                .get(key)
                .is_some_and(|r| r.connection == "connected" && r.queued_starts == 0)
        })
    })
    .await;
    assert!(settled, "{:#?}", engine.status().await);
    let paused = engine
        .status()
        .await
        .and_then(|s| s.relays.get(key).map(|r| r.paused_filters));
    assert_eq!(paused, Some(0), "coverage paused by a misread NOTICE");

    // Every live family delivers: replies by each thread tag, comments by each repository tag.
    let author = Keys::generate();
    let issue = thread.last().expect("issue");
    let at = Timestamp::from_secs(1_700_009_000);
    let mut late = Vec::new();
    for how in ThreadTag::ALL {
        late.push(reply(&author, issue, how, "late reply", at).expect("reply"));
    }
    for how in RepoTag::ALL {
        late.push(repo_comment(&author, &fixture.repo, how, "late comment", at).expect("comment"));
    }
    for event in &late {
        network.publish(key, event.clone());
    }
    let live = ids(&late);
    let arrived = wait_until(Duration::from_secs(20), || async {
        run.count_stored(&live).await == live.len()
    })
    .await;
    let status = engine.status().await.expect("status");
    let stats = network.stats(key);
    let refused: Vec<_> = stats
        .starts
        .iter()
        .filter(|s| s.refused.is_some())
        .map(|s| (s.subscription_id.as_str(), s.filters.len()))
        .collect();
    assert!(
        refused.iter().all(|(id, _)| id.starts_with("gs-live-")),
        "a historic request was refused: {refused:?}"
    );
    assert!(
        arrived,
        "{} of {} live events arrived; refusals {:?}; {:#?}",
        run.count_stored(&live).await,
        live.len(),
        stats.refusals,
        status.relays.get(key)
    );
    run.engine.shutdown().await;
}
