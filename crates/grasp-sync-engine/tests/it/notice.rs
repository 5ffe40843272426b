//! Refusals sent as NOTICE, which name no subscription: each is matched to the newest REQ the
//! relay had not answered, frees its slot and is classified like that REQ's CLOSED.

use std::time::Duration;

use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RepoTag, ThreadTag, reply, repo_comment};
use grasp_sync_testkit::{Dialect, FilterLimit, StrictLimits, TestRelay, TestRelayConfig};
use nostr::{Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, ids, start_engine, test_config, wait_for_store, wait_until,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_cap_refused_by_notice_is_learned_and_live_coverage_still_delivers() {
    // nostream's filter cap, not advertised, refused with its NOTICE.
    let strict = TestRelay::start(TestRelayConfig::strict(StrictLimits {
        filters_per_req: Some(FilterLimit {
            max: 2,
            dialect: Dialect::Nostream,
            advertised: false,
        }),
        ..StrictLimits::default()
    }))
    .await
    .expect("strict relay");
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let fixture = RepoFixture::new("noticed");
    let announcement = fixture.announcement(&[SERVICE_URL.to_owned(), strict.url()], 1_700_000_000);
    bootstrap
        .seed([announcement.clone()])
        .await
        .expect("seed bootstrap");
    let thread = fixture.thread(1_700_000_100);
    strict
        .seed(thread.iter().cloned().chain([announcement]))
        .await
        .expect("seed strict relay");
    let store = TestStore::open().await;
    // The default first sync by REQ+EOSE. A NOTICE names no subscription, so the ceiling it
    // teaches is only the ladder's next step (5), a guess that may be above the real cap (2):
    // a first-sync REQ packs no more filters than a REQ the relay accepted, so history is
    // refused nothing. (The live groups find the cap by the ladder, a refusal per step.)
    let config = test_config(&[bootstrap.url()]);
    let engine = start_engine(&store, config).await;
    wait_for_store(&store, &engine, &ids(&thread), Duration::from_secs(60)).await;
    let key = RelayUrl::parse(&strict.url()).expect("url").to_string();
    let settled = wait_until(Duration::from_secs(30), || async {
        engine.status().await.is_some_and(|s| {
            s.relays
                .get(&key)
                .is_some_and(|r| r.connection == "connected" && r.queued_starts == 0)
        })
    })
    .await;
    assert!(settled, "{:#?}", engine.status().await);

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
        strict.publish(event.clone()).await.expect("publish");
    }
    let live = ids(&late);
    let arrived = wait_until(Duration::from_secs(20), || async {
        store.count_stored(&live).await == live.len()
    })
    .await;
    let status = engine.status().await.expect("status");
    let stats = strict.strict_stats();
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
        store.count_stored(&live).await,
        live.len(),
        stats.refusals,
        status.relays.get(&key)
    );
    engine.shutdown().await;
}
