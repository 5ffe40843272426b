//! [`OwnRelayLink`]: one nostr-sdk connection to the external own relay, reconnecting on its
//! own. It matches `OK` replies to published events and routes subscription messages to their
//! readers; every reconnect or lost notification bumps an epoch, so readers know to start over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use grasp_sync_engine::StoreError;
use grasp_sync_model::RelayUrl;
use nostr::{ClientMessage, Event, EventId, Filter, RelayMessage, SubscriptionId};
use nostr_sdk::Relay;
use nostr_sdk::pool::{RelayNotification, RelayOptions, RelayPool, RelayStatus};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// Capacity of the SDK's notification broadcast for the link.
const NOTIFICATION_CAPACITY: usize = 65_536;
/// Wait between reconnection attempts.
const RETRY_INTERVAL: Duration = Duration::from_secs(2);

/// The relay's answer to one published event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkReply {
    /// Whether the relay accepted (or already had) the event.
    pub accepted: bool,
    /// The relay's message (`duplicate: ...`, `blocked: ...`, or empty).
    pub message: String,
}

/// A message for one subscription.
#[derive(Debug)]
pub(crate) enum SubscriptionMessage {
    /// A stored or live event.
    Event(Box<Event>),
    /// End of stored events.
    Eose,
    /// The relay closed the subscription.
    Closed(String),
}

type Waiters = HashMap<EventId, Vec<oneshot::Sender<OkReply>>>;
type Routes = HashMap<SubscriptionId, mpsc::Sender<SubscriptionMessage>>;

/// The connection to the external own relay.
#[derive(Debug)]
pub struct OwnRelayLink {
    url: RelayUrl,
    pool: RelayPool,
    relay: Relay,
    shared: Arc<Shared>,
    epoch: watch::Receiver<u64>,
    reader: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Shared {
    waiters: Mutex<Waiters>,
    routes: Mutex<Routes>,
}

impl OwnRelayLink {
    /// Starts connecting to `url` and waits up to `wait` for the first connection. Not being
    /// connected yet is not an error: the link keeps trying.
    pub async fn connect(url: &RelayUrl, wait: Duration) -> Result<OwnRelayLink, StoreError> {
        let sdk_url = nostr::RelayUrl::parse(url.as_str())
            .map_err(|error| StoreError::Backend(format!("own relay url: {error}")))?;
        let pool = RelayPool::default();
        let options = RelayOptions::new()
            .reconnect(true)
            .retry_interval(RETRY_INTERVAL)
            .notification_channel_size(NOTIFICATION_CAPACITY);
        pool.add_relay(sdk_url.clone(), options)
            .await
            .map_err(|error| StoreError::Backend(format!("own relay: {error}")))?;
        let relay = pool
            .relay(&sdk_url)
            .await
            .map_err(|error| StoreError::Backend(format!("own relay: {error}")))?;
        let shared = Arc::new(Shared::default());
        let (epoch_tx, epoch) = watch::channel(0);
        // Listen before connecting so the first connection is seen.
        let reader = tokio::spawn(read(relay.notifications(), Arc::clone(&shared), epoch_tx));
        relay.connect();
        relay.wait_for_connection(wait).await;
        if !relay.is_connected() {
            tracing::warn!(relay = %url, "own relay not reachable yet; retrying in the background");
        }
        Ok(OwnRelayLink {
            url: url.clone(),
            pool,
            relay,
            shared,
            epoch,
            reader,
        })
    }

    /// The relay's URL.
    pub fn url(&self) -> &RelayUrl {
        &self.url
    }

    /// Whether the link is connected now.
    pub fn is_connected(&self) -> bool {
        self.relay.is_connected()
    }

    /// Sends `event` and waits up to `deadline` for the relay's `OK`.
    pub async fn publish(&self, event: &Event, deadline: Duration) -> Result<OkReply, StoreError> {
        let (sender, reply) = oneshot::channel();
        lock(&self.shared.waiters)?
            .entry(event.id)
            .or_default()
            .push(sender);
        if let Err(error) = self.relay.send_msg(ClientMessage::event(event.clone())) {
            self.forget_closed_waiters(&event.id);
            return Err(StoreError::Backend(format!("own relay send: {error}")));
        }
        match tokio::time::timeout(deadline, reply).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => {
                self.forget_closed_waiters(&event.id);
                Err(StoreError::Backend(format!(
                    "own relay sent no OK within {} s",
                    deadline.as_secs()
                )))
            }
        }
    }

    /// The current epoch: it changes on every (re)connection and when notifications were lost.
    pub(crate) fn epoch(&self) -> watch::Receiver<u64> {
        self.epoch.clone()
    }

