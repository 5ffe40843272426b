//! Running cargo and reporting progress.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root: the parent of this crate's manifest directory.
pub(crate) fn workspace_root() -> Result<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .context("xtask manifest directory has no parent")
}

/// Prints a line of progress on standard error.
#[allow(clippy::print_stderr)]
pub(crate) fn say(line: &str) {
    eprintln!("{line}");
}

/// Announces one step of a command.
pub(crate) fn step(name: &str) {
    say(&format!("\n==> {name}"));
}

/// Runs `cargo <args>` in `root` with extra environment variables; fails on a non-zero exit.
pub(crate) fn cargo(root: &Path, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(&cargo)
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(root)
        .status()
        .with_context(|| format!("starting `cargo {}`", args.join(" ")))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Runs `cargo <args>` in `root` and returns its standard output.
pub(crate) fn cargo_output(root: &Path, args: &[&str]) -> Result<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args(args)
        .current_dir(root)
        .output()
        .with_context(|| format!("starting `cargo {}`", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "`cargo {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8(output.stdout).context("cargo printed non-UTF-8 output")
}
