//! The `grasp-sync` executable: parses the command line, sets up logging, runs `run`, `demo`,
//! `sim` or `status` on a tokio runtime, and turns the outcome into an exit code: 0 after a
//! requested stop, 2 for an unusable configuration (or `demo` or `sim` in a build without the
//! `sim` feature), 1 for any other failure, including a sync engine that stopped on its own
//! while `run` was serving.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
#[cfg(not(feature = "sim"))]
use grasp_sync_bin::NotInThisBuild;
use grasp_sync_bin::{Cli, Command, run, run_status};
#[cfg(feature = "sim")]
use grasp_sync_bin::{DemoOptions, SimOptions, run_demo, run_sim};
use tracing_subscriber::EnvFilter;

/// The allocator of the executable: jemalloc. A restart reconciles every relay and holds the
/// coverage of every pending batch at once; once that is freed, glibc's allocator kept most of
/// it resident (at ten times the gitnostr size, 203 of an idle daemon's 363 MiB of anonymous
/// memory were free heap it had not returned), where jemalloc returns it. See
/// `docs/performance.md`, "The idle daemon's memory".
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (the `_RJEM_MALLOC_CONF` environment variable is read
/// after them and overrides them): freed pages go back to the system after one second unused
/// (`dirty_decay_ms:1000`), not ten. Pages kept for reuse were handed to long-lived allocations
/// that never write most of them, such as each relay connection's event verification table
/// (4 MiB, written only as events arrive), and stayed resident. At ten times the gitnostr size
/// the idle daemon measured 149 to 153 MiB with ten seconds and 139 MiB with one. Returning
/// pages at once (`dirty_decay_ms:0`) measured 132 MiB, but cost the first sync: 3 of 11 runs at
/// gitnostr size took 25 to 26 s instead of 13. See `docs/performance.md`, "Held live groups in
/// compact form, and freed pages returned sooner".
#[cfg(feature = "jemalloc")]
// SAFETY: jemalloc declares `const char *malloc_conf` weak and reads it once, when it starts;
// this strong definition is a pointer to a `'static`, read-only, NUL-terminated string (the
// array's length is checked by the compiler), which is what it reads.
#[allow(unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 37] = b"dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Starts jemalloc's background thread, which returns freed memory to the system once it has
/// been unused for the decay time (one second, `MALLOC_CONF`). Without it, jemalloc returns
/// memory only while the process goes on allocating, which an idle daemon barely does: at ten
/// times the gitnostr size, with a decay time of 10 s, the idle daemon kept 193 MiB of
/// anonymous memory resident, 154 MiB with the thread. See `docs/performance.md`, "The idle
/// daemon at rest".
#[cfg(feature = "jemalloc")]
fn return_freed_memory_on_time() {
    if let Err(error) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(%error, "jemalloc's background thread did not start; freed memory is returned later");
    }
}

/// Exit code for an unusable configuration.
const CONFIG_ERROR: u8 = 2;
/// Log filter of `run` when `RUST_LOG` is unset: `info`, the nostr libraries at `warn`.
const RUN_LOG_FILTER: &str =
    "info,nostr_relay_pool=warn,nostr_relay_builder=warn,nostr_sdk=warn,nostr_lmdb=warn";
/// Log filter of `demo` when `RUST_LOG` is unset: also silences the local relays' reports of
/// connections closed at shutdown.
const DEMO_LOG_FILTER: &str =
    "info,nostr_relay_pool=warn,nostr_relay_builder=off,nostr_sdk=warn,nostr_lmdb=warn";

/// Log filter of `sim` when `RUST_LOG` is unset: warnings only, the relays silenced.
const SIM_LOG_FILTER: &str =
    "warn,nostr_relay_pool=error,nostr_relay_builder=off,nostr_sdk=error,nostr_lmdb=warn";

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(match cli.command {
        Command::Run(_) => RUN_LOG_FILTER,
        Command::Demo(_) => DEMO_LOG_FILTER,
        Command::Sim(_) | Command::Status(_) => SIM_LOG_FILTER,
    });
    #[cfg(feature = "jemalloc")]
    return_freed_memory_on_time();
    match execute(cli) {
        Ok(code) => code,
        Err(error) => {
            // Nothing else can be done if stderr is gone.
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = match cli.command {
        Command::Run(args) => match args.settings() {
            Ok(settings) => runtime.block_on(run(&settings)).map(|()| ExitCode::SUCCESS),
            Err(error) => {
                let _ = writeln!(std::io::stderr(), "error: {error}");
                Ok(ExitCode::from(CONFIG_ERROR))
            }
        },
        #[cfg(not(feature = "sim"))]
        Command::Demo(_) => not_in_this_build("demo"),
        #[cfg(not(feature = "sim"))]
        Command::Sim(_) => not_in_this_build("sim"),
        #[cfg(feature = "sim")]
        Command::Demo(args) => {
            let mut options = DemoOptions::try_from(&args)?;
            options.progress = std::io::stdout().is_terminal();
            runtime.block_on(async {
                let mut out = std::io::stdout();
                let summary = run_demo(&options, &mut out).await?;
                Ok(if summary.passed() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            })
        }
        #[cfg(feature = "sim")]
        Command::Sim(args) => {
            let mut options = SimOptions::try_from(&*args)?;
            options.exe = std::env::current_exe().ok();
            options.progress = std::io::stdout().is_terminal();
            runtime.block_on(async {
                let mut out = std::io::stdout();
                let report = run_sim(&options, &mut out).await?;
                if let Some(path) = &args.json {
                    let json =
                        serde_json::to_string_pretty(&report).context("encoding the report")?;
                    std::fs::write(path, json)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                Ok(if report.converged() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            })
        }
        Command::Status(args) => runtime.block_on(async {
            let mut out = std::io::stdout();
            run_status(&args.url, args.json, &mut out).await?;
            Ok(ExitCode::SUCCESS)
        }),
    };
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}

/// Says that this build lacks `command` and how to get it; exits as for a usage error.
#[cfg(not(feature = "sim"))]
fn not_in_this_build(command: &str) -> anyhow::Result<ExitCode> {
    let _ = writeln!(
        std::io::stderr(),
        "error: {}",
        NotInThisBuild::message(command)
    );
    Ok(ExitCode::from(CONFIG_ERROR))
}

/// Logs to stderr, filtered by `RUST_LOG`, or by `default` when it is unset.
fn init_logging(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
