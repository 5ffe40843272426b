//! `cargo xtask simulate [--paging|--discovered|--restart] [--seeds N] [--first S] [--seed S]`:
//! the engine's deterministic
//! simulation (`crates/grasp-sync-engine/tests/sim`) for more seeds than `test` runs, or one
//! seed alone to replay it, in a release build. `--seeds N` runs seeds `S..S+N` from
//! `--first S` (default 0); `--seed S` runs seed `S` and prints what it did, with the engine's
//! logs when `RUST_LOG` asks for them. `--paging` draws larger repositories on relays with
//! small pages, so history pages on every quirk; `--discovered` makes only the first relay a
//! bootstrap relay, holding every announcement, so the others are found by discovery;
//! `--restart` stops the converged engine, lets relays store new events, and restarts it over
//! the same store and kept holdings. Without any, small networks run, then half as many seeds
//! of `--discovered` and of `--restart`.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::cmd;

const USAGE: &str = "usage: cargo xtask simulate [--paging|--discovered|--restart] [--seeds N] [--first S] [--seed S]";

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut envs: Vec<(&str, String)> = Vec::new();
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        if flag == "--paging" {
            envs.push(("GRASP_SYNC_SIM_PAGING", "1".to_owned()));
            continue;
        }
        if flag == "--discovered" {
            envs.push(("GRASP_SYNC_SIM_DISCOVERED", "1".to_owned()));
            continue;
        }
        if flag == "--restart" {
            envs.push(("GRASP_SYNC_SIM_RESTART", "1".to_owned()));
            continue;
        }
        let name = match flag.as_str() {
            "--seeds" => "GRASP_SYNC_SIM_SEEDS",
            "--first" => "GRASP_SYNC_SIM_FIRST",
            "--seed" => "GRASP_SYNC_SIM_SEED",
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        };
        let value = rest
            .next()
            .with_context(|| format!("{flag} needs a number\n{USAGE}"))?;
        value
            .parse::<u64>()
            .with_context(|| format!("{flag} {value}: not a number\n{USAGE}"))?;
        envs.push((name, value.clone()));
    }
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    cmd::step("deterministic simulation");
    cmd::cargo(
        root,
        &[
            "test",
            "--release",
            "--package",
            "grasp-sync-engine",
            "--test",
            "sim",
        ],
        &envs,
    )
}
