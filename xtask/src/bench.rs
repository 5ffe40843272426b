//! `cargo xtask bench`: the core crates' criterion benches with short measurement times, then
//! `grasp-sync sim` at three sizes (small, gitnostr-shaped, large) in release; prints one
//! table and writes every figure as JSON under `target/bench/`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::cmd;

/// The criterion benches: crate and bench target.
const BENCHES: &[(&str, &str)] = &[
    ("grasp-sync-model", "derive_and_diff"),
    ("grasp-sync-filters", "build_filters"),
    ("grasp-sync-ledger", "plan_live"),
    ("grasp-sync-health", "classify"),
];

/// Criterion flags that keep the whole run short.
const CRITERION_ARGS: &[&str] = &[
    "--warm-up-time",
    "0.5",
    "--measurement-time",
    "2",
    "--sample-size",
    "20",
];

/// One sim run: its name and the `grasp-sync sim` flags.
struct SimRun {
    name: &'static str,
    file: &'static str,
    args: &'static [&'static str],
}

/// The three sizes. The large size is scaled down from ten to five times the gitnostr shape
/// (4,345 repositories, 18,160 roots): at ten times, the daemon alone needs about 7 minutes to
/// converge against B = 20 relays (its background starts are paced at one per second per
/// connection), which leaves no room for the baseline within the 15-minute total.
const SIMS: &[SimRun] = &[
    SimRun {
        name: "small",
        file: "small",
        args: &[
            "--preset",
            "small",
            "--profiles",
            "mixed",
            "--timeout",
            "120s",
        ],
    },
    SimRun {
        name: "gitnostr",
        file: "gitnostr",
        args: &[
            "--preset",
            "gitnostr",
            "--profiles",
            "b20",
            "--timeout",
            "300s",
            "--reconcile",
        ],
    },
    SimRun {
        name: "large (5x)",
        file: "large",
        args: &[
            "--preset",
            "large",
            "--repos",
            "4345",
            "--roots",
            "18160",
            "--profiles",
            "b20",
            "--timeout",
            "420s",
            "--idle-rss",
            "5s",
        ],
    },
];

/// One criterion result: name and median estimate.
#[derive(Debug)]
struct BenchRow {
    name: String,
    time: String,
}

