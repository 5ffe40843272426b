//! The sim at a tiny size: the daemon converges, the naive baseline ends with the same set,
//! and the report carries every target and serializes.

use std::time::Duration;

use grasp_sync_bin::sim::{Preset, Profiles};
use grasp_sync_bin::{SimOptions, run_sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_converges_and_compares_with_the_naive_baseline() {
    let options = SimOptions {
        preset: Preset::Small,
        seed: 3,
        relays: Some(2),
        repos: Some(3),
        roots: Some(3),
        profiles: Profiles::Mixed,
        timeout: Duration::from_secs(60),
        ..SimOptions::default()
    };
    let mut out = Vec::new();
    let report = run_sim(&options, &mut out).await.expect("sim runs");
    let text = String::from_utf8_lossy(&out);
    assert!(report.converged(), "{text}");
    let naive = report.naive.as_ref().expect("the baseline ran");
    assert!(naive.exact, "{text}");
    assert_eq!(naive.expected_present, report.own.expected_present);
    assert_eq!(report.relays.len(), 2);
    assert!(
        report
            .raw
            .as_ref()
            .is_some_and(|raw| raw.saved == report.network.expected)
    );
    assert_eq!(report.targets.len(), 11, "{text}");
    assert!(report.live_probe.is_none(), "not asked for");
    assert!(report.reconcile.is_none(), "not asked for");
    assert!(report.own.bytes() > 0, "{text}");
    assert!(naive.bytes() > 0, "{text}");
    let engine_sent: u64 = report.relays.iter().map(|r| r.engine.bytes_sent).sum();
    assert!(
        engine_sent > 0 && engine_sent >= report.own.bytes_sent,
        "the engine counts every frame the relays counted before convergence, and the rest: {text}"
    );
    assert!(text.contains("targets:"), "{text}");
    let json = serde_json::to_value(&report).expect("serializes");
    assert_eq!(json["network"]["expected"], report.network.expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_probes_live_coverage_with_fresh_events() {
    let options = SimOptions {
        preset: Preset::Small,
        seed: 5,
        relays: Some(2),
        repos: Some(4),
        roots: Some(4),
        profiles: Profiles::B20,
        timeout: Duration::from_secs(60),
        baseline: false,
        raw_ingest: false,
        live_probe: Some(3),
        ..SimOptions::default()
    };
    let mut out = Vec::new();
    let report = run_sim(&options, &mut out).await.expect("sim runs");
    let text = String::from_utf8_lossy(&out);
    assert!(report.converged(), "{text}");
    let probe = report.live_probe.as_ref().expect("probed");
    assert!(probe.settled, "{text}");
    // Three repository comments per sampled repository, three replies per root.
    assert!(probe.sent >= 9, "{text}");
    assert!(probe.complete(), "{text}");
    let target = report
        .targets
        .iter()
        .find(|t| t.name.contains("live probe"))
        .expect("the probe's target");
    assert_eq!(target.met, Some(true), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_measures_a_reconciliation_of_the_complete_store() {
    let options = SimOptions {
        preset: Preset::Small,
        seed: 4,
        relays: Some(1),
        repos: Some(2),
        roots: Some(6),
        replies_per_root: Some(4),
        profiles: Profiles::B20,
        timeout: Duration::from_secs(60),
        baseline: false,
        raw_ingest: false,
        reconcile: true,
        ..SimOptions::default()
    };
    let mut out = Vec::new();
    let report = run_sim(&options, &mut out).await.expect("sim runs");
    let text = String::from_utf8_lossy(&out);
    assert!(report.converged(), "{text}");
    let reconcile = report.reconcile.as_ref().expect("measured");
    assert!(reconcile.settled, "{text}");
    assert_eq!(reconcile.events_downloaded, 0, "{text}");
    assert_eq!(reconcile.events_saved, 0, "{text}");
    assert!(reconcile.neg_opens > 0, "it reconciled by NIP-77: {text}");
    assert!(reconcile.full_sync_settled, "{text}");
    assert!(reconcile.full_sync_bytes >= report.own.bytes(), "{text}");
    assert!(
        reconcile.bytes() > 0 && reconcile.bytes() < reconcile.full_sync_bytes,
        "{text}"
    );
    assert_eq!(
        reconcile.sent_by_verb.values().sum::<u64>(),
        reconcile.bytes_sent,
        "{text}"
    );
    assert!(text.contains("reconciliation by a restart"), "{text}");
    let daily = report.daily.as_ref().expect("measured");
    assert!(daily.settled, "{text}");
    assert_eq!(daily.events_downloaded, 0, "{text}");
    assert_eq!(daily.events_saved, 0, "{text}");
    assert!(
        daily.bytes() > 0 && daily.bytes() < daily.full_sync_bytes,
        "the daily run was counted on the connections that stayed up: {text}"
    );
    assert!(
        text.contains("daily reconciliation, connections up"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_reports_outbox_only_events_and_the_baseline_reads_outbox_relays() {
    let options = SimOptions {
        preset: Preset::Small,
        seed: 5,
        relays: Some(2),
        repos: Some(3),
        // Enough roots per repository that contributors take part in one more than once: only
        // then may an event of theirs go only to their outbox relay.
        roots: Some(60),
        outbox_relays: Some(1),
        outbox_authors: Some(1.0),
        outbox_share: Some(0.5),
        profiles: Profiles::Mixed,
        // The daemon's phase ends at convergence or at this deadline, whichever is first.
        timeout: Duration::from_secs(5),
        raw_ingest: false,
        ..SimOptions::default()
    };
    let mut out = Vec::new();
    let report = run_sim(&options, &mut out).await.expect("sim runs");
    let text = String::from_utf8_lossy(&out);
    let outbox = report.outbox.as_ref().expect("an outbox report");
    assert_eq!((outbox.relays, report.relays.len()), (1, 3), "{text}");
    assert!(report.relays[2].outbox && !report.relays[0].outbox && !report.relays[1].outbox);
    // The outbox relay takes the next profile in turn, with its strict proxy.
    assert_eq!(
        report.relays[2].profile,
        Profiles::Mixed.configs()[2].name,
        "{text}"
    );
    assert!(outbox.expected_only_on_outbox > 0, "{text}");
    assert!(outbox.own_only_on_outbox <= outbox.expected_only_on_outbox);
    // The baseline reads the outbox relay too and ends with the complete set.
    let naive = report.naive.as_ref().expect("the baseline ran");
    assert!(naive.exact, "{text}");
    assert_eq!(
        outbox.naive_only_on_outbox,
        Some(outbox.expected_only_on_outbox)
    );
    assert_eq!(
        outbox.naive_behind_outbox,
        Some(outbox.expected_behind_outbox)
    );
    let naive_outbox = report.relays[2].naive.as_ref().expect("counted");
    assert!(naive_outbox.req_starts > 0, "{text}");
    assert!(text.contains("outbox-only events held"), "{text}");
    assert!(
        text.contains("expected events only on outbox relays"),
        "{text}"
    );
    let json = serde_json::to_value(&report).expect("serializes");
    assert_eq!(
        json["outbox"]["expected_only_on_outbox"],
        outbox.expected_only_on_outbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_over_one_own_relay_converge_and_report_each_shard() {
    let options = SimOptions {
        preset: Preset::Small,
        seed: 3,
        relays: Some(3),
        repos: Some(3),
        roots: Some(3),
        // A second-generation descendant is found only by the shard that fetched its parent
        // (docs/deploy/shards.md): this network has none.
        descendants_per_reply: Some(0),
        profiles: Profiles::Mixed,
        batch_window: Duration::from_millis(200),
        timeout: Duration::from_secs(60),
        first_sync_by_req: true,
        shards: Some(2),
        ..SimOptions::default()
    };
    let mut out = Vec::new();
    let report = run_sim(&options, &mut out).await.expect("sim runs");
    let text = String::from_utf8_lossy(&out);
    assert!(report.converged(), "{text}");
    assert!(report.naive.is_none() && report.raw.is_none(), "{text}");
    let shards = report.shards.as_ref().expect("per-shard figures");
    assert_eq!(shards.count, 2);
    let names: Vec<&str> = shards.shards.iter().map(|s| s.shard.as_str()).collect();
    assert_eq!(names, ["0/2", "1/2"]);
    // Every relay is one shard's, and each shard tracked only its own.
    assert_eq!(
        shards.shards.iter().map(|s| s.relays_owned).sum::<usize>(),
        report.relays.len()
    );
    for shard in &shards.shards {
        assert!(shard.relays_tracked <= shard.relays_owned, "{text}");
        assert_eq!(shard.connections as u64, shard.sessions, "{text}");
    }
    assert_eq!(
        shards
            .shards
            .iter()
            .map(|s| s.req_starts + s.neg_opens)
            .sum::<usize>(),
        report.own.starts(),
        "{text}"
    );
    assert!(text.contains("busy (s)"), "{text}");
    let json = serde_json::to_value(&report).expect("serializes");
    assert_eq!(json["shards"]["count"], 2);
}