    /// Opens a subscription whose messages go to `route`.
    pub(crate) fn subscribe(
        &self,
        id: SubscriptionId,
        filters: Vec<Filter>,
        route: mpsc::Sender<SubscriptionMessage>,
    ) -> Result<(), StoreError> {
        lock(&self.shared.routes)?.insert(id.clone(), route);
        self.relay
            .send_msg(ClientMessage::req(id, filters))
            .map_err(|error| StoreError::Backend(format!("own relay send: {error}")))
    }

    /// Closes a subscription and drops its route.
    pub(crate) fn unsubscribe(&self, id: &SubscriptionId) {
        if let Ok(mut routes) = lock(&self.shared.routes) {
            routes.remove(id);
        }
        if self.relay.is_connected() {
            // Best effort: a closed connection forgets its subscriptions anyway.
            let _ = self.relay.send_msg(ClientMessage::close(id.clone()));
        }
    }

    /// Disconnects for good.
    pub async fn shutdown(&self) {
        self.relay.disconnect();
        self.pool.shutdown().await;
        self.reader.abort();
    }

    fn forget_closed_waiters(&self, id: &EventId) {
        if let Ok(mut waiters) = lock(&self.shared.waiters)
            && let Some(list) = waiters.get_mut(id)
        {
            list.retain(|sender| !sender.is_closed());
            if list.is_empty() {
                waiters.remove(id);
            }
        }
    }
}

impl Drop for OwnRelayLink {
    fn drop(&mut self) {
        self.relay.disconnect();
        self.reader.abort();
    }
}

/// Reads the relay's notifications: answers waiters, routes subscription messages, and bumps
/// the epoch on every connection and on lost notifications.
async fn read(
    mut notifications: broadcast::Receiver<RelayNotification>,
    shared: Arc<Shared>,
    epoch: watch::Sender<u64>,
) {
    let bump = || epoch.send_modify(|n| *n += 1);
    loop {
        match notifications.recv().await {
            Ok(RelayNotification::Message { message }) => route(&shared, message).await,
            Ok(RelayNotification::RelayStatus { status }) => {
                if status == RelayStatus::Connected {
                    bump();
                }
            }
            Ok(RelayNotification::Shutdown) | Err(broadcast::error::RecvError::Closed) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(lost)) => {
                tracing::warn!(lost, "own relay notifications lost; restarting its feed");
                bump();
            }
        }
    }
}

async fn route(shared: &Shared, message: RelayMessage<'static>) {
    let (id, delivery) = match message {
        RelayMessage::Ok {
            event_id,
            status,
            message,
        } => {
            // The relay answers one connection's EVENTs in order, so an OK belongs to the
            // oldest waiter for that ID: a second copy in flight gets the relay's own second
            // answer (`duplicate:`), not the first one's.
            let sender = lock(&shared.waiters)
                .ok()
                .and_then(|mut waiters| take_oldest(&mut waiters, &event_id));
            if let Some(sender) = sender {
                // The waiter may have given up.
                let _ = sender.send(OkReply {
                    accepted: status,
                    message: message.into_owned(),
                });
            }
            return;
        }
        RelayMessage::Event {
            subscription_id,
            event,
        } => (
            subscription_id.into_owned(),
            SubscriptionMessage::Event(Box::new(event.into_owned())),
        ),
        RelayMessage::EndOfStoredEvents(id) => (id.into_owned(), SubscriptionMessage::Eose),
        RelayMessage::Closed {
            subscription_id,
            message,
        } => (
            subscription_id.into_owned(),
            SubscriptionMessage::Closed(message.into_owned()),
        ),
        RelayMessage::Notice(notice) => {
            tracing::info!(%notice, "own relay notice");
            return;
        }
        _ => return,
    };
    let target = lock(&shared.routes)
        .ok()
        .and_then(|routes| routes.get(&id).cloned());
    if let Some(target) = target {
        // A reader that went away no longer wants its messages.
        let _ = target.send(delivery).await;
    }
}

/// Removes and returns the oldest waiter for `id`.
fn take_oldest(waiters: &mut Waiters, id: &EventId) -> Option<oneshot::Sender<OkReply>> {
    let list = waiters.get_mut(id)?;
    let oldest = (!list.is_empty()).then(|| list.remove(0));
    if list.is_empty() {
        waiters.remove(id);
    }
    oldest
}

fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, StoreError> {
    mutex
        .lock()
        .map_err(|_| StoreError::Backend("own relay link lock poisoned".to_owned()))
}

#[cfg(test)]
mod tests;
