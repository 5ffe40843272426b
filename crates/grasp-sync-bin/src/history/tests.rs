//! Tests of the history: what each view keeps, its bounds, and what a sample sums.

use std::time::Duration;

use grasp_sync_engine::{EngineStatus, RelayStatus};

use super::*;

fn sample_at(secs: u64, stored: u64) -> Sample {
    Sample {
        at: Duration::from_secs(secs),
        events_stored: stored,
        starts: 0,
        refusals: 0,
        relays: BTreeMap::new(),
    }
}

fn check(seconds: &[u64], hour: &[u64], day: &[u64]) {
    let mut history = StatusHistory::default();
    for &secs in seconds {
        history.handle_sample(sample_at(secs, secs));
    }
    let hour_kept: Vec<u64> = history.hour().map(|s| s.at.as_secs()).collect();
    let day_kept: Vec<u64> = history.day().map(|s| s.at.as_secs()).collect();
    assert_eq!(hour_kept, hour, "hour");
    assert_eq!(day_kept, day, "day");
}

#[test]
fn the_first_sample_starts_both_views_and_the_day_keeps_one_per_interval() {
    check(&[0, 10, 20], &[0, 10, 20], &[0]);
    check(
        &[0, 150, 300, 450, 610],
        &[0, 150, 300, 450, 610],
        &[0, 300, 610],
    );
}

#[test]
fn the_hour_and_the_day_stay_bounded() {
    let mut history = StatusHistory::default();
    let total = (DAY_SAMPLES as u64 + 10) * DAY_INTERVAL.as_secs() / SAMPLE_INTERVAL.as_secs();
    for i in 0..total {
        history.handle_sample(sample_at(i * SAMPLE_INTERVAL.as_secs(), i));
    }
    assert_eq!(history.hour().count(), HOUR_SAMPLES);
    assert_eq!(history.day().count(), DAY_SAMPLES);
    let newest = history.hour().last().expect("newest").at;
    let oldest = history.hour().next().expect("oldest").at;
    assert_eq!(newest - oldest, SAMPLE_INTERVAL * (HOUR_SAMPLES as u32 - 1));
}

#[test]
fn a_sample_sums_the_relays_and_keeps_each_relays_lag() {
    let mut status = EngineStatus::default();
    let relay = |saved, live, historic, pending, queued| RelayStatus {
        events_saved: saved,
        req_starts_live: live,
        req_starts_historic: historic,
        pending_batches: pending,
        queued_starts: queued,
        ..RelayStatus::default()
    };
    status.relays.insert("ws://a/".into(), relay(5, 1, 2, 3, 4));
    status.relays.insert("ws://b/".into(), relay(7, 0, 1, 0, 0));
    status
        .relays
        .get_mut("ws://b/")
        .expect("b")
        .refusals
        .insert("rate_limited".into(), 2);
    let sample = Sample::of(&status, Duration::from_secs(3));
    assert_eq!(sample.events_stored, 12);
    assert_eq!(sample.starts, 4);
    assert_eq!(sample.refusals, 2);
    assert_eq!(
        sample.relays[&Arc::from("ws://a/")],
        RelaySample { starts: 3, lag: 7 }
    );
    assert_eq!(
        sample.relays[&Arc::from("ws://b/")],
        RelaySample { starts: 1, lag: 0 }
    );
}

#[test]
fn recorded_samples_share_each_relay_url() {
    let mut status = EngineStatus::default();
    status
        .relays
        .insert("ws://a/".into(), RelayStatus::default());
    let history = SharedHistory::new();
    history.handle_status(&status);
    history.handle_status(&status);
    history.read(|history| {
        let urls: Vec<&Arc<str>> = history.hour().flat_map(|s| s.relays.keys()).collect();
        assert_eq!(urls.len(), 2);
        assert!(Arc::ptr_eq(urls[0], urls[1]));
    });
}

#[test]
fn samples_keep_the_relays_with_most_lag_within_their_caps() {
    let mut status = EngineStatus::default();
    for i in 0..(MAX_SAMPLED_RELAYS + 5) {
        let relay = RelayStatus {
            pending_batches: i,
            ..RelayStatus::default()
        };
        status.relays.insert(format!("ws://r{i:05}/"), relay);
    }
    let history = SharedHistory::new();
    history.handle_status(&status);
    history.read(|history| {
        let hour = history.hour().next().expect("hour sample");
        assert_eq!(hour.relays.len(), MAX_SAMPLED_RELAYS);
        assert!(!hour.relays.contains_key("ws://r00004/"));
        assert!(hour.relays.contains_key("ws://r00005/"));
        let day = history.day().next().expect("day sample");
        assert_eq!(day.relays.len(), MAX_DAY_RELAYS);
        assert!(
            day.relays
                .contains_key(format!("ws://r{:05}/", MAX_SAMPLED_RELAYS + 4).as_str())
        );
    });
}
