//! The relay pools an [`SdkConnector`](super::SdkConnector)'s sessions share.
//!
//! nostr-relay-pool gives every pool a verification cache of 128,000 event IDs, a table of
//! about 4 MiB that becomes resident as events arrive, and a pool holds one relay per URL. A
//! session therefore joins the first pool that holds no session of its relay: the sessions of
//! different relays share one pool and its cache (an event several relays deliver is verified
//! once), and a relay's second session (an extra connection, or a new session while the old one
//! is still leaving) takes the next pool. Pools are never dropped; there are as many as the most
//! sessions one relay had at once.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nostr_sdk::pool::RelayPool;

use crate::transport::GuardedWebSocket;

/// The pools, in the order sessions try them.
#[derive(Default)]
pub(super) struct SharedPools {
    pub(super) pools: tokio::sync::Mutex<Vec<SharedPool>>,
}

impl fmt::Debug for SharedPools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedPools").finish_non_exhaustive()
    }
}

impl SharedPools {
    /// A seat for `url` in the first pool that has none, in a pool `make` makes if every pool
    /// has one.
    pub(super) async fn seat<F, Fut>(&self, url: &nostr::RelayUrl, make: F) -> Claim
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = SharedPool>,
    {
        let mut pools = self.pools.lock().await;
        if let Some(pool) = pools.iter().find(|pool| pool.take_seat(url)) {
            return Claim(Some(Seat::new(pool.clone(), url.clone())));
        }
        let pool = make().await;
        pool.take_seat(url);
        pools.push(pool.clone());
        Claim(Some(Seat::new(pool, url.clone())))
    }
}

/// A seat taken for a connection not made yet. Dropped without [`Claim::keep`], as when the
/// dial is given up midway, it releases the seat.
pub(super) struct Claim(Option<Seat>);

impl Claim {
    /// The seat claimed.
    pub(super) fn seat(&self) -> &Seat {
        self.0
            .as_ref()
            .expect("a claim holds its seat until kept or dropped")
    }

    /// The connection was made: its session holds the seat from now on.
    pub(super) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(seat) = self.0.take() {
            seat.release_later();
        }
    }
}

/// One pool, its transport and the relays seated in it.
#[derive(Clone)]
pub(super) struct SharedPool {
    pub(super) pool: RelayPool,
    /// The pool's WebSocket transport, which counts each connection's bytes.
    pub(super) transport: GuardedWebSocket,
    pub(super) seated: Arc<Mutex<HashSet<nostr::RelayUrl>>>,
}

impl SharedPool {
    /// Seats `url` unless it already has a seat here.
    fn take_seat(&self, url: &nostr::RelayUrl) -> bool {
        self.seated().insert(url.clone())
    }

    fn free_seat(&self, url: &nostr::RelayUrl) {
        self.seated().remove(url);
    }

    fn seated(&self) -> std::sync::MutexGuard<'_, HashSet<nostr::RelayUrl>> {
        self.seated.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session's place in a pool. Clones are the same seat, released once.
#[derive(Clone)]
pub(super) struct Seat {
    pub(super) pool: SharedPool,
    url: nostr::RelayUrl,
    released: Arc<AtomicBool>,
}

impl Seat {
    fn new(pool: SharedPool, url: nostr::RelayUrl) -> Self {
        Self {
            pool,
            url,
            released: Arc::default(),
        }
    }

    /// Removes the relay from the pool (which disconnects it), then frees the seat, so a later
    /// session of the relay can take this pool only once the pool no longer holds this one.
    pub(super) async fn release(&self) {
        if !self.released.swap(true, Ordering::SeqCst) {
            leave(self.pool.clone(), self.url.clone()).await;
        }
    }

    /// [`Self::release`] from a destructor: in a task where a runtime runs, else the seat is
    /// freed at once (without a runtime, no session can be made in the pool any more).
    pub(super) fn release_later(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(leave(self.pool.clone(), self.url.clone()));
            }
            Err(_) => self.pool.free_seat(&self.url),
        }
    }
}

async fn leave(pool: SharedPool, url: nostr::RelayUrl) {
    // Not found when the relay never made it into the pool: nothing to remove then.
    let _ = pool.pool.force_remove_relay(url.clone()).await;
    pool.transport.forget((&url).into());
    pool.free_seat(&url);
}

#[cfg(test)]
mod tests;
