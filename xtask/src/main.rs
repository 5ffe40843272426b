//! Project automation, run as `cargo xtask <command>`.
//!
//! - `test`: every crate's tests, crate by crate in dependency order, then the doctests. The
//!   daemon's tests include a browser test of its status page, which needs headless Chromium
//!   (`/usr/bin/chromium`, or `$CHROMIUM`); `test` installs Debian's `chromium` with apt-get
//!   when it is missing, and stops early with a clear message when it cannot.
//! - `ci`: formatting check, clippy with warnings denied, `tidy`, `test`, rustdoc with warnings
//!   denied, and `cargo package` of every published crate (built from its package, as a registry
//!   would). If it passes locally, CI is green.
//! - `tidy`: the project's structural rules (see the `tidy` module).
//! - `bench`: the core crates' criterion benches and `grasp-sync sim` at three sizes, as one
//!   table and JSON under `target/bench/` (see the `bench` module).
//! - `fuzz [TARGET] [--seconds N]`: the libFuzzer targets under `fuzz/`, N seconds each
//!   (default 60), every target when none is named (see the `fuzz` module). Nightly only, and
//!   never part of `test` or `ci`.

mod bench;
mod cmd;
mod fuzz;
mod tidy;

use anyhow::{Result, bail};

/// Workspace crates in dependency order: each crate comes after everything it depends on.
pub(crate) const CRATES_IN_ORDER: &[&str] = &[
    "grasp-sync-model",
    "grasp-sync-filters",
    "grasp-sync-health",
    "grasp-sync-ledger",
    "grasp-sync-testkit",
    "grasp-sync-engine",
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

const USAGE: &str = "usage: cargo xtask <test|ci|tidy|bench|fuzz [TARGET] [--seconds N]>";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = cmd::workspace_root()?;
    match args.first().map(String::as_str) {
        Some("test") => test(&root),
        Some("ci") => ci(&root),
        Some("tidy") => tidy::run(&root),
        Some("bench") => bench::run(&root),
        Some("fuzz") => fuzz::run(&root, &args[1..]),
        Some("help" | "--help" | "-h") => {
            cmd::say(USAGE);
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n{USAGE}"),
        None => bail!("{USAGE}"),
    }
}

/// Runs each crate's tests in dependency order, then every doctest.
fn test(root: &std::path::Path) -> Result<()> {
    need_chromium()?;
    for krate in CRATES_IN_ORDER {
        cmd::step(&format!("tests of {krate}"));
        cmd::cargo(root, &["test", "--package", krate, "--tests"], &[])?;
    }
    cmd::step("doctests");
    cmd::cargo(root, &["test", "--workspace", "--doc"], &[])?;
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
    cmd::step("clippy");
    cmd::cargo(
        root,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
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
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    cmd::step("package");
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
