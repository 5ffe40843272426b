//! The sim's report: the design's targets checked against a run, and the human-readable
//! summary (per-relay table, both sides side by side, ratios).

use std::io::Write;

use super::{SimReport, TargetCheck};

/// Largest idle daemon resident set, in MiB.
pub(super) const IDLE_RSS_TARGET_MIB: u64 = 150;
/// Least share of the raw ingest rate sync should reach.
pub(super) const INGEST_SHARE_TARGET: f64 = 0.70;
/// Least ratio of naive to own starts.
pub(super) const STARTS_RATIO_TARGET: f64 = 5.0;
/// Convergence within this multiple of the pacing bound.
pub(super) const PACING_SLACK: f64 = 1.2;
/// Largest share of a full REQ re-sync's bytes the reconciliation of a complete store may move.
pub(super) const RECONCILE_BYTES_TARGET: f64 = 0.01;

fn check(name: &str, target: &str, actual: String, met: Option<bool>) -> TargetCheck {
    TargetCheck {
        name: name.to_owned(),
        target: target.to_owned(),
        actual,
        met,
    }
}

/// Naive starts over own starts; `None` without a baseline or own starts.
pub(super) fn starts_ratio(report: &SimReport) -> Option<f64> {
    let naive = report.naive.as_ref()?;
    let own = report.own.starts();
    (own > 0).then(|| naive.starts() as f64 / own as f64)
}

/// Sync's expected-events rate over the raw ingest rate.
pub(super) fn ingest_share(report: &SimReport) -> Option<f64> {
    let raw = report.raw.as_ref()?;
    (raw.events_per_sec > 0.0).then(|| report.own.events_per_sec / raw.events_per_sec)
}

