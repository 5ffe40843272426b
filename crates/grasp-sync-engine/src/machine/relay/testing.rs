//! Test support for the machine's rules: a relay machine connected on injected time, as the
//! driver would leave it after a dial, a NIP-11 document and a session's start.

use std::time::Instant;

use grasp_sync_filters::{
    CoverageTier, GroupedPagination, PageHints, RelayPageSession, TieredFilter,
};
use grasp_sync_health::{HealthConfig, RelayHealth};
use grasp_sync_ledger::{PermitClass, StartKind};
use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{Filter, Kind, SubscriptionId};

use crate::machine::nip77::NipListing;
use crate::machine::relay::{Advertised, RelayMachine};
use crate::machine::session::{QueuedStart, SessionState};
use crate::machine::transmit::{Outbound, SessionKey};

/// A relay machine connected at `now` (session generation 1), whose document advertises
/// `max_subscriptions` and says `nip77` of NIP-77. Health has no jitter.
pub(crate) fn connected<Round, Parked>(
    now: Instant,
    max_subscriptions: u32,
    nip77: NipListing,
) -> RelayMachine<Round, Parked> {
    let config = HealthConfig {
        jitter_percent: 0,
        ..HealthConfig::default()
    };
    let mut machine = RelayMachine::new(RelayHealth::new(config, false, 1, now).expect("health"));
    machine.health.handle_connect_started(now);
    let advertised = Advertised {
        max_subscriptions: Some(max_subscriptions),
        max_filters: None,
        nip77,
    };
    machine.handle_connected(now, advertised);
    let key = SessionKey {
        relay: RelayUrl::parse("wss://relay.example.com").expect("valid url"),
        generation: 1,
    };
    machine.handle_session_started(SessionState::new(
        key,
        now,
        RelayPageSession::new(PageHints::default()),
        false,
    ));
    machine
}

/// [`connected`], with 20 subscriptions advertised and NIP-77 unknown, whose relay returns at
/// most `max_limit` events per page.
pub(crate) fn connected_paging<Round, Parked>(
    now: Instant,
    max_limit: usize,
) -> RelayMachine<Round, Parked> {
    let mut machine = connected(now, 20, NipListing::Unknown);
    machine.session.as_mut().expect("connected").pages = RelayPageSession::new(PageHints {
        max_limit: Some(max_limit),
        default_limit: None,
    });
    machine
}

/// Live coverage of repository `d{n}`, in the essential tier.
pub(crate) fn live_core(n: u64) -> TieredFilter {
    TieredFilter::new(
        Filter::new()
            .kind(Kind::from(1617))
            .identifier(format!("d{n}"))
            .limit(0),
        CoverageTier::Essential,
    )
}

/// What `machine` transmits now, in order: `REQ id`, `CLOSE id` or `disconnect`.
pub(crate) fn transmitted<Round, Parked>(machine: &mut RelayMachine<Round, Parked>) -> Vec<String> {
    std::iter::from_fn(|| machine.poll_transmit())
        .map(|message| match message {
            Outbound::Req {
                subscription_id, ..
            } => format!("REQ {subscription_id}"),
            Outbound::Close(subscription_id) => format!("CLOSE {subscription_id}"),
            Outbound::Disconnect => "disconnect".to_owned(),
        })
        .collect()
}

/// Queues the first history page `name` of `batch` over `filters` in `machine`'s session.
pub(crate) fn queue_page<Round, Parked>(
    machine: &mut RelayMachine<Round, Parked>,
    name: &str,
    batch: u64,
    filters: Vec<Filter>,
) {
    let session = machine.session.as_mut().expect("connected");
    let pagination = GroupedPagination::new(filters, &session.pages);
    session.queue.push_back(QueuedStart {
        subscription_id: SubscriptionId::new(name),
        batch: BatchId(batch),
        class: PermitClass::HistoricPage,
        kind: StartKind::Historic,
        pagination,
        exact: false,
    });
}
