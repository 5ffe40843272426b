//! [`RestartingFeed`]: wraps a [`SelfFeed`] so the engine's feed never ends. The engine reads
//! one feed for its whole life and stops discovering repositories when it ends; a store feed
//! ends when its consumer falls too far behind, and restarting it preloads everything stored
//! again (delivery is at least once, so repeats are harmless).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{SelfFeed, StoreError};
use nostr::Event;
use tokio::sync::mpsc;

/// Pause before starting an ended feed again, so a broken store is not hammered.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// Capacity of the receiver handed to the engine.
const OUTPUT_CAPACITY: usize = 1024;

/// A self feed that starts its inner feed again whenever it ends.
#[derive(Debug)]
pub struct RestartingFeed<F> {
    inner: Arc<F>,
}

impl<F: SelfFeed> RestartingFeed<F> {
    /// Wraps `inner`.
    pub fn new(inner: F) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }
}

#[async_trait]
impl<F: SelfFeed> SelfFeed for RestartingFeed<F> {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        let mut current = self.inner.start().await?;
        let inner = Arc::clone(&self.inner);
        let (sender, receiver) = mpsc::channel(OUTPUT_CAPACITY);
        tokio::spawn(async move {
            loop {
                while let Some(event) = current.recv().await {
                    if sender.send(event).await.is_err() {
                        return;
                    }
                }
                if sender.is_closed() {
                    return;
                }
                tracing::warn!("the self feed ended; starting it again");
                current = loop {
                    tokio::time::sleep(RESTART_DELAY).await;
                    if sender.is_closed() {
                        return;
                    }
                    match inner.start().await {
                        Ok(feed) => break feed,
                        Err(error) => tracing::warn!(%error, "cannot restart the self feed"),
                    }
                };
            }
        });
        Ok(receiver)
    }
}

#[cfg(test)]
mod tests;
