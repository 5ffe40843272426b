//! Project automation, run as `cargo xtask <command>`.
//!
//! - `test`: every crate's tests, crate by crate in dependency order (the daemon's with its
//!   `sim` feature, and its unit tests once more without it), then the doctests, with every
//!   property test drawing from one fixed seed (`PROPTEST_RNG_SEED` picks another). The
//!   daemon's tests include a browser test of its status page, which needs headless Chromium
//!   (`/usr/bin/chromium`, or `$CHROMIUM`); `test` installs Debian's `chromium` with apt-get
//!   when it is missing, and stops early with a clear message when it cannot.
//! - `ci`: formatting check, clippy with warnings denied (default and all features), `tidy`,
//!   `test`, rustdoc with warnings denied, and `cargo package` of every published crate (built
//!   from its package, as a registry would). If it passes locally, CI is green.
//! - `tidy`: the project's structural rules (see the `tidy` module).
//! - `bench`: the core crates' criterion benches and `grasp-sync sim` at three sizes, as one
//!   table and JSON under `target/bench/` (see the `bench` module).
//! - `simulate [--seeds N] [--first S] [--seed S]`: the engine's deterministic simulation
//!   for more seeds than `test` runs (200), or one seed to replay it (see the `simulate`
//!   module).
//! - `fuzz [TARGET] [--seconds N]`: the libFuzzer targets under `fuzz/`, N seconds each
//!   (default 60), every target when none is named (see the `fuzz` module). Nightly only, and
//!   never part of `test` or `ci`.

mod bench;
mod cmd;
mod fuzz;
mod simulate;
mod tidy;

use anyhow::{Result, bail};

/// Workspace crates in dependency order: each crate comes after everything it depends on
/// (the engine's tests use the testkit, which is built on the engine's `front`).
pub(crate) const CRATES_IN_ORDER: &[&str] = &[
    "grasp-sync-model",
    "grasp-sync-filters",
    "grasp-sync-health",
    "grasp-sync-ledger",
    "grasp-sync-engine",
    "grasp-sync-testkit",
    "grasp-sync-bin",
    "xtask",
];

/// The sans-IO core crates: no async runtime, no sockets, no clock.
pub(crate) const CORE_CRATES: &[&str] = &[
    "grasp-sync-model",
    "grasp-sync-filters",
    "grasp-sync-ledger",
    "grasp-sync-health",
];

/// The daemon's crate; its `sim` feature adds the `demo` and `sim` commands.
pub(crate) const BIN_CRATE: &str = "grasp-sync-bin";

const USAGE: &str = "usage: cargo xtask <test|ci|tidy|bench|simulate [--seeds N] [--seed S]|fuzz [TARGET] [--seconds N]>";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = cmd::workspace_root()?;
    match args.first().map(String::as_str) {
        Some("test") => test(&root),
        Some("ci") => ci(&root),
        Some("tidy") => tidy::run(&root),
        Some("bench") => bench::run(&root),
        Some("simulate") => simulate::run(&root, &args[1..]),
        Some("fuzz") => fuzz::run(&root, &args[1..]),
        Some("help" | "--help" | "-h") => {
            cmd::say(USAGE);
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n{USAGE}"),
        None => bail!("{USAGE}"),
    }
}

/// The seed of every property test's generator in `test`, unless `PROPTEST_RNG_SEED` is set:
/// the gate draws the same cases on every run, so it fails on a change, never on a draw.
/// A plain `cargo test` draws new cases each run, which is how new cases are explored.
const PROPTEST_SEED: &str = "20261202";

/// Runs each crate's tests in dependency order, the daemon's with the `sim` feature (its
/// `demo` and `sim` commands) and its unit tests once more without it (the production build),
/// then every doctest. Property tests draw from [`PROPTEST_SEED`].
fn test(root: &std::path::Path) -> Result<()> {
    need_chromium()?;
    let seed = std::env::var("PROPTEST_RNG_SEED").unwrap_or_else(|_| PROPTEST_SEED.to_owned());
    let envs = [("PROPTEST_RNG_SEED", seed.as_str())];
    cmd::say(&format!(
        "property tests draw from PROPTEST_RNG_SEED={seed}"
    ));
    for krate in CRATES_IN_ORDER {
        cmd::step(&format!("tests of {krate}"));
        let mut args = vec!["test", "--package", krate, "--tests"];
        if *krate == BIN_CRATE {
            args.extend(["--features", "sim"]);
        }
        cmd::cargo(root, &args, &envs)?;
    }
    cmd::step(&format!(
        "unit tests of {BIN_CRATE} without the sim feature"
    ));
    cmd::cargo(
        root,
        &["test", "--package", BIN_CRATE, "--lib", "--bins"],
        &envs,
    )?;
    cmd::step("doctests");
    cmd::cargo(root, &["test", "--workspace", "--doc"], &envs)?;
    Ok(())
}

