//! `StoreConfig`: the acceptance policy's configuration plus the store's own bounds.

use std::time::Duration;

use grasp_sync_model::RelayUrl;

use crate::store::feed::DEFAULT_FEED_CAPACITY;
use crate::store::policy::PolicyConfig;
use crate::store::rejected::RejectedConfig;

/// How a store is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// The acceptance policy.
    pub policy: PolicyConfig,
    /// Bounds and lifetimes of the rejected-events index (hot cache and cold index).
    pub rejected: RejectedConfig,
    /// Most live events buffered per self-feed consumer before it is cut off.
    pub feed_capacity: usize,
    /// How far ahead of the store's clock an event's `created_at` may be; later ones are
    /// refused with `invalid:` (and not remembered, so they are taken once their time comes).
    pub max_future_created_at: Duration,
    /// The LMDB map size in bytes (the most the store can hold); `None` keeps the backend's
    /// default (32 GiB on 64-bit hosts). A larger map can be given when the store is reopened.
    pub lmdb_map_size: Option<usize>,
}

/// [`StoreConfig::max_future_created_at`]'s default: 15 minutes, strfry's
/// `rejectEventsNewerThanSeconds`.
pub const DEFAULT_MAX_FUTURE_CREATED_AT: Duration = Duration::from_secs(15 * 60);

impl StoreConfig {
    /// Default bounds for the service at `service_url` with clone URLs on `domain`.
    pub fn new(service_url: RelayUrl, domain: impl Into<String>) -> Self {
        Self {
            policy: PolicyConfig::new(service_url, domain),
            rejected: RejectedConfig::default(),
            feed_capacity: DEFAULT_FEED_CAPACITY,
            max_future_created_at: DEFAULT_MAX_FUTURE_CREATED_AT,
            lmdb_map_size: None,
        }
    }
}
