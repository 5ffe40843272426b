//! Strict relay profiles: `TestRelayConfig` constructors shaped like the relays sync meets
//! in the wild, with their advertised or hidden limits, their refusal texts and the query
//! quirks that break naive `until` pagination.

use super::strict::{Dialect, FilterLimit, QueryQuirks, StrictLimits, SubscriptionLimit};
use super::{Nip11Mode, TestRelayConfig};

/// The rust-nostr relay builder's retained-REQ allowance per connection, in bytes.
const RUST_NOSTR_RETAINED_BYTES: usize = 1024 * 1024;
/// The rust-nostr relay builder's query starts per minute per connection.
const RUST_NOSTR_QUERIES_PER_MINUTE: u32 = 1_200;

impl TestRelayConfig {
    /// Like nos.lol (strfry 1.1): 20 subscriptions per connection, shared with negentropy
    /// sessions, refused with strfry's NOTICE; `max_subscriptions` 20 and `max_limit` 500
    /// advertised, `default_limit` (500) not.
    pub fn nos_lol_like() -> Self {
        Self {
            name: "nos.lol-like strict relay".to_owned(),
            default_filter_limit: 500,
            max_filter_limit: Some(500),
            advertise_default_limit: false,
            strict: Some(StrictLimits {
                subscriptions: Some(SubscriptionLimit {
                    max: 20,
                    dialect: Dialect::Strfry,
                    counts_negentropy: true,
                    advertised: true,
                }),
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// Like a default nostream: 10 subscriptions and 10 filters per REQ, both advertised and
    /// refused with nostream's NOTICE texts; 500 results per filter without `limit`, explicit
    /// limits up to 5,000 (`max_limit` and `default_limit` advertised).
    pub fn nostream_like() -> Self {
        Self {
            name: "nostream-like strict relay".to_owned(),
            default_filter_limit: 500,
            max_filter_limit: Some(5_000),
            strict: Some(StrictLimits {
                subscriptions: Some(SubscriptionLimit {
                    max: 10,
                    dialect: Dialect::Nostream,
                    counts_negentropy: false,
                    advertised: true,
                }),
                filters_per_req: Some(FilterLimit {
                    max: 10,
                    dialect: Dialect::Nostream,
                    advertised: true,
                }),
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// Like strfry with its optional filter validation: 3 filters per REQ, not advertised,
    /// refused with `CLOSED "ERROR: bad req: filter validation failed: invalid number of
    /// filters: N"`; 200 subscriptions shared with negentropy (advertised); `max_limit` 500.
    pub fn strfry_filter_validation_like() -> Self {
        Self {
            name: "strfry-like strict relay with filter validation".to_owned(),
            default_filter_limit: 500,
            max_filter_limit: Some(500),
            advertise_default_limit: false,
            strict: Some(StrictLimits {
                subscriptions: Some(SubscriptionLimit {
                    max: 200,
                    dialect: Dialect::Strfry,
                    counts_negentropy: true,
                    advertised: true,
                }),
                filters_per_req: Some(FilterLimit {
                    max: 3,
                    dialect: Dialect::Strfry,
                    advertised: false,
                }),
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// Like Ditto Relay 0.1: 20 subscriptions (advertised), 100 results per filter without
    /// `limit` (not advertised) and explicit limits up to 1,000 (`max_limit` advertised).
    /// Ditto's own refusal text is not known here; its subscription cap answers with the
    /// rust-nostr relay builder's `CLOSED "rate-limited: too many REQs"`.
    pub fn ditto_like() -> Self {
        Self {
            name: "ditto-like strict relay".to_owned(),
            default_filter_limit: 100,
            max_filter_limit: Some(1_000),
            advertise_default_limit: false,
            strict: Some(StrictLimits {
                subscriptions: Some(SubscriptionLimit {
                    max: 20,
                    dialect: Dialect::RustNostr,
                    counts_negentropy: false,
                    advertised: true,
                }),
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// Like the current rust-nostr relay builder: 500 subscriptions, 20 filters per REQ,
    /// 1 MiB of retained REQs and 1,200 query starts per minute per connection, with its
    /// texts; 500 results per filter. Only `max_subscriptions`, `max_filters`, `max_limit`
    /// and `default_limit` are advertised.
    pub fn rust_nostr_like() -> Self {
        Self::rust_nostr_like_with_queries_per_minute(RUST_NOSTR_QUERIES_PER_MINUTE)
    }

    /// [`TestRelayConfig::rust_nostr_like`] with another query allowance, so a test can
    /// reach it with a few REQs.
    pub fn rust_nostr_like_with_queries_per_minute(queries_per_minute: u32) -> Self {
        Self {
            name: "rust-nostr-like strict relay".to_owned(),
            default_filter_limit: 500,
            max_filter_limit: Some(500),
            strict: Some(StrictLimits {
                subscriptions: Some(SubscriptionLimit {
                    max: 500,
                    dialect: Dialect::RustNostr,
                    counts_negentropy: false,
                    advertised: true,
                }),
                filters_per_req: Some(FilterLimit {
                    max: 20,
                    dialect: Dialect::RustNostr,
                    advertised: true,
                }),
                retained_req_bytes: Some(RUST_NOSTR_RETAINED_BYTES),
                queries_per_minute: Some(queries_per_minute),
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// Sends a filter without `limit` its *oldest* 250 matches, oldest first, as
    /// nostr-rs-relay's SQLite store orders such a query (`ORDER BY created_at ASC`); a
    /// filter with `limit` gets its newest, newest first, up to 500. NIP-77 is not served;
    /// neither `max_limit` nor `default_limit` is advertised.
    pub fn oldest_first_without_limit_like() -> Self {
        Self {
            name: "oldest-first-without-limit strict relay".to_owned(),
            default_filter_limit: 250,
            max_filter_limit: Some(500),
            advertise_default_limit: false,
            advertise_max_limit: false,
            advertise_negentropy: false,
            strict: Some(StrictLimits {
                negentropy_enabled: false,
                quirks: QueryQuirks {
                    oldest_first_without_limit: true,
                    ..QueryQuirks::default()
                },
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// `until` is exclusive (`created_at < until`), as nostr-rs-relay and relayer's
    /// PostgreSQL store matched stored events before NIP-01 settled on a closed interval
    /// (nostr-protocol/nips#650); 120 results per filter with or without `limit`. NIP-77 is
    /// not served; no limit is advertised (NIP-11 has no `limitation`).
    pub fn exclusive_until_like() -> Self {
        Self {
            name: "exclusive-until strict relay".to_owned(),
            default_filter_limit: 120,
            max_filter_limit: Some(120),
            advertise_negentropy: false,
            nip11: Nip11Mode::WithoutLimits,
            strict: Some(StrictLimits {
                negentropy_enabled: false,
                quirks: QueryQuirks {
                    exclusive_until: true,
                    ..QueryQuirks::default()
                },
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// The rust-nostr relay builder whose live delivery falls behind: every second event stored
    /// after a subscription's EOSE is not delivered, silently, as the builder skips the new
    /// events a connection lags more than 1,024 behind on while several clients write at once
    /// (`QueryQuirks::skip_live_every`). Stored events are all served.
    pub fn live_skipping_like() -> Self {
        Self {
            name: "live-skipping strict relay".to_owned(),
            strict: Some(StrictLimits {
                quirks: QueryQuirks {
                    skip_live_every: Some(2),
                    ..QueryQuirks::default()
                },
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// At most 150 stored events per REQ, summed over its filters, on top of 500 per filter
    /// (`max_limit` and `default_limit` 500 advertised; NIP-11 has no field for the per-REQ
    /// cap), like strfry's proposed `maxTotalEventsPerReq` (hoytech/strfry#208). NIP-77 is
    /// not served.
    pub fn per_req_cap_like() -> Self {
        Self {
            name: "per-REQ-cap strict relay".to_owned(),
            default_filter_limit: 500,
            max_filter_limit: Some(500),
            advertise_negentropy: false,
            strict: Some(StrictLimits {
                negentropy_enabled: false,
                quirks: QueryQuirks {
                    per_req_cap: Some(150),
                    ..QueryQuirks::default()
                },
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// Every quirk at once: the oldest 250 matches, oldest first, for a filter without
    /// `limit` (explicit limits up to 500, newest first), exclusive `until`, 200 stored
    /// events per REQ, no EOSE for a REQ whose every filter has `limit: 0` (no
    /// implementation known here does that; it is a client's worst case), and 20
    /// subscriptions per connection refused with strfry's NOTICE, not advertised. NIP-77 is
    /// not served; NIP-11 has no `limitation`.
    pub fn quirks_mixed() -> Self {
        Self {
            name: "strict relay with every query quirk".to_owned(),
            default_filter_limit: 250,
            max_filter_limit: Some(500),
            advertise_negentropy: false,
            nip11: Nip11Mode::WithoutLimits,
            strict: Some(StrictLimits {
                subscriptions: Some(SubscriptionLimit {
                    max: 20,
                    dialect: Dialect::Strfry,
                    counts_negentropy: true,
                    advertised: false,
                }),
                negentropy_enabled: false,
                quirks: QueryQuirks {
                    oldest_first_without_limit: true,
                    exclusive_until: true,
                    per_req_cap: Some(200),
                    no_eose_for_live: true,
                    skip_live_every: None,
                },
                ..StrictLimits::default()
            }),
            ..Self::strict_base()
        }
    }

    /// The strict relay of `limits` with every other setting at its default.
    pub fn strict(limits: StrictLimits) -> Self {
        Self {
            strict: Some(limits),
            ..Self::strict_base()
        }
    }

    /// Defaults shared by the profiles.
    fn strict_base() -> Self {
        Self {
            nip11: Nip11Mode::WithLimits,
            ..Self::default()
        }
    }
}
