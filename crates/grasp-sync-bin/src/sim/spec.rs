//! The simulated network's shape: size presets (small, gitnostr-shaped, large) with per-flag
//! overrides, and the relay limit profiles the network's relays take in turn.

use grasp_sync_testkit::{NetworkSpec, RootCount, TestRelayConfig};

/// A named network size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// 5 relays, 40 repositories, 120 roots, 2 replies per root, 1 descendant per reply and 1
    /// comment per repository: a run of a few seconds.
    Small,
    /// The gitnostr network's shape: 8 relays, 869 repositories, 3,632 roots, 1 reply each.
    Gitnostr,
    /// Ten times the gitnostr shape: 8 relays, 8,690 repositories, 36,320 roots.
    Large,
}

impl Preset {
    /// The network spec of this size, before overrides.
    pub fn spec(self, seed: u64, service_url: &str) -> NetworkSpec {
        match self {
            Preset::Small => NetworkSpec {
                relays: 5,
                repos: 40,
                roots: RootCount::Total(120),
                replies_per_root: 2,
                descendants_per_reply: 1,
                comments_per_repo: 1,
                relays_per_repo: 2,
                authors: 40,
                ..NetworkSpec::small(seed, service_url)
            },
            Preset::Gitnostr => NetworkSpec::gitnostr(seed, service_url),
            Preset::Large => {
                let base = NetworkSpec::gitnostr(seed, service_url);
                let roots = match base.roots {
                    RootCount::Total(n) => RootCount::Total(n * 10),
                    RootCount::PerRepo(n) => RootCount::PerRepo(n),
                };
                NetworkSpec {
                    repos: base.repos * 10,
                    roots,
                    authors: base.authors * 10,
                    ..base
                }
            }
        }
    }
}

/// Which limit profiles the relays take, relay `i` the `i`-th modulo the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profiles {
    /// Every strict profile in turn: nos.lol-like, nostream-like, strfry with filter
    /// validation, Ditto-like, rust-nostr-like.
    Mixed,
    /// Only the profiles with a subscription budget B = 20: nos.lol-like and Ditto-like.
    B20,
    /// Plain relays without a strict proxy (500 subscriptions).
    Lenient,
    /// Relays that page differently from NIP-01's usual reading, none speaking NIP-77, in
    /// turn: oldest first without `limit` (cap 250), exclusive `until` (cap 120), a cap of 150
    /// per REQ, and all of those at once with no EOSE for live REQs and a hidden subscription
    /// cap of 20.
    Quirks,
}

impl Profiles {
    /// The relay configurations, one per profile in turn.
    pub fn configs(self) -> Vec<TestRelayConfig> {
        match self {
            Profiles::Mixed => vec![
                TestRelayConfig::nos_lol_like(),
                TestRelayConfig::nostream_like(),
                TestRelayConfig::strfry_filter_validation_like(),
                TestRelayConfig::ditto_like(),
                TestRelayConfig::rust_nostr_like(),
            ],
            Profiles::B20 => vec![
                TestRelayConfig::nos_lol_like(),
                TestRelayConfig::ditto_like(),
            ],
            Profiles::Lenient => vec![TestRelayConfig::default()],
            Profiles::Quirks => vec![
                TestRelayConfig::oldest_first_without_limit_like(),
                TestRelayConfig::exclusive_until_like(),
                TestRelayConfig::per_req_cap_like(),
                TestRelayConfig::quirks_mixed(),
            ],
        }
    }

    /// One configuration per relay of a network of `relays`.
    pub fn for_relays(self, relays: usize) -> Vec<TestRelayConfig> {
        let configs = self.configs();
        (0..relays)
            .map(|i| configs[i % configs.len()].clone())
            .collect()
    }
}
