//! `cargo xtask fuzz [TARGET] [--seconds N]`: runs the libFuzzer targets under `fuzz/` with
//! `cargo +nightly fuzz run`, each for N seconds (default 60), every target when none is named.
//! Installs cargo-fuzz first if it is missing. Not part of `test` or `ci`: fuzzing runs for as
//! long as it is given, which no CI time budget allows.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::cmd;

/// Seconds each target runs when `--seconds` is not given.
const DEFAULT_SECONDS: u64 = 60;

const USAGE: &str = "usage: cargo xtask fuzz [TARGET] [--seconds N]";

/// Parses the arguments after `fuzz` and runs the chosen targets.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let (target, seconds) = parse_args(args)?;
    ensure_cargo_fuzz(root)?;
    let known = list_targets(root)?;
    let targets = match target {
        Some(name) if known.contains(&name) => vec![name],
        Some(name) => bail!(
            "no fuzz target `{name}`; the targets are: {}",
            known.join(", ")
        ),
        None => known,
    };
    let mut failed = Vec::new();
    for target in &targets {
        cmd::step(&format!("fuzz {target} for {seconds} s"));
        let max_total_time = format!("-max_total_time={seconds}");
        let status = nightly_cargo(root)
            .args([
                "fuzz",
                "run",
                target,
                "--",
                &max_total_time,
                "-print_final_stats=1",
            ])
            .status()
            .with_context(|| format!("starting `cargo +nightly fuzz run {target}`"))?;
        if !status.success() {
            cmd::say(&format!(
                "fuzz: {target} failed ({status}); the input is under fuzz/artifacts/{target}/"
            ));
            failed.push(target.clone());
        }
    }
    if !failed.is_empty() {
        bail!("fuzz targets failed: {}", failed.join(", "));
    }
    cmd::step("fuzzing found nothing");
    Ok(())
}

/// `[TARGET] [--seconds N]`, in either order.
fn parse_args(args: &[String]) -> Result<(Option<String>, u64)> {
    let mut target = None;
    let mut seconds = DEFAULT_SECONDS;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = args
                    .next()
                    .with_context(|| format!("--seconds needs a value\n{USAGE}"))?;
                seconds = value.parse().ok().filter(|n| *n > 0).with_context(|| {
                    format!("--seconds takes a whole number above 0, got `{value}`")
                })?;
            }
            flag if flag.starts_with('-') => bail!("unknown option `{flag}`\n{USAGE}"),
            name if target.is_none() => target = Some(name.to_owned()),
            extra => bail!("unexpected argument `{extra}`\n{USAGE}"),
        }
    }
    Ok((target, seconds))
}

/// Installs cargo-fuzz unless `cargo fuzz` already runs.
fn ensure_cargo_fuzz(root: &Path) -> Result<()> {
    let present = nightly_cargo(root)
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if present {
        return Ok(());
    }
    cmd::step("installing cargo-fuzz");
    let status = Command::new("cargo")
        .args(["install", "cargo-fuzz", "--locked"])
        .current_dir(root)
        .status()
        .context("starting `cargo install cargo-fuzz --locked`")?;
    if !status.success() {
        bail!("`cargo install cargo-fuzz --locked` failed ({status})");
    }
    Ok(())
}

/// The targets `fuzz/Cargo.toml` declares, as `cargo fuzz list` prints them.
fn list_targets(root: &Path) -> Result<Vec<String>> {
    let output = nightly_cargo(root)
        .args(["fuzz", "list"])
        .output()
        .context("starting `cargo +nightly fuzz list`")?;
    if !output.status.success() {
        bail!(
            "`cargo +nightly fuzz list` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let targets: Vec<String> = String::from_utf8(output.stdout)
        .context("cargo fuzz printed non-UTF-8 output")?
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    if targets.is_empty() {
        bail!("`cargo +nightly fuzz list` names no target");
    }
    Ok(targets)
}

/// `cargo +nightly` through the rustup proxy, in `root`, without the toolchain choice of the
/// cargo that runs this xtask (cargo-fuzz needs nightly).
fn nightly_cargo(root: &Path) -> Command {
    let mut command = Command::new("cargo");
    command
        .arg("+nightly")
        .current_dir(root)
        .env_remove("CARGO")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC");
    command
}
