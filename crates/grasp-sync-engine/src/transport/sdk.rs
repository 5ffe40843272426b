//! [`SdkConnector`]: the production transport over nostr-sdk's relay pool (0.44 line).
//!
//! Sessions of different relays share a pool, and so its verification cache; a relay's second
//! session takes another pool (`pools`). Each relay runs with automatic reconnect off, and
//! REQ/CLOSE are sent as raw client messages, so the SDK keeps no subscription it could replay:
//! the engine owns retry, backoff and resubscription. Inbound messages are read from the relay's notification
//! broadcast (`RelayNotification::Message`, which fires for every delivery, unlike
//! `RelayNotification::Event`) and forwarded in order into a bounded channel. If the broadcast
//! overflows, messages were lost and the session reports [`RelayInbound::Lagged`]. NIP-77 rounds
//! are dry runs the session drives itself over the `negentropy` crate (`round`), because the
//! library's own reconciliation passes a round that lost messages as complete; a second reader
//! of the broadcast, which never waits on the engine, hands each round its answers (`routes`).
//!
//! NIP-42: with a key ([`SdkConnector::with_auth_keys`]) the pool's automatic authentication
//! answers every challenge of the session; without one it is off and challenges go
//! unanswered. After authenticating, the pool re-sends the subscriptions it registered itself:
//! raw REQs register none, so nothing reaches the relay that the engine's ledger did not
//! admit. The engine hears of each step ([`RelayInbound::AuthChallenge`],
//! [`RelayInbound::Authenticated`], [`RelayInbound::AuthFailed`]) and retries refused work itself.

mod pools;
mod round;
mod routes;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_model::RelayUrl;
use nostr::Keys;
use nostr::{ClientMessage, Event, EventId, Filter, RelayMessage, SubscriptionId, Timestamp};
use nostr_database::{IntoNostrDatabase, MemoryDatabase, MemoryDatabaseOptions};
use nostr_sdk::Relay;
use nostr_sdk::pool::pool::RelayPoolBuilder;
use nostr_sdk::pool::{RelayNotification, RelayOptions, RelayPoolOptions, RelayStatus};
use tokio::sync::{broadcast, mpsc};

use self::pools::{Seat, SharedPool, SharedPools};
use self::routes::RoundRoutes;
use super::negentropy::{NegentropyDiff, NegentropyError, RoundLimits};
use super::wire::WireCounter;
use super::{
    GuardedWebSocket, RelayConnection, RelayConnector, RelayInbound, RelayInfo, RelaySession,
    WireBytes, fetch_relay_info,
};
use crate::address::AddressPolicy;
use crate::error::TransportError;

/// Capacity of the pool-wide notification broadcast, which nothing reads: sessions read their
/// relay's own broadcast (`SdkConnectorOptions::notification_capacity`). The pool pre-allocates
/// every slot, so its default of 4,096 cost each session about 1.5 MiB.
const POOL_NOTIFICATION_CAPACITY: usize = 1;

/// Tuning of the nostr-sdk transport.
///
/// A session buffers what the engine has not read yet in both, in turn: the inbound channel
/// first, then the broadcast, and only a full broadcast loses messages (reported as
/// `RelayInbound::Lagged`). The broadcast writes every slot when it is made and keeps each
/// message until its slot is written again, so its capacity is resident for the whole session;
/// the channel holds only what is waiting. The buffering therefore sits in the channel.
#[derive(Debug, Clone, Copy)]
pub struct SdkConnectorOptions {
    /// Capacity of the SDK's per-relay notification broadcast: 1,536 by default. At 1,024, 3
    /// of 17 first syncs at gitnostr size on a loaded machine lost messages on one relay, each
    /// loss costing that relay a reconnect and its coverage fetched again (about 90 REQs and
    /// 10 s); at 1,536, none of 14 did. Each slot costs about 400 bytes for the session's life.
    pub notification_capacity: usize,
    /// The same for an extra connection that carries live subscriptions only
    /// ([`RelayConnector::connect_live_only`]): 256 by default. Such a connection is never
    /// sent a stored history, only what is published while it is open, so it needs no room
    /// for a page's burst. At ten times the gitnostr size the daemon holds two of them per
    /// relay, sixteen in all, and 1,536 slots each cost about 8 MiB more than 256.
    pub live_only_notification_capacity: usize,
    /// Capacity of the session's inbound channel to the engine (the backpressure point).
    pub inbound_capacity: usize,
}