/// The design's targets for this run.
pub(super) fn targets(report: &SimReport) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    out.push(check(
        "converged to exactly the expected set",
        "yes",
        format!(
            "{}/{} expected, {} excluded held",
            report.own.expected_present, report.network.expected, report.own.excluded_present
        ),
        Some(report.own.exact),
    ));
    let refusals = report.own.total_refusals();
    out.push(check(
        "refusals",
        "0",
        refusals.to_string(),
        Some(refusals == 0),
    ));
    let over: Vec<String> = report
        .relays
        .iter()
        .filter(|r| r.engine.peak_live_subscriptions > r.floor.floor + 1)
        .map(|r| {
            format!(
                "{} live vs floor {}",
                r.engine.peak_live_subscriptions, r.floor.floor
            )
        })
        .collect();
    out.push(check(
        "live subscriptions per relay",
        "<= byte floor + 1",
        if over.is_empty() {
            "all relays within".to_owned()
        } else {
            format!("{} relays over: {}", over.len(), over.join(", "))
        },
        Some(over.is_empty()),
    ));
    let uncovered: Vec<String> = report
        .relays
        .iter()
        .filter(|r| r.engine.catch_up_filters > 0)
        .map(|r| format!("{} filters", r.engine.catch_up_filters))
        .collect();
    let extra: Vec<usize> = report
        .relays
        .iter()
        .map(|r| r.engine.extra_connections)
        .collect();
    out.push(check(
        "live coverage left to the paced catch-up at the end",
        "0 filters on every relay",
        format!(
            "{}; extra live connections per relay {}-{}",
            if uncovered.is_empty() {
                "none".to_owned()
            } else {
                format!("{} relays: {}", uncovered.len(), uncovered.join(", "))
            },
            extra.iter().min().copied().unwrap_or(0),
            extra.iter().max().copied().unwrap_or(0),
        ),
        Some(uncovered.is_empty()),
    ));
    let probe = report.live_probe.as_ref();
    out.push(check(
        "fresh events for tracked items arrive live (live probe)",
        "all",
        probe.map_or("not measured".to_owned(), |p| {
            let missed: Vec<String> = p
                .by_tag
                .iter()
                .filter(|(_, (sent, arrived))| arrived < sent)
                .map(|(tag, (sent, arrived))| format!("{tag} {arrived}/{sent}"))
                .collect();
            format!(
                "{}/{} arrived{}{}",
                p.arrived,
                p.sent,
                if missed.is_empty() {
                    String::new()
                } else {
                    format!(" (missed: {})", missed.join(", "))
                },
                if p.settled {
                    ""
                } else {
                    ", first sync not settled"
                }
            )
        }),
        probe.map(|p| p.settled && p.complete()),
    ));
    let bound = report.pacing_bound_ms as f64 * PACING_SLACK;
    out.push(check(
        "convergence time",
        "<= 1.2 x pacing bound",
        format!(
            "{:.1}s vs bound {:.1}s ({:.2}x)",
            report.own.wall_ms as f64 / 1000.0,
            report.pacing_bound_ms as f64 / 1000.0,
            if report.pacing_bound_ms > 0 {
                report.own.wall_ms as f64 / report.pacing_bound_ms as f64
            } else {
                0.0
            }
        ),
        Some(report.own.exact && report.own.wall_ms as f64 <= bound),
    ));
    let ratio = starts_ratio(report);
    let same = report.naive.as_ref().map(|n| n.exact && report.own.exact);
    out.push(check(
        "REQ/NEG starts vs naive",
        ">= 5x fewer, identical final sets",
        match (ratio, same) {
            (Some(ratio), Some(same)) => format!(
                "{ratio:.2}x fewer; final sets {}",
                if same { "identical" } else { "differ" }
            ),
            _ => "not measured".to_owned(),
        },
        ratio
            .zip(same)
            .map(|(ratio, same)| same && ratio >= STARTS_RATIO_TARGET),
    ));
    let share = ingest_share(report);
    out.push(check(
        "sync throughput vs raw ingest",
        ">= 70 %",
        share.map_or("not measured".to_owned(), |s| format!("{:.1} %", s * 100.0)),
        share.map(|s| s >= INGEST_SHARE_TARGET),
    ));
    // The daily reconciliation where it was measured; a restart's otherwise.
    let reconcile = report.daily.as_ref().or(report.reconcile.as_ref());
    let ratio = reconcile.and_then(|r| r.worst_ratio());
    out.push(check(
        "daily reconciliation of the complete store vs a full REQ re-sync",
        "<= 1 % of the bytes of the cheaper full sync",
        match (reconcile, ratio) {
            (Some(r), Some(ratio)) => format!(
                "{:.2} % ({} of {} bytes){}",
                ratio * 100.0,
                r.bytes(),
                r.naive_bytes
                    .map_or(r.full_sync_bytes, |naive| naive.min(r.full_sync_bytes)),
                match (r.full_sync_settled, r.settled) {
                    (true, true) => "",
                    (false, _) => ", first sync not settled",
                    (true, false) => ", not settled",
                }
            ),
            _ => "not measured".to_owned(),
        },
        reconcile
            .zip(ratio)
            .map(|(r, ratio)| r.settled && r.full_sync_settled && ratio <= RECONCILE_BYTES_TARGET),
    ));
    out.push(check(
        "events downloaded again by the reconciliation",
        "0",
        reconcile.map_or("not measured".to_owned(), |r| {
            r.events_downloaded.to_string()
        }),
        reconcile.map(|r| r.settled && r.events_downloaded == 0),
    ));
    let idle = report.idle.as_ref();
    out.push(check(
        "idle daemon RSS",
        &format!("< {IDLE_RSS_TARGET_MIB} MiB"),
        idle.map_or("not measured".to_owned(), |i| {
            format!(
                "{} MiB ({} MiB anonymous; {}){}",
                i.memory.rss_kib / 1024,
                i.memory.anon_kib / 1024,
                if i.from_empty {
                    "after its own first sync"
                } else {
                    "restarted over the synced store"
                },
                if i.settled { "" } else { ", not settled" }
            )
        }),
        idle.map(|i| i.memory.rss_kib / 1024 < IDLE_RSS_TARGET_MIB),
    ));
    out
}

