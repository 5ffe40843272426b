//! Tests of the restarting feed: an inner feed that ends is started again and nothing it
//! delivers is lost.

use std::sync::Mutex;

use async_trait::async_trait;
use grasp_sync_engine::{SelfFeed, StoreError};
use nostr::{Event, EventBuilder, Keys};
use tokio::sync::mpsc;

use super::RestartingFeed;

/// A feed that delivers one prepared batch per start, then ends.
struct Batches {
    batches: Mutex<Vec<Vec<Event>>>,
}

#[async_trait]
impl SelfFeed for Batches {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        let batch = self
            .batches
            .lock()
            .map_err(|_| StoreError::Closed)?
            .pop()
            .ok_or(StoreError::Closed)?;
        let (sender, receiver) = mpsc::channel(batch.len().max(1));
        for event in batch {
            sender.try_send(event).map_err(|_| StoreError::Closed)?;
        }
        Ok(receiver)
    }
}

fn note(text: &str) -> Event {
    EventBuilder::text_note(text)
        .sign_with_keys(&Keys::generate())
        .expect("sign")
}

#[tokio::test(start_paused = true)]
async fn an_ended_feed_is_started_again_and_keeps_delivering() {
    let first = vec![note("a"), note("b")];
    let second = vec![note("c")];
    let feed = RestartingFeed::new(Batches {
        batches: Mutex::new(vec![second.clone(), first.clone()]),
    });
    let mut receiver = feed.start().await.expect("start");
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(receiver.recv().await.expect("event").id);
    }
    let want: Vec<_> = first.iter().chain(&second).map(|e| e.id).collect();
    assert_eq!(got, want);
}
