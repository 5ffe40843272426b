//! The `grasp-sync` daemon binary (commands arrive with the engine).

use clap::Parser;

/// GRASP-02 proactive sync for Nostr git relays.
#[derive(Debug, Parser)]
#[command(name = "grasp-sync", version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