/// Runs everything and reports.
pub(crate) fn run(root: &Path) -> Result<()> {
    let started = Instant::now();
    let out_dir = root.join("target").join("bench");
    std::fs::create_dir_all(&out_dir).context("creating target/bench")?;

    let mut benches = Vec::new();
    for (krate, bench) in BENCHES {
        cmd::step(&format!("criterion: {krate} --bench {bench}"));
        let mut args = vec!["bench", "--package", krate, "--bench", bench, "--"];
        args.extend_from_slice(CRITERION_ARGS);
        let output = cmd::cargo_output(root, &args)?;
        benches.extend(parse_criterion(&output));
    }

    let mut sims = Vec::new();
    for sim in SIMS {
        cmd::step(&format!("sim: {} ({})", sim.name, sim.args.join(" ")));
        let json_path = out_dir.join(format!("sim-{}.json", sim.file));
        let _ = std::fs::remove_file(&json_path);
        let json_arg = json_path.display().to_string();
        let mut args = vec![
            "run",
            "--release",
            "--quiet",
            "--package",
            crate::BIN_CRATE,
            "--features",
            "sim",
            "--",
            "sim",
        ];
        args.extend_from_slice(sim.args);
        args.extend_from_slice(&["--json", &json_arg]);
        let sim_started = Instant::now();
        let status = cargo_status(root, &args)?;
        let wall = sim_started.elapsed().as_secs_f64();
        let report: Value = std::fs::read_to_string(&json_path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null);
        if report.is_null() {
            cmd::say(&format!("sim {} wrote no report ({status})", sim.name));
        }
        sims.push((sim, report, wall));
    }

    let table = table(&benches, &sims, started.elapsed().as_secs_f64());
    cmd::step("results");
    cmd::say(&table);
    let json = json!({
        "total_secs": started.elapsed().as_secs_f64(),
        "criterion": benches
            .iter()
            .map(|b| json!({"name": b.name, "median": b.time}))
            .collect::<Vec<_>>(),
        "sims": sims
            .iter()
            .map(|(sim, report, wall)| json!({
                "name": sim.name,
                "args": sim.args,
                "process_secs": wall,
                "report": report,
            }))
            .collect::<Vec<_>>(),
    });
    std::fs::write(
        out_dir.join("bench.json"),
        serde_json::to_string_pretty(&json)?,
    )
    .context("writing target/bench/bench.json")?;
    std::fs::write(out_dir.join("table.md"), &table).context("writing target/bench/table.md")?;
    cmd::say(&format!(
        "\nwrote target/bench/bench.json, target/bench/table.md and target/bench/sim-*.json in {:.0}s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Runs `cargo <args>` and returns its exit status without failing on a non-zero one.
fn cargo_status(root: &Path, args: &[&str]) -> Result<std::process::ExitStatus> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    Command::new(&cargo)
        .args(args)
        .env("RUST_LOG", "error")
        .current_dir(root)
        .status()
        .with_context(|| format!("starting `cargo {}`", args.join(" ")))
}

/// Bench names and median times from criterion's report lines (`name time: [lo mid hi]`,
/// the name sometimes on the line before).
fn parse_criterion(output: &str) -> Vec<BenchRow> {
    let mut rows = Vec::new();
    let mut previous = "";
    for line in output.lines() {
        if let Some((name, rest)) = line.split_once("time:") {
            let name = if name.trim().is_empty() {
                previous.trim()
            } else {
                name.trim()
            };
            let values: Vec<&str> = rest
                .trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split_whitespace()
                .collect();
            if let [_, _, mid, unit, ..] = values.as_slice() {
                rows.push(BenchRow {
                    name: name.to_owned(),
                    time: format!("{mid} {unit}"),
                });
            }
        } else if !line.trim().is_empty() {
            previous = line;
        }
    }
    rows
}

/// A number from a JSON path, as f64.
fn num(value: &Value, path: &[&str]) -> Option<f64> {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_f64)
}

fn fmt_num(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The table: criterion medians, then one row per sim size, then the targets per size.
fn table(benches: &[BenchRow], sims: &[(&SimRun, Value, f64)], total: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| criterion bench | median |");
    let _ = writeln!(out, "|---|---|");
    for bench in benches {
        let _ = writeln!(out, "| {} | {} |", bench.name, bench.time);
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| sim | relays | repos | roots | expected | converged | wall s | pacing bound s | REQ | NEG | refusals | max live / floor | naive REQ | naive refusals | naive wall s | starts ratio | sets equal | stored/s | raw ingest/s | share of raw | sim peak RSS MiB | idle RSS MiB |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (sim, r, _) in sims {
        if r.is_null() {
            let _ = writeln!(out, "| {} | no report |", sim.name);
            continue;
        }
        let own_refusals: u64 = r["own"]["refusals"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        let naive_refusals: Option<u64> = r["naive"]["refusals"]
            .as_object()
            .map(|m| m.values().filter_map(Value::as_u64).sum());
        let live_floor = r["relays"].as_array().map_or("-".to_owned(), |relays| {
            let worst = relays.iter().max_by_key(|relay| {
                let live = relay["engine"]["peak_live_subscriptions"]
                    .as_i64()
                    .unwrap_or(0);
                let floor = relay["floor"]["floor"].as_i64().unwrap_or(0);
                live - floor
            });
            worst.map_or("-".to_owned(), |relay| {
                format!(
                    "{} / {}",
                    relay["engine"]["peak_live_subscriptions"], relay["floor"]["floor"]
                )
            })
        });
        let own_starts = num(r, &["own", "req_starts"]).unwrap_or(0.0)
            + num(r, &["own", "neg_opens"]).unwrap_or(0.0);
        let naive_starts = num(r, &["naive", "req_starts"])
            .map(|req| req + num(r, &["naive", "neg_opens"]).unwrap_or(0.0));
        let ratio = naive_starts
            .filter(|_| own_starts > 0.0)
            .map(|n| n / own_starts);
        let equal = match (r["own"]["exact"].as_bool(), r["naive"]["exact"].as_bool()) {
            (Some(own), Some(naive)) => (own && naive).to_string(),
            _ => "-".to_owned(),
        };
        let stored = num(r, &["own", "events_per_sec"]);
        let raw = num(r, &["raw", "events_per_sec"]);
        let share = stored
            .zip(raw)
            .filter(|(_, raw)| *raw > 0.0)
            .map(|(s, raw)| 100.0 * s / raw);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            sim.name,
            r["network"]["relays"],
            r["network"]["repos"],
            r["network"]["roots"],
            r["network"]["expected"],
            r["own"]["exact"],
            fmt_num(num(r, &["own", "wall_ms"]).map(|ms| ms / 1000.0), 1),
            fmt_num(num(r, &["pacing_bound_ms"]).map(|ms| ms / 1000.0), 1),
            r["own"]["req_starts"],
            r["own"]["neg_opens"],
            own_refusals,
            live_floor,
            fmt_num(num(r, &["naive", "req_starts"]), 0),
            naive_refusals.map_or("-".to_owned(), |n| n.to_string()),
            fmt_num(num(r, &["naive", "wall_ms"]).map(|ms| ms / 1000.0), 1),
            fmt_num(ratio, 2),
            equal,
            fmt_num(stored, 0),
            fmt_num(raw, 0),
            share.map_or("-".to_owned(), |s| format!("{s:.1} %")),
            fmt_num(
                num(r, &["process_memory", "hwm_kib"]).map(|k| k / 1024.0),
                0
            ),
            fmt_num(
                num(r, &["idle", "memory", "rss_kib"]).map(|k| k / 1024.0),
                0
            ),
        );
    }
    let _ = writeln!(out);
    for (sim, r, _) in sims {
        let Some(targets) = r["targets"].as_array() else {
            continue;
        };
        let _ = writeln!(out, "targets, {}:", sim.name);
        for t in targets {
            let verdict = match t["met"].as_bool() {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "n/a",
            };
            let _ = writeln!(
                out,
                "- [{verdict}] {}: {} (target {})",
                t["name"].as_str().unwrap_or_default(),
                t["actual"].as_str().unwrap_or_default(),
                t["target"].as_str().unwrap_or_default()
            );
        }
    }
    let _ = writeln!(out, "\ntotal: {total:.0} s");
    out
}

#[cfg(test)]
mod tests;
