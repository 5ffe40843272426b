//! `ColdStore`: where the rejected-events index's cold tier is persisted, a second, private
//! LMDB database (through `nostr-lmdb`) in a subdirectory of the store's directory.
//!
//! `nostr-lmdb` does not expose its LMDB environment, and opening one directly takes unsafe
//! code, which the workspace forbids. So each cold entry is kept as one small record event in
//! its own `NostrLMDB`: kind [`COLD_RECORD_KIND`], a `d` tag holding the rejected ID in hex,
//! the entry as JSON content, signed by a fixed local key. This database is never served or
//! synced; it only survives restarts.

use std::path::Path;

use futures::future::join_all;
use nostr::secp256k1::{Keypair, Message};
use nostr::{Event, EventId, Filter, Kind, PublicKey, SECP256K1, Tag, Tags, Timestamp};
use nostr_database::NostrDatabase;
use nostr_lmdb::NostrLMDB;

use crate::error::StoreError;
use crate::store::database::MAX_SAVES_IN_FLIGHT;
use crate::store::rejected::{ColdChange, ColdRecord};

/// Name of the cold index's directory inside the store's directory.
pub const COLD_DIRECTORY: &str = "rejected-index";

/// Kind of the record events in the cold index's database.
pub const COLD_RECORD_KIND: u16 = 9_617;

/// LMDB map size reserved per cold entry (records and their indexes take far less).
const MAP_BYTES_PER_ENTRY: usize = 8 * 1024;

/// Smallest LMDB map of the cold index.
const MIN_MAP_BYTES: usize = 64 * 1024 * 1024;

/// The cold tier's database.
#[derive(Debug)]
pub(crate) struct ColdStore {
    db: NostrLMDB,
    keypair: Keypair,
    public_key: PublicKey,
}

impl ColdStore {
    /// Opens (or creates) the cold index under the store's directory `store_path`, sized for
    /// `capacity` entries.
    pub(crate) fn open(store_path: &Path, capacity: usize) -> Result<Self, StoreError> {
        let map_size = capacity
            .saturating_mul(MAP_BYTES_PER_ENTRY)
            .max(MIN_MAP_BYTES);
        let db = NostrLMDB::builder(store_path.join(COLD_DIRECTORY))
            .map_size(map_size)
            .build()
            .map_err(backend)?;
        let keypair = Keypair::from_seckey_slice(SECP256K1, &[0x5a; 32])
            .map_err(|error| StoreError::Backend(error.to_string()))?;
        let public_key = PublicKey::from(keypair.x_only_public_key().0);
        Ok(Self {
            db,
            keypair,
            public_key,
        })
    }

    /// Every persisted entry; records that do not parse are deleted.
    pub(crate) async fn load(&self) -> Result<Vec<ColdRecord>, StoreError> {
        let events = self
            .db
            .query(Filter::new().kind(Kind::from(COLD_RECORD_KIND)))
            .await
            .map_err(backend)?;
        let mut records = Vec::new();
        let mut broken = Vec::new();
        for event in events {
            match serde_json::from_str::<ColdRecord>(&event.content) {
                Ok(record) => records.push(record),
                Err(_) => broken.push(event.id),
            }
        }
        if !broken.is_empty() {
            self.db
                .delete(Filter::new().ids(broken))
                .await
                .map_err(backend)?;
        }
        Ok(records)
    }

    /// Applies pending writes: deletes the old record of every changed ID, then saves the new
    /// ones (concurrently, so LMDB batches them).
    pub(crate) async fn apply(&self, changes: Vec<ColdChange>) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let identifiers: Vec<String> = changes.iter().map(|(id, _)| id.to_hex()).collect();
        self.db
            .delete(
                Filter::new()
                    .kind(Kind::from(COLD_RECORD_KIND))
                    .identifiers(identifiers),
            )
            .await
            .map_err(backend)?;
        let events: Vec<Event> = changes
            .into_iter()
            .filter_map(|(id, record)| record.map(|record| self.record_event(&id, &record)))
            .collect::<Result<_, _>>()?;
        // In chunks: the LMDB backend writes the saves waiting for it in one transaction, whose
        // page buffers it keeps while open (see `MAX_SAVES_IN_FLIGHT`).
        for chunk in events.chunks(MAX_SAVES_IN_FLIGHT) {
            for status in join_all(chunk.iter().map(|event| self.db.save_event(event))).await {
                status.map_err(backend)?;
            }
        }
        Ok(())
    }

    /// The record event for one entry, signed deterministically by the local key.
    fn record_event(&self, id: &EventId, record: &ColdRecord) -> Result<Event, StoreError> {
        let content = serde_json::to_string(record)
            .map_err(|error| StoreError::Backend(error.to_string()))?;
        let tags = Tags::from_list(vec![Tag::identifier(id.to_hex())]);
        let kind = Kind::from(COLD_RECORD_KIND);
        let created_at = Timestamp::from_secs(record.recorded_at);
        let public_key = self.public_key;
        let event_id = EventId::new(&public_key, &created_at, &kind, &tags, &content);
        let message = Message::from_digest(event_id.to_bytes());
        let signature = SECP256K1.sign_schnorr_no_aux_rand(&message, &self.keypair);
        Ok(Event::new(
            event_id, public_key, created_at, kind, tags, content, signature,
        ))
    }
}

fn backend(error: nostr_database::DatabaseError) -> StoreError {
    StoreError::Backend(error.to_string())
}
