//! Shard assignment: parsing and validation, one owner per relay, few moves when a shard is
//! added, independence from the other shards, and a fixed vector.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn relay(url: &str) -> RelayUrl {
    RelayUrl::parse(url).expect("valid relay url")
}

/// `count` distinct relays, the same ones in every run.
fn relays(count: usize) -> Vec<RelayUrl> {
    (0..count)
        .map(|n| relay(&format!("wss://relay-{n}.example")))
        .collect()
}

fn check_parse(text: &str, expected: Result<(u16, u16), &str>) {
    let parsed = text.parse::<Shard>();
    match expected {
        Ok((index, count)) => {
            let shard = parsed.expect("a valid shard");
            assert_eq!((shard.index(), shard.count()), (index, count), "{text}");
            assert_eq!(shard.to_string(), format!("{index}/{count}"));
        }
        Err(fragment) => {
            let error = parsed.expect_err("an invalid shard").to_string();
            assert!(error.contains(fragment), "{text}: {error}");
        }
    }
}

#[test]
fn shards_parse_from_index_slash_count_numbered_from_zero() {
    check_parse("0/1", Ok((0, 1)));
    check_parse("3/4", Ok((3, 4)));
    check_parse(" 63/64 ", Ok((63, 64)));
    check_parse("4/4", Err("numbered from 0 to 3"));
    check_parse("0/0", Err("not between 1 and 64"));
    check_parse("0/65", Err("not between 1 and 64"));
    check_parse("0/99999999999", Err("not between 1 and 64"));
    check_parse("1", Err("is not INDEX/COUNT"));
    check_parse("-1/4", Err("is not INDEX/COUNT"));
    check_parse("a/4", Err("is not INDEX/COUNT"));
    check_parse("1/", Err("is not INDEX/COUNT"));
    check_parse("", Err("is not INDEX/COUNT"));
    assert_eq!(Shard::default(), Shard::WHOLE);
    assert!(Shard::WHOLE.is_whole());
}

#[test]
fn the_whole_shard_owns_every_relay() {
    for relay in relays(100) {
        assert!(Shard::WHOLE.owns(&relay));
        assert_eq!(Shard::owner_of(&relay, 1), 0);
    }
}

/// Owners computed independently of this code (SHA-256 of the 4-byte big-endian index and the
/// URL, first 8 bytes big-endian, highest wins), so a change of rule or hash shows here.
#[test]
fn assignment_is_the_same_in_every_run_and_on_every_platform() {
    let vectors = [
        ("wss://relay.damus.io", 3, 3),
        ("wss://nos.lol", 1, 4),
        ("wss://relay.nostr.band", 1, 1),
        ("wss://relay.ngit.dev", 3, 6),
        ("wss://gitnostr.com", 1, 7),
        ("ws://127.0.0.1:7000", 0, 6),
        ("wss://relay.example/path", 2, 2),
    ];
    for (url, of_four, of_eight) in vectors {
        assert_eq!(Shard::owner_of(&relay(url), 4), of_four, "{url} of 4");
        assert_eq!(Shard::owner_of(&relay(url), 8), of_eight, "{url} of 8");
    }
    // Spellings of one relay are one relay.
    assert_eq!(
        Shard::owner_of(&relay("WSS://Relay.Damus.IO:443/"), 4),
        Shard::owner_of(&relay("wss://relay.damus.io"), 4)
    );
}

#[test]
fn adding_a_shard_moves_about_its_share_and_only_to_the_new_shard() {
    let relays = relays(2_000);
    for count in [1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, MAX_SHARDS - 1] {
        let mut moved = 0usize;
        for relay in &relays {
            let before = Shard::owner_of(relay, count);
            let after = Shard::owner_of(relay, count + 1);
            if before != after {
                assert_eq!(after, count, "{relay} moved from {before} to an old shard");
                moved += 1;
            }
        }
        let share = moved as f64 / relays.len() as f64;
        let expected = 1.0 / f64::from(count + 1);
        // The binomial spread at 2,000 relays is at most 0.011; 0.05 is four and a half of it.
        assert!(
            (share - expected).abs() < 0.05,
            "{count} -> {}: moved {share}, expected about {expected}",
            count + 1
        );
    }
}

#[test]
fn shards_share_the_relays_evenly() {
    let relays = relays(4_000);
    for count in [2u16, 4, 8] {
        let mut per_shard: BTreeMap<u16, usize> = BTreeMap::new();
        for relay in &relays {
            *per_shard.entry(Shard::owner_of(relay, count)).or_default() += 1;
        }
        let fair = relays.len() / usize::from(count);
        for index in 0..count {
            let held = per_shard.get(&index).copied().unwrap_or(0);
            assert!(
                held.abs_diff(fair) < fair / 5,
                "shard {index}/{count} holds {held}, fair is {fair}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_relay_belongs_to_exactly_one_shard(
        host in "[a-z]{1,12}(\\.[a-z]{2,6}){1,2}",
        port in proptest::option::of(1u16..),
        path in proptest::option::of("/[a-z0-9]{1,8}"),
        count in 1u16..=MAX_SHARDS,
    ) {
        let url = format!(
            "wss://{host}{}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default(),
            path.unwrap_or_default()
        );
        let relay = relay(&url);
        let owners: Vec<u16> = (0..count)
            .filter(|&index| Shard::new(index, count).expect("valid").owns(&relay))
            .collect();
        prop_assert_eq!(owners, vec![Shard::owner_of(&relay, count)]);
    }

    /// A shard's relays are decided by (URL, index, count) alone: whichever subset of the other
    /// shards runs, and in whichever order they are asked, the answer is the same.
    #[test]
    fn a_shard_owns_the_same_relays_whichever_other_shards_run(
        count in 2u16..=16,
        running in proptest::collection::vec(any::<bool>(), 16),
    ) {
        let relays = relays(40);
        let alone: Vec<Vec<bool>> = (0..count)
            .map(|index| {
                let shard = Shard::new(index, count).expect("valid");
                relays.iter().map(|r| shard.owns(r)).collect()
            })
            .collect();
        for index in (0..count).rev() {
            if !running[usize::from(index)] {
                continue;
            }
            let shard = Shard::new(index, count).expect("valid");
            let owned: Vec<bool> = relays.iter().map(|r| shard.owns(r)).collect();
            prop_assert_eq!(&owned, &alone[usize::from(index)]);
        }
    }
}
