//! Structural rules checked by `cargo xtask tidy`.
//!
//! 1. Every Rust source file (crates, xtask and fuzz targets) opens with a `//!` paragraph saying
//!    what it owns.
//! 2. The core crates (see [`crate::CORE_CRATES`]) depend, directly or transitively, on no async
//!    runtime, no Nostr client or relay crate and no socket crate.
//! 3. The core crates' library code reads no clock: time is passed in.
//! 4. The daemon's production build (default features) does not depend on the testkit: only
//!    its `sim` feature and its tests do.
//! 5. The engine's sans-IO machine (`grasp-sync-engine/src/machine.rs` and `machine/`) uses no
//!    async code, no runtime, no Nostr client, no socket or channel, spawns nothing, reads no
//!    clock (its tests may take an origin instant), and reaches into the rest of its crate for
//!    nothing: only core crates and the machine's own modules.
//!
//! Every violation is listed; the command fails if there is any.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::{BIN_CRATE, CORE_CRATES, cmd};

/// The test-support crate, which the production build must not contain.
const TESTKIT_CRATE: &str = "grasp-sync-testkit";

/// Crates the core crates must not pull in, with the reason shown on failure.
const FORBIDDEN_IN_CORE: &[(&str, &str)] = &[
    ("tokio", "async runtime"),
    ("async-std", "async runtime"),
    ("smol", "async runtime"),
    ("mio", "socket I/O"),
    ("socket2", "socket I/O"),
    ("hyper", "HTTP client/server"),
    ("reqwest", "HTTP client"),
    ("tungstenite", "WebSocket"),
    ("tokio-tungstenite", "WebSocket"),
    ("async-wsocket", "WebSocket"),
    ("nostr-sdk", "Nostr client"),
    ("nostr-relay-pool", "Nostr client"),
    ("nostr-relay-builder", "Nostr relay"),
    ("nostr-lmdb", "database"),
    ("nostr-database", "database"),
];

/// Clock reads that library code in the core crates must not contain.
const CLOCK_READS: &[&str] = &[
    "Instant::now(",
    "SystemTime::now(",
    "Timestamp::now(",
    "thread::sleep(",
    "Utc::now(",
];

/// The engine's sans-IO module tree: the file and the directory of its modules.
const MACHINE_TREE: (&str, &str) = (
    "crates/grasp-sync-engine/src/machine.rs",
    "crates/grasp-sync-engine/src/machine",
);

/// What code in the machine tree must not contain, with the reason shown on failure.
const FORBIDDEN_IN_MACHINE: &[(&str, &str)] = &[
    ("tokio", "an async runtime"),
    ("async ", "async code"),
    (".await", "async code"),
    ("futures", "async code"),
    ("nostr_sdk", "a Nostr client"),
    ("nostr_relay_pool", "a Nostr client"),
    ("std::net", "sockets"),
    ("mpsc", "a channel"),
    ("spawn", "a spawned task"),
    ("std::thread", "threads"),
    (
        "crate::",
        "the engine outside the machine (use `crate::machine::` or a core crate)",
    ),
];

/// Runs every tidy check and reports all violations together.
pub(crate) fn run(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    check_module_docs(root, &mut problems)?;
    check_core_dependencies(root, &mut problems)?;
    check_core_clock_reads(root, &mut problems)?;
    check_production_dependencies(root, &mut problems)?;
    check_machine_purity(root, &mut problems)?;
    if problems.is_empty() {
        cmd::say("tidy: ok");
        return Ok(());
    }
    for problem in &problems {
        cmd::say(&format!("tidy: {problem}"));
    }
    bail!("tidy found {} problem(s)", problems.len())
}

fn check_module_docs(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    for dir in ["crates", "xtask", "fuzz"] {
        for file in rust_files(&root.join(dir))? {
            let text =
                fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let first = text.lines().map(str::trim).find(|line| !line.is_empty());
            if !first.is_some_and(|line| line.starts_with("//!")) {
                problems.push(format!(
                    "{} does not open with a `//!` module comment",
                    relative(root, &file)
                ));
            }
        }
    }
    Ok(())
}

fn check_core_dependencies(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    for krate in CORE_CRATES {
        let names = normal_dependencies(root, krate)?;
        for (forbidden, why) in FORBIDDEN_IN_CORE {
            if names.iter().any(|name| name == forbidden) {
                problems.push(format!("{krate} depends on {forbidden} ({why})"));
            }
        }
    }
    Ok(())
}

fn check_production_dependencies(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let names = normal_dependencies(root, BIN_CRATE)?;
    if names.iter().any(|name| name == TESTKIT_CRATE) {
        problems.push(format!(
            "{BIN_CRATE} depends on {TESTKIT_CRATE} in its default build \
             (test relays belong behind the `sim` feature or in dev-dependencies)"
        ));
    }
    Ok(())
}

fn check_core_clock_reads(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    for krate in CORE_CRATES {
        for file in rust_files(&root.join("crates").join(krate).join("src"))? {
            if file.file_name().is_some_and(|name| name == "tests.rs") {
                continue;
            }
            let text =
                fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if let Some(read) = CLOCK_READS.iter().find(|read| code.contains(*read)) {
                    problems.push(format!(
                        "{}:{} reads a clock (`{read}`): core crates take time as an argument",
                        relative(root, &file),
                        number + 1
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_machine_purity(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let (file, dir) = MACHINE_TREE;
    let mut files = vec![root.join(file)];
    files.extend(rust_files(&root.join(dir))?);
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let test_file = file.file_name().is_some_and(|name| name == "tests.rs");
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let code = code.replace("crate::machine::", "");
            let found = FORBIDDEN_IN_MACHINE
                .iter()
                .find(|(token, _)| code.contains(token))
                .map(|(token, why)| (*token, *why))
                .or_else(|| {
                    CLOCK_READS
                        .iter()
                        .find(|read| !test_file && code.contains(*read))
                        .map(|read| (*read, "a clock read: the machine takes time as an argument"))
                });
            if let Some((token, why)) = found {
                problems.push(format!(
                    "{}:{} uses `{token}` ({why}): the machine is sans-IO",
                    relative(root, &file),
                    number + 1
                ));
            }
        }
    }
    Ok(())
}

/// The names of every package in `krate`'s normal dependency tree with its default
/// features, `krate` included, sorted and deduplicated.
fn normal_dependencies(root: &Path, krate: &str) -> Result<Vec<String>> {
    let tree = cmd::cargo_output(
        root,
        &[
            "tree",
            "--package",
            krate,
            "--edges",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ],
    )?;
    let mut names: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if !dir.exists() {
        return Ok(files);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in
            fs::read_dir(&current).with_context(|| format!("listing {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name == "target") {
                    continue;
                }
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