impl Default for SdkConnectorOptions {
    fn default() -> Self {
        Self {
            notification_capacity: 1_536,
            live_only_notification_capacity: 256,
            inbound_capacity: 19_456,
        }
    }
}

/// Dials relays with nostr-sdk, through [`GuardedWebSocket`]: every WebSocket dial and NIP-11
/// fetch connects only to an address the address policy allows (by default, no internal
/// address at all).
#[derive(Debug, Clone, Default)]
pub struct SdkConnector {
    options: SdkConnectorOptions,
    policy: Arc<AddressPolicy>,
    /// The key that answers NIP-42 challenges (`Keys`' `Debug` shows the public key only).
    auth: Option<Keys>,
    /// The pools its sessions share (clones share them too).
    pools: Arc<SharedPools>,
}

impl SdkConnector {
    /// A connector with the given tuning and the default (strict) address policy.
    pub fn new(options: SdkConnectorOptions) -> Self {
        Self {
            options,
            policy: Arc::default(),
            auth: None,
            pools: Arc::default(),
        }
    }

    /// This connector, answering every session's NIP-42 challenges with `keys`. Each session
    /// authenticates itself, on its own connection.
    pub fn with_auth_keys(mut self, keys: Keys) -> Self {
        self.auth = Some(keys);
        // Pools carry the key: a clone made before keeps its own.
        self.pools = Arc::default();
        self
    }

    /// This connector, dialling what `policy` allows.
    pub fn with_address_policy(mut self, policy: AddressPolicy) -> Self {
        self.policy = Arc::new(policy);
        // Pools' transports carry the policy: a clone made before keeps its own.
        self.pools = Arc::default();
        self
    }

    /// A pool for the sessions of different relays, with its own transport.
    async fn new_pool(&self) -> SharedPool {
        let transport = GuardedWebSocket::new(Arc::clone(&self.policy));
        // Built field by field, so the builder's default event-ID tracker (35,000 entries,
        // pre-allocated) is never made. The tracker only decides whether
        // `RelayNotification::Event` fires; the engine reads `RelayNotification::Message`,
        // which comes for every event, and de-duplicates in its store. A tracker of one ID loses
        // nothing (a repeated event now fires `Event` too, as a new one always did).
        let pool = RelayPoolBuilder {
            websocket_transport: Arc::new(transport.clone()),
            admit_policy: None,
            monitor: None,
            opts: RelayPoolOptions::new()
                .automatic_authentication(self.auth.is_some())
                .notification_channel_size(POOL_NOTIFICATION_CAPACITY),
            __database: MemoryDatabase::with_opts(MemoryDatabaseOptions {
                events: false,
                max_events: Some(1),
            })
            .into_nostr_database(),
            __signer: None,
        }
        .build();
        if let Some(keys) = &self.auth {
            pool.state().set_signer(keys.clone()).await;
        }
        SharedPool {
            pool,
            transport,
            seated: Arc::default(),
        }
    }

