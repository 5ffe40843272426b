//! With `live_first_page`, a first sync's new live groups carry the first page of their
//! history: one REQ fetches a
//! short history and stays open as the live tail, and a longer history walks on from it in
//! paced historic pages. On paused time over memory relays.

use std::time::Duration;

use grasp_sync_engine::EngineConfig;
use grasp_sync_testkit::nip34::{RepoTag, repo_comment};
use grasp_sync_testkit::{MemoryNetwork, QueryStart, StartKind, TestRelayConfig};
use nostr::{Filter, Keys};

use crate::support::{
    BOOTSTRAP, HOME, PausedEngine, RepoFixture, background, ids, repo_network, start_paused_engine,
    test_config,
};

/// Whether `filter` names `coordinate` in a tag.
fn names(filter: &Filter, coordinate: &str) -> bool {
    filter
        .generic_tags
        .values()
        .any(|values| values.contains(coordinate))
}

/// The accepted REQs [`HOME`] read that name `coordinate`, in arrival order.
fn reqs_naming(network: &MemoryNetwork, coordinate: &str) -> Vec<QueryStart> {
    network
        .stats(HOME)
        .starts
        .into_iter()
        .filter(|s| s.kind == StartKind::Req && s.refused.is_none())
        .filter(|s| s.filters.iter().any(|f| names(f, coordinate)))
        .collect()
}

/// The limits of the filters of `start` that name `coordinate`.
fn limits(start: &QueryStart, coordinate: &str) -> Vec<Option<usize>> {
    start
        .filters
        .iter()
        .filter(|f| names(f, coordinate))
        .map(|f| f.limit)
        .collect()
}

/// The engine's configuration with `live_first_page` on.
fn carrying() -> EngineConfig {
    EngineConfig {
        live_first_page: true,
        ..test_config(&[BOOTSTRAP.to_owned()])
    }
}

/// A first sync of one repository whose thread lives on a relay configured as `home`, until
/// the store holds the thread.
async fn first_sync(
    home: TestRelayConfig,
    config: EngineConfig,
) -> (MemoryNetwork, RepoFixture, PausedEngine) {
    let (network, fixture, thread) = repo_network(home, "paged");
    let run = start_paused_engine(&network, config).await;
    run.wait_for_store(&ids(&thread), Duration::from_secs(300))
        .await;
    (network, fixture, run)
}

/// A new comment on the repository, published on [`HOME`] after the first sync, reaches the
/// store through the live tail; then the engine stops.
async fn live_tail_delivers(network: &MemoryNetwork, fixture: &RepoFixture, run: PausedEngine) {
    let comment = repo_comment(
        &Keys::generate(),
        &fixture.repo,
        RepoTag::LowerA,
        "after the first sync",
        run.unix_now(),
    )
    .expect("comment");
    network.publish(HOME, comment.clone());
    run.wait_for_store(&ids(&[comment]), Duration::from_secs(60))
        .await;
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_short_history_comes_with_the_live_tail_in_one_req() {
    let (network, fixture, run) = first_sync(TestRelayConfig::default(), carrying()).await;
    let coordinate = fixture.repo.coordinate();

    let naming = reqs_naming(&network, &coordinate);
    assert!(
        naming.iter().all(|s| !background(s)),
        "no historic page of its own: {naming:#?}"
    );
    // The plan's new groups carry the page; groups repacked later fetch nothing again.
    let paged = naming
        .iter()
        .take_while(|s| {
            limits(s, &coordinate)
                .iter()
                .all(|l| l.is_some_and(|l| l > 0))
        })
        .count();
    assert!(paged > 0, "the first REQ carries a page limit: {naming:#?}");
    assert!(
        naming[paged..]
            .iter()
            .all(|s| limits(s, &coordinate).iter().all(|l| *l == Some(0))),
        "{naming:#?}"
    );

    live_tail_delivers(&network, &fixture, run).await;
}

#[tokio::test(start_paused = true)]
async fn switched_off_history_and_the_live_tail_are_fetched_apart() {
    let config = EngineConfig {
        live_first_page: false,
        ..test_config(&[BOOTSTRAP.to_owned()])
    };
    let (network, fixture, run) = first_sync(TestRelayConfig::default(), config).await;
    let coordinate = fixture.repo.coordinate();

    let naming = reqs_naming(&network, &coordinate);
    let live: Vec<&QueryStart> = naming.iter().filter(|s| !background(s)).collect();
    assert!(!live.is_empty(), "{naming:#?}");
    assert!(
        live.iter()
            .all(|s| limits(s, &coordinate).iter().all(|l| *l == Some(0))),
        "live REQs carry limit 0: {naming:#?}"
    );
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_longer_history_walks_on_from_the_live_page_in_paced_pages() {
    // Three events a page: the repository's six events (three roots, three comments) fill the
    // live group's first page.
    let home = TestRelayConfig {
        max_filter_limit: Some(3),
        ..TestRelayConfig::default()
    };
    let (network, fixture, run) = first_sync(home, carrying()).await;
    let coordinate = fixture.repo.coordinate();

    let naming = reqs_naming(&network, &coordinate);
    let (live, pages): (Vec<&QueryStart>, Vec<&QueryStart>) =
        naming.iter().partition(|s| !background(s));
    let first = live.first().expect("a live REQ");
    assert!(
        limits(first, &coordinate).iter().all(|l| *l == Some(3)),
        "the first live REQ carries the page: {naming:#?}"
    );
    assert!(
        pages.iter().any(|s| s
            .filters
            .iter()
            .any(|f| names(f, &coordinate) && f.until.is_some() && f.limit == Some(3))),
        "the walk goes back from the live page in historic pages: {naming:#?}"
    );
    let paged = live
        .iter()
        .take_while(|s| limits(s, &coordinate).iter().all(|l| *l == Some(3)))
        .count();
    assert!(
        live[paged..]
            .iter()
            .all(|s| limits(s, &coordinate).iter().all(|l| *l == Some(0))),
        "live groups repacked later fetch nothing again: {naming:#?}"
    );

    live_tail_delivers(&network, &fixture, run).await;
}