/// Writes the report: per relay, both sides, ratios, targets.
pub fn write_report(out: &mut (dyn Write + Send), report: &SimReport) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<24} {:>5} {:>6} {:>5} {:>7} {:>6} {:>6} {:>8} {:>6} {:>7}",
        "relay (profile)",
        "floor",
        "live",
        "peak",
        "REQ",
        "NEG",
        "bg",
        "refused",
        "naive",
        "n.refus"
    )?;
    for relay in &report.relays {
        let profile = relay.profile.split_whitespace().next().unwrap_or_default();
        let port = relay.url.rsplit(':').next().unwrap_or_default();
        writeln!(
            out,
            "{:<24} {:>5} {:>6} {:>5} {:>7} {:>6} {:>6} {:>8} {:>6} {:>7}",
            format!("{port} ({profile}){}", if relay.outbox { "*" } else { "" }),
            relay.floor.floor,
            relay.engine.peak_live_subscriptions,
            relay.own.peak_open_subscriptions,
            relay.own.req_starts,
            relay.own.neg_opens,
            relay.background_starts,
            relay.own.total_refusals(),
            relay
                .naive
                .as_ref()
                .map_or("-".to_owned(), |n| n.starts().to_string()),
            relay
                .naive
                .as_ref()
                .map_or("-".to_owned(), |n| n.total_refusals().to_string()),
        )?;
    }
    writeln!(
        out,
        "(floor: byte floor of live coverage; live: most live subscriptions the engine held; peak: most REQs open at once on the relay; bg: background starts{})",
        if report.outbox.is_some() {
            "; *: outbox relay, listed by no announcement"
        } else {
            ""
        }
    )?;
    writeln!(out)?;
    writeln!(out, "{:<28} {:>14} {:>14}", "", "grasp-sync", "naive")?;
    let naive = report.naive.as_ref();
    let row = |out: &mut (dyn Write + Send), name: &str, own: String, naive: Option<String>| {
        writeln!(
            out,
            "{:<28} {:>14} {:>14}",
            name,
            own,
            naive.unwrap_or_else(|| "-".to_owned())
        )
    };
    row(
        out,
        "wall time (s)",
        format!("{:.1}", report.own.wall_ms as f64 / 1000.0),
        naive.map(|n| format!("{:.1}", n.wall_ms as f64 / 1000.0)),
    )?;
    row(
        out,
        "REQ starts",
        report.own.req_starts.to_string(),
        naive.map(|n| n.req_starts.to_string()),
    )?;
    row(
        out,
        "NEG starts",
        report.own.neg_opens.to_string(),
        naive.map(|n| n.neg_opens.to_string()),
    )?;
    row(
        out,
        "refusals",
        report.own.total_refusals().to_string(),
        naive.map(|n| n.total_refusals().to_string()),
    )?;
    row(
        out,
        "expected events held",
        report.own.expected_present.to_string(),
        naive.map(|n| n.expected_present.to_string()),
    )?;
    row(
        out,
        "excluded events held",
        report.own.excluded_present.to_string(),
        naive.map(|n| n.excluded_present.to_string()),
    )?;
    if let Some(outbox) = &report.outbox {
        outbox.write_held(out)?;
    }
    row(
        out,
        "bytes moved (KiB)",
        (report.own.bytes() / 1024).to_string(),
        naive.map(|n| (n.bytes() / 1024).to_string()),
    )?;
    row(
        out,
        "  sent / received (KiB)",
        format!(
            "{}/{}",
            report.own.bytes_sent / 1024,
            report.own.bytes_received / 1024
        ),
        naive.map(|n| format!("{}/{}", n.bytes_sent / 1024, n.bytes_received / 1024)),
    )?;
    row(
        out,
        "events stored per second",
        format!("{:.0}", report.own.events_per_sec),
        naive.map(|n| format!("{:.0}", n.events_per_sec)),
    )?;
    for (kind, count) in &report.own.refusals {
        writeln!(out, "  own refusals {kind}: {count}")?;
    }
    if let Some(naive) = naive {
        for (kind, count) in &naive.refusals {
            writeln!(out, "  naive refusals {kind}: {count}")?;
        }
    }
    if let Some(raw) = &report.raw {
        writeln!(
            out,
            "raw ingest: {} events in {:.2}s = {:.0}/s",
            raw.events,
            raw.wall_ms as f64 / 1000.0,
            raw.events_per_sec
        )?;
    }
    if let Some(first) = &report.first_daily {
        first.write(
            "first daily reconciliation, connections up (learns each relay's holdings)",
            out,
        )?;
    }
    if let Some(daily) = &report.daily {
        daily.write(
            "daily reconciliation, connections up (over the holdings)",
            out,
        )?;
    }
    if let Some(reconcile) = &report.reconcile {
        reconcile.write("reconciliation by a restart", out)?;
    }
    writeln!(
        out,
        "sim process peak RSS (relays, daemon, baseline together): {} MiB",
        report.process_memory.hwm_kib / 1024
    )?;
    writeln!(out)?;
    writeln!(out, "targets:")?;
    for target in &report.targets {
        let verdict = match target.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "n/a",
        };
        writeln!(
            out,
            "  [{verdict:>6}] {}: {} (target {})",
            target.name, target.actual, target.target
        )?;
    }
    out.flush()
}