    /// Adds `sdk_url` to `seat`'s pool and connects it, its notification broadcast holding
    /// `notification_capacity` messages.
    async fn open(
        &self,
        url: &RelayUrl,
        sdk_url: &nostr::RelayUrl,
        seat: &Seat,
        timeout: Duration,
        notification_capacity: usize,
    ) -> Result<RelayConnection, TransportError> {
        let SharedPool {
            pool, transport, ..
        } = &seat.pool;
        let options = RelayOptions::new()
            .reconnect(false)
            .notification_channel_size(notification_capacity);
        let added = pool
            .add_relay(sdk_url.clone(), options)
            .await
            .map_err(|e| TransportError::Connect(e.to_string()))?;
        if !added {
            // The seat is this URL's alone, so this is a bug, not the relay's doing.
            return Err(TransportError::Connect(
                "the relay is already in the session's pool".to_owned(),
            ));
        }
        let relay = pool
            .relay(sdk_url)
            .await
            .map_err(|e| TransportError::Connect(e.to_string()))?;
        // Subscribe to notifications before connecting so nothing is missed.
        let notifications = relay.notifications();
        let answers = relay.notifications();
        let address: &url::Url = sdk_url.into();
        match tokio::time::timeout(timeout, relay.try_connect(timeout)).await {
            Err(_) => return Err(TransportError::Timeout),
            Ok(Err(e)) => {
                return Err(transport
                    .take_refusal(address)
                    .unwrap_or_else(|| TransportError::Connect(e.to_string())));
            }
            Ok(Ok(())) => {}
        }
        if !relay.is_connected() {
            return Err(transport.take_refusal(address).unwrap_or_else(|| {
                TransportError::Connect("relay did not reach connected".to_owned())
            }));
        }
        let (tx, inbound) = mpsc::channel(self.options.inbound_capacity);
        let routes = RoundRoutes::default();
        tokio::spawn(forward(notifications, tx, self.auth.is_some()));
        tokio::spawn(route_round_answers(answers, routes.clone()));
        let session = SdkSession {
            authenticates: self.auth.is_some(),
            url: url.clone(),
            wire: transport.counter(address),
            seat: seat.clone(),
            relay,
            routes,
        };
        Ok(RelayConnection {
            session: std::sync::Arc::new(session),
            inbound,
        })
    }

    /// Pools made so far.
    #[cfg(test)]
    pub(crate) async fn pool_count(&self) -> usize {
        self.pools.pools.lock().await.len()
    }

    /// The SDK's relays for `url`, one per pool that holds a session of it.
    #[cfg(test)]
    async fn sdk_relays(&self, url: &RelayUrl) -> Vec<Relay> {
        let sdk_url = nostr::RelayUrl::parse(url.as_str()).expect("a valid URL");
        let mut relays = Vec::new();
        for shared in self.pools.pools.lock().await.iter() {
            if let Ok(relay) = shared.pool.relay(&sdk_url).await {
                relays.push(relay);
            }
        }
        relays
    }

    /// Takes a seat in a pool and opens a connection in it (see `open`), freeing the seat if
    /// that fails.
    async fn seat_and_open(
        &self,
        url: &RelayUrl,
        timeout: Duration,
        notification_capacity: usize,
    ) -> Result<RelayConnection, TransportError> {
        let sdk_url = nostr::RelayUrl::parse(url.as_str())
            .map_err(|e| TransportError::BadUrl(e.to_string()))?;
        let claim = self.pools.seat(&sdk_url, || self.new_pool()).await;
        let opened = self
            .open(url, &sdk_url, claim.seat(), timeout, notification_capacity)
            .await;
        match opened {
            Ok(connection) => {
                claim.keep();
                Ok(connection)
            }
            Err(error) => {
                claim.seat().release().await;
                Err(error)
            }
        }
    }
}

#[async_trait]
impl RelayConnector for SdkConnector {
    async fn connect(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        let capacity = self.options.notification_capacity;
        self.seat_and_open(url, timeout, capacity).await
    }

    async fn connect_live_only(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        let capacity = self.options.live_only_notification_capacity;
        self.seat_and_open(url, timeout, capacity).await
    }

    async fn fetch_info(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayInfo, TransportError> {
        fetch_relay_info(&self.policy, url, timeout).await
    }
}

struct SdkSession {
    authenticates: bool,
    url: RelayUrl,
    /// Its place in a shared pool, given up when the session ends.
    seat: Seat,
    relay: Relay,
    /// The NIP-77 rounds in progress, which the session's reader hands their answers.
    routes: RoundRoutes,
    /// The bytes of its connection, counted by the pool's transport.
    wire: Arc<WireCounter>,
}

impl SdkSession {
    fn send(&self, message: ClientMessage<'_>) -> Result<(), TransportError> {
        // nostr-sdk queues silently on a terminated relay: check first.
        if !self.relay.is_connected() {
            return Err(TransportError::NotConnected);
        }
        self.relay
            .send_msg(message)
            .map_err(|e| TransportError::Send(e.to_string()))
    }
}

#[async_trait]
impl RelaySession for SdkSession {
    fn url(&self) -> &RelayUrl {
        &self.url
    }

    fn is_connected(&self) -> bool {
        self.relay.is_connected()
    }

    fn authenticates(&self) -> bool {
        self.authenticates
    }

    fn wire_bytes(&self) -> WireBytes {
        self.wire.snapshot()
    }

