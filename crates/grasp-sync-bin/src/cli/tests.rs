//! The `demo` and `sim` commands with and without the `sim` feature: a build that has them
//! parses their flags; a build that lacks them still accepts both names, whatever flags follow,
//! and says how to get them.

use clap::{CommandFactory, Parser};

use super::{Cli, Command};

fn parse(args: &[&str]) -> Command {
    let mut argv = vec!["grasp-sync"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli.command,
        Err(error) => panic!("{args:?} does not parse: {error}"),
    }
}

fn top_level_help() -> String {
    Cli::command().render_help().to_string()
}

#[cfg(feature = "sim")]
#[test]
fn demo_and_sim_take_their_flags_when_built_with_the_feature() {
    match parse(&["demo", "--seed", "3", "--relays", "2"]) {
        Command::Demo(args) => assert_eq!((args.seed, args.relays), (3, 2)),
        other => panic!("not the demo: {other:?}"),
    }
    match parse(&["sim", "--preset", "large", "--shards", "4"]) {
        Command::Sim(args) => {
            assert_eq!(args.preset, crate::sim::Preset::Large);
            assert_eq!(args.shards, Some(4));
        }
        other => panic!("not the sim: {other:?}"),
    }
    let help = top_level_help();
    assert!(!help.contains("Not in this build"), "{help}");
}

#[cfg(not(feature = "sim"))]
#[test]
fn demo_and_sim_are_named_as_missing_when_built_without_the_feature() {
    match parse(&["demo", "--seed", "3"]) {
        Command::Demo(args) => assert_eq!(args.args, ["--seed", "3"]),
        other => panic!("not the demo: {other:?}"),
    }
    match parse(&["sim", "--preset", "large", "--json", "out.json"]) {
        Command::Sim(args) => assert_eq!(args.args.len(), 4),
        other => panic!("not the sim: {other:?}"),
    }
    let help = top_level_help();
    for command in ["demo", "sim"] {
        let line = help
            .lines()
            .find(|line| line.trim_start().starts_with(command))
            .unwrap_or_else(|| panic!("{command} missing from:\n{help}"));
        assert!(line.contains("Not in this build"), "{line}");
        let message = super::NotInThisBuild::message(command);
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(
            message.contains(&format!("--features sim -- {command}")),
            "{message}"
        );
    }
}
