//! Property tests over the public API: coverage is exact, budgets hold, and grouping does not
//! depend on input order.

use grasp_sync_filters::{
    Coverage, DEFAULT_MAX_FILTER_BYTES, FilterBudget, PackLimits, filter_payload_bytes,
    pack_requests,
};
use nostr::Timestamp;
use proptest::prelude::*;

use crate::support::{Rng, addressable, all_filters, event_ids, repos, value_counts};

struct Input {
    full: Vec<grasp_sync_model::RepoCoordinate>,
    state_only: Vec<grasp_sync_model::RepoCoordinate>,
    roots: Vec<nostr::EventId>,
    members: Vec<nostr::EventId>,
    addressable: Vec<nostr::nips::nip01::Coordinate>,
}

impl Input {
    fn generate(seed: u64, sizes: (usize, usize, usize, usize, usize)) -> Self {
        let mut rng = Rng::new(seed);
        Self {
            full: repos(&mut rng, sizes.0),
            state_only: repos(&mut rng, sizes.1),
            roots: event_ids(&mut rng, sizes.2),
            members: event_ids(&mut rng, sizes.3),
            addressable: addressable(&mut rng, sizes.4),
        }
    }

    fn shuffled(&self, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut out = Self {
            full: self.full.clone(),
            state_only: self.state_only.clone(),
            roots: self.roots.clone(),
            members: self.members.clone(),
            addressable: self.addressable.clone(),
        };
        rng.shuffle(&mut out.full);
        rng.shuffle(&mut out.state_only);
        rng.shuffle(&mut out.roots);
        rng.shuffle(&mut out.members);
        rng.shuffle(&mut out.addressable);
        out
    }

    fn coverage(&self) -> Coverage<'_> {
        Coverage {
            full_repos: &self.full,
            state_only_repos: &self.state_only,
            roots: &self.roots,
            direct_members: &self.members,
            addressable_members: &self.addressable,
        }
    }
}

fn sizes() -> impl Strategy<Value = (usize, usize, usize, usize, usize)> {
    (
        0usize..600,
        0usize..100,
        0usize..1_500,
        0usize..600,
        0usize..100,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_input_value_appears_in_exactly_one_filter_of_each_tag_family(
        seed in any::<u64>(),
        sizes in sizes(),
        live in any::<bool>(),
    ) {
        let input = Input::generate(seed, sizes);
        let budget = FilterBudget::default();
        let filters = if live {
            input.coverage().live_filters(&budget).expect("valid test input")
        } else {
            input.coverage().historic_filters(None, None, &budget).expect("valid test input")
        };
        let groups = pack_requests(filters, &PackLimits::default()).expect("valid test input");
        let counts = value_counts(&all_filters(&groups));
        prop_assert!(counts.values().all(|&n| n == 1), "a value appears in two filters of one tag");

        let mut tags = vec!["#e", "#q"];
        let mut coordinate_tags = vec!["#a", "#q"];
        if !live || !input.roots.is_empty() {
            tags.push("#E");
        }
        if !live || !input.full.is_empty() {
            coordinate_tags.push("#A");
        }
        for id in input.roots.iter().map(|id| id.to_hex()) {
            for tag in &tags {
                prop_assert!(counts.contains_key(&((*tag).to_owned(), id.clone())), "{tag} misses a root");
            }
        }
        for repo in input.full.iter().map(ToString::to_string) {
            for tag in &coordinate_tags {
                prop_assert!(counts.contains_key(&((*tag).to_owned(), repo.clone())), "{tag} misses a repo");
            }
        }
        for id in input.members.iter().map(|id| id.to_hex()) {
            prop_assert!(counts.contains_key(&("#e".to_owned(), id.clone())));
            prop_assert!(counts.contains_key(&("#q".to_owned(), id.clone())));
            prop_assert_eq!(counts.contains_key(&("#E".to_owned(), id.clone())), !live);
        }
        for coordinate in input.addressable.iter().map(ToString::to_string) {
            prop_assert!(counts.contains_key(&("#a".to_owned(), coordinate.clone())));
            prop_assert!(counts.contains_key(&("#q".to_owned(), coordinate.clone())));
            prop_assert_eq!(counts.contains_key(&("#A".to_owned(), coordinate.clone())), !live);
        }
        for repo in input.full.iter().chain(&input.state_only) {
            prop_assert!(counts.contains_key(&("#d".to_owned(), repo.identifier().to_owned())));
        }
    }

    #[test]
    fn no_filter_or_req_exceeds_a_budget(
        seed in any::<u64>(),
        sizes in sizes(),
        ceiling in prop::sample::select(vec![1usize, 2, 5, 10]),
        filter_kb in 4usize..=32,
    ) {
        let input = Input::generate(seed, sizes);
        let budget = FilterBudget::new(filter_kb * 1024);
        let limits = PackLimits::default().with_max_filters(ceiling);
        let filters = input
            .coverage()
            .historic_filters(Some(Timestamp::from(1_600_000_000)), None, &budget)
            .expect("valid test input");
        for group in pack_requests(filters, &limits).expect("valid test input") {
            prop_assert!(group.filters.len() <= ceiling);
            prop_assert!(group.payload_bytes <= limits.max_req_bytes);
            let measured: usize = group.filters.iter().map(|f| filter_payload_bytes(&f.filter) + 1).sum();
            prop_assert_eq!(measured, group.payload_bytes);
            for f in &group.filters {
                let paged = f.filter.clone().until(Timestamp::from(u64::MAX));
                prop_assert!(filter_payload_bytes(&paged) < budget.max_filter_bytes);
                prop_assert!(budget.max_filter_bytes <= DEFAULT_MAX_FILTER_BYTES);
            }
        }
    }

    #[test]
    fn grouping_is_invariant_under_input_permutation(
        seed in any::<u64>(),
        shuffle in any::<u64>(),
        sizes in sizes(),
        live in any::<bool>(),
    ) {
        let input = Input::generate(seed, sizes);
        let shuffled = input.shuffled(shuffle);
        let budget = FilterBudget::default();
        let build = |input: &Input| {
            let filters = if live {
                input.coverage().live_filters(&budget).expect("valid test input")
            } else {
                input.coverage().historic_filters(None, None, &budget).expect("valid test input")
            };
            pack_requests(filters, &PackLimits::default()).expect("valid test input")
        };
        prop_assert_eq!(build(&input), build(&shuffled));
    }
}
