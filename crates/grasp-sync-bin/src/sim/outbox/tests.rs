//! Unit tests for the sim's outbox flags and its outbox report.

use std::collections::BTreeSet;

use grasp_sync_testkit::{NetworkSpec, OutboxSpec, generate};
use nostr::EventId;

use super::{OutboxReport, outbox_spec};
use crate::sim::SimOptions;

const SERVICE: &str = "ws://127.0.0.1:4000";

fn check(flags: (Option<usize>, Option<f64>, Option<f64>), expected: OutboxSpec) {
    assert_eq!(
        outbox_spec(flags.0, flags.1, flags.2),
        expected,
        "{flags:?}"
    );
}

#[test]
fn outbox_flags_become_the_generators_outbox_spec() {
    check((None, None, None), OutboxSpec::NONE);
    check((Some(3), None, None), OutboxSpec::with_relays(3));
    check(
        (None, None, Some(0.5)),
        OutboxSpec {
            share_of_events: 0.5,
            ..OutboxSpec::with_relays(OutboxSpec::DEFAULT_RELAYS)
        },
    );
    check(
        (Some(1), Some(1.0), Some(0.2)),
        OutboxSpec {
            relays: 1,
            share_of_authors: 1.0,
            share_of_events: 0.2,
        },
    );
}

#[test]
fn sim_options_without_outbox_flags_keep_the_presets_network() {
    let options = SimOptions::default();
    let spec = options.spec(SERVICE);
    assert_eq!(spec.outbox, OutboxSpec::NONE);
    assert_eq!(spec.relay_count(), spec.relays);
    let with = SimOptions {
        outbox_relays: Some(2),
        ..SimOptions::default()
    }
    .spec(SERVICE);
    assert_eq!(with.outbox, OutboxSpec::with_relays(2));
    assert_eq!(
        NetworkSpec {
            outbox: OutboxSpec::NONE,
            ..with
        },
        spec
    );
}

#[test]
fn the_report_counts_outbox_only_and_behind_outbox_events_held() {
    let spec = NetworkSpec {
        outbox: OutboxSpec {
            relays: 2,
            share_of_authors: 0.5,
            share_of_events: 1.0,
        },
        ..NetworkSpec::small(5, SERVICE)
    };
    let urls: Vec<String> = (0..spec.relay_count())
        .map(|i| format!("ws://127.0.0.1:{}", 5000 + i))
        .collect();
    let network = generate(&spec, &urls).unwrap();
    let outbox = &network.outbox;
    let only = outbox.expected_only_on_outbox.len();
    let behind = outbox.expected_behind_outbox.len();
    assert!(only > 0 && behind > 0);
    // Nothing missing: everything held.
    let report = OutboxReport::of(&network, &BTreeSet::new()).unwrap();
    assert_eq!(report.relays, 2);
    assert_eq!(report.relay_lists, outbox.relay_lists.len());
    assert_eq!(
        (report.expected_only_on_outbox, report.own_only_on_outbox),
        (only, only)
    );
    assert_eq!(
        (report.expected_behind_outbox, report.own_behind_outbox),
        (behind, behind)
    );
    // Every outbox-only event and one behind-outbox event missing.
    let mut missing: BTreeSet<EventId> = outbox.expected_only_on_outbox.clone();
    missing.extend(outbox.expected_behind_outbox.iter().next().copied());
    let report = OutboxReport::of(&network, &missing).unwrap();
    assert_eq!(report.own_only_on_outbox, 0);
    assert_eq!(report.own_behind_outbox, behind - 1);
    let mut text = Vec::new();
    report.write_held(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains(&format!("0/{only}")), "{text}");

    let plain = generate(&NetworkSpec::small(5, SERVICE), &urls[..3]).unwrap();
    assert_eq!(OutboxReport::of(&plain, &BTreeSet::new()), None);
}

/// The sim options of a `grasp-sync sim` command line.
fn parse(args: &[&str]) -> anyhow::Result<SimOptions> {
    use clap::Parser;

    let cli = crate::Cli::try_parse_from(["grasp-sync", "sim"].iter().chain(args))?;
    match cli.command {
        crate::Command::Sim(sim) => SimOptions::try_from(&*sim),
        other => anyhow::bail!("not a sim command: {other:?}"),
    }
}

#[test]
fn outbox_flags_on_the_command_line_are_checked() {
    let options = parse(&["--outbox-relays", "3", "--outbox-share", "0.3"]).unwrap();
    assert_eq!(
        options.spec(SERVICE).outbox,
        OutboxSpec {
            share_of_events: 0.3,
            ..OutboxSpec::with_relays(3)
        }
    );
    assert_eq!(parse(&[]).unwrap().spec(SERVICE).outbox, OutboxSpec::NONE);
    for (args, why) in [
        (&["--outbox-relays", "0"][..], "--outbox-relays"),
        (&["--outbox-share", "1.5"][..], "--outbox-share"),
        (&["--outbox-authors=-0.5"][..], "--outbox-authors"),
    ] {
        let error = parse(args).unwrap_err().to_string();
        assert!(error.contains(why), "{args:?}: {error}");
    }
}