    async fn subscribe(
        &self,
        id: SubscriptionId,
        filters: Vec<Filter>,
    ) -> Result<(), TransportError> {
        self.send(ClientMessage::req(id, filters))
    }

    async fn close(&self, id: SubscriptionId) -> Result<(), TransportError> {
        self.send(ClientMessage::close(id))
    }

    async fn publish(&self, event: &Event) -> Result<(), TransportError> {
        self.send(ClientMessage::event(event.clone()))
    }

    async fn negentropy_diff(
        &self,
        filter: Filter,
        have: Vec<(EventId, Timestamp)>,
        limits: RoundLimits,
    ) -> Result<NegentropyDiff, NegentropyError> {
        round::run(&self.relay, &self.routes, filter, have, limits).await
    }

    async fn disconnect(&self) {
        self.relay.disconnect();
        self.seat.release().await;
    }
}

impl Drop for SdkSession {
    fn drop(&mut self) {
        self.seat.release_later();
    }
}

/// Forwards the SDK's notifications for one relay into the session's inbound channel, in order.
/// A challenge is reported only when the pool answers it (`authenticates`).
async fn forward(
    mut notifications: broadcast::Receiver<RelayNotification>,
    tx: mpsc::Sender<RelayInbound>,
    authenticates: bool,
) {
    loop {
        let inbound = match notifications.recv().await {
            Ok(RelayNotification::Message {
                message: RelayMessage::Auth { .. },
            }) if authenticates => RelayInbound::AuthChallenge,
            Ok(RelayNotification::Message { message }) => match translate(message) {
                Some(inbound) => inbound,
                None => continue,
            },
            Ok(RelayNotification::Authenticated) => RelayInbound::Authenticated,
            Ok(RelayNotification::AuthenticationFailed) => RelayInbound::AuthFailed,
            Ok(RelayNotification::RelayStatus { status }) => match status {
                RelayStatus::Disconnected
                | RelayStatus::Terminated
                | RelayStatus::Banned
                | RelayStatus::Sleeping => RelayInbound::Disconnected,
                _ => continue,
            },
            Ok(RelayNotification::Shutdown) | Err(broadcast::error::RecvError::Closed) => {
                RelayInbound::Disconnected
            }
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(lost)) => RelayInbound::Lagged(lost),
        };
        let ended = inbound == RelayInbound::Disconnected;
        if tx.send(inbound).await.is_err() || ended {
            return;
        }
    }
}

/// Hands the NIP-77 rounds in progress on one session their answers (`routes`). It reads a
/// receiver of its own and never waits on the engine, so a round's answers are not held up
/// behind events the engine has not read yet. Lost messages fail every round in progress; the
/// end of the connection ends them all.
async fn route_round_answers(
    mut notifications: broadcast::Receiver<RelayNotification>,
    routes: RoundRoutes,
) {
    loop {
        match notifications.recv().await {
            Ok(RelayNotification::Message { message }) => routes.deliver(&message),
            Ok(RelayNotification::RelayStatus {
                status:
                    RelayStatus::Disconnected
                    | RelayStatus::Terminated
                    | RelayStatus::Banned
                    | RelayStatus::Sleeping,
            })
            | Ok(RelayNotification::Shutdown)
            | Err(broadcast::error::RecvError::Closed) => break,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => routes.fail_all(),
        }
    }
    routes.end();
}

fn translate(message: RelayMessage<'static>) -> Option<RelayInbound> {
    Some(match message {
        RelayMessage::Event {
            subscription_id,
            event,
        } => RelayInbound::Event {
            subscription_id: subscription_id.into_owned(),
            event: Box::new(event.into_owned()),
        },
        RelayMessage::EndOfStoredEvents(id) => RelayInbound::Eose(id.into_owned()),
        RelayMessage::Closed {
            subscription_id,
            message,
        } => RelayInbound::Closed {
            subscription_id: subscription_id.into_owned(),
            message: message.into_owned(),
        },
        RelayMessage::Notice(message) => RelayInbound::Notice(message.into_owned()),
        RelayMessage::Ok {
            event_id,
            status,
            message,
        } => RelayInbound::Ok {
            event_id,
            accepted: status,
            message: message.into_owned(),
        },
        _ => return None,
    })
}