/// Makes sure the browser the status page's test drives is there: `$CHROMIUM`, or
/// `/usr/bin/chromium`, installed from the distribution's packages with apt-get when it is
/// missing and apt-get is available; fails with what to do otherwise.
fn need_chromium() -> Result<()> {
    let chosen = std::env::var_os("CHROMIUM").map(std::path::PathBuf::from);
    let browser = chosen.clone().unwrap_or_else(|| "/usr/bin/chromium".into());
    if browser.exists() {
        return Ok(());
    }
    if chosen.is_none() && std::path::Path::new("/usr/bin/apt-get").exists() {
        cmd::step("installing chromium for the status page's browser test");
        let installed = std::process::Command::new("sh")
            .args([
                "-c",
                "apt-get update -qq && apt-get install -y -qq chromium",
            ])
            .status()
            .is_ok_and(|status| status.success());
        if installed && browser.exists() {
            return Ok(());
        }
    }
    bail!(
        "{} is missing: the status page's browser test needs headless Chromium \
         (Debian: apt-get install chromium; or set CHROMIUM)",
        browser.display()
    );
}

/// The whole CI gate, in the order that fails fastest.
fn ci(root: &std::path::Path) -> Result<()> {
    cmd::step("format check");
    cmd::cargo(root, &["fmt", "--all", "--", "--check"], &[])?;
    for features in [None, Some("--all-features")] {
        cmd::step(&format!(
            "clippy {}",
            features.unwrap_or("(default features)")
        ));
        let mut args = vec!["clippy", "--workspace", "--all-targets"];
        args.extend(features);
        args.extend(["--", "-D", "warnings"]);
        cmd::cargo(root, &args, &[])?;
    }
    cmd::step("clippy of the engine's sans-IO machine alone (without the runtime feature)");
    cmd::cargo(
        root,
        &[
            "clippy",
            "--package",
            "grasp-sync-engine",
            "--no-default-features",
            "--lib",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cmd::step("tidy");
    tidy::run(root)?;
    test(root)?;
    cmd::step("rustdoc");
    cmd::cargo(
        root,
        &["doc", "--workspace", "--no-deps", "--all-features"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    cmd::step("package");
    forget_packaged_builds(root)?;
    cmd::cargo(
        root,
        &[
            "package",
            "--workspace",
            "--exclude",
            "xtask",
            "--allow-dirty",
        ],
        &[],
    )?;
    cmd::step("ci passed");
    Ok(())
}

/// Forgets what earlier `cargo package` runs of this workspace's crates left behind. Cargo
/// builds each package against the packages of its workspace dependencies, served from a local
/// registry, and takes a registry package of a given name and version as immutable: it reuses
/// the source it unpacked once (under `$CARGO_HOME/registry/src/`) and the artifacts it built
/// from it (under the target directory), so a run after the code changed would build against
/// the old code. Both are removed for the workspace's crates.
fn forget_packaged_builds(root: &std::path::Path) -> anyhow::Result<()> {
    let crates: Vec<String> = std::fs::read_dir(root.join("crates"))?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    let mut clean = vec!["clean"];
    for krate in &crates {
        clean.extend(["-p", krate.as_str()]);
    }
    cmd::cargo(root, &clean, &[])?;
    let cargo_home = match std::env::var_os("CARGO_HOME") {
        Some(home) => std::path::PathBuf::from(home),
        None => match std::env::var_os("HOME") {
            Some(home) => std::path::PathBuf::from(home).join(".cargo"),
            None => return Ok(()),
        },
    };
    let Ok(registries) = std::fs::read_dir(cargo_home.join("registry").join("src")) else {
        return Ok(());
    };
    for registry in registries.filter_map(|entry| entry.ok()) {
        let Ok(sources) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for source in sources.filter_map(|entry| entry.ok()) {
            let name = source.file_name().to_string_lossy().into_owned();
            let ours = crates.iter().any(|krate| {
                name.strip_prefix(krate.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
            });
            if ours {
                std::fs::remove_dir_all(source.path())?;
            }
        }
    }
    Ok(())
}
