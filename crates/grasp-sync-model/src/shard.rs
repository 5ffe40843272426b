//! [`Shard`]: which remote relays one of several daemons syncs, when several daemons share one
//! own relay.
//!
//! The rule is rendezvous (highest-random-weight) hashing of the relay's normal form
//! ([`RelayUrl::as_str`]): every shard `i` of `N` weighs the relay by the first eight bytes of
//! SHA-256 over `i` (four bytes, big-endian) followed by the URL, and the relay belongs to the
//! shard with the highest weight (the lowest index on a tie). So:
//! - every relay belongs to exactly one shard of `N`;
//! - which shard owns a relay depends only on the URL, `i` and `N`, never on which other shards
//!   are running, on the platform or on the Rust version (SHA-256, not the standard hasher);
//! - going from `N` to `N + 1` shards moves about `1 / (N + 1)` of the relays, all of them to the
//!   new shard `N`: the weights of shards `0..N` do not change.
//!
//! Shards are numbered from 0: the shards of a 4-shard deployment are `0/4`, `1/4`, `2/4` and
//! `3/4`. The default, [`Shard::WHOLE`] (`0/1`), owns every relay.

use std::fmt;
use std::str::FromStr;

use nostr::hashes::{Hash, sha256};

use crate::error::ModelError;
use crate::relay_url::RelayUrl;

/// Most shards one deployment may have.
pub const MAX_SHARDS: u16 = 64;

/// Shard `index` of `count`: the part of the remote relays one daemon syncs.
///
/// Parsed from and shown as `I/N` (0-based `I`, `I < N`, `N` in `1..=64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    index: u16,
    count: u16,
}

impl Shard {
    /// The only shard of one: it owns every relay.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`; `count` must be in `1..=64` and `index` below it.
    pub fn new(index: u16, count: u16) -> Result<Shard, ModelError> {
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(ModelError::InvalidShard(format!(
                "the shard count {count} is not between 1 and {MAX_SHARDS}"
            )));
        }
        if index >= count {
            return Err(ModelError::InvalidShard(format!(
                "shard {index} of {count} does not exist: shards are numbered from 0 to {}",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// This shard's number, from 0.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// How many shards there are.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Whether this is the only shard (no sharding).
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// Whether this shard syncs `relay`.
    pub fn owns(&self, relay: &RelayUrl) -> bool {
        self.is_whole() || Shard::owner_of(relay, self.count) == self.index
    }

    /// The shard of `count` that owns `relay` (0 when `count` is 0 or 1).
    pub fn owner_of(relay: &RelayUrl, count: u16) -> u16 {
        (0..count.max(1))
            .map(|index| (weight(index, relay), index))
            // Highest weight wins; on a tie, the lowest index.
            .max_by(|(a, a_index), (b, b_index)| a.cmp(b).then(b_index.cmp(a_index)))
            .map_or(0, |(_, index)| index)
    }
}

impl Default for Shard {
    /// [`Shard::WHOLE`].
    fn default() -> Self {
        Shard::WHOLE
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = ModelError;

    /// Parses `I/N`, e.g. `0/4` (surrounding whitespace allowed).
    fn from_str(text: &str) -> Result<Shard, ModelError> {
        let text = text.trim();
        let malformed = || {
            ModelError::InvalidShard(format!(
                "`{}` is not INDEX/COUNT such as `0/4`",
                crate::coordinate::truncated(text)
            ))
        };
        let (index, count) = text.split_once('/').ok_or_else(malformed)?;
        let number = |part: &str| {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed());
            }
            // Anything too large for u16 is far above the cap.
            Ok(part.parse::<u16>().unwrap_or(u16::MAX))
        };
        Shard::new(number(index)?, number(count)?)
    }
}

/// Shard `index`'s weight for `relay`: the first eight bytes of SHA-256(index ‖ url).
fn weight(index: u16, relay: &RelayUrl) -> u64 {
    let mut input = Vec::with_capacity(4 + relay.as_str().len());
    input.extend_from_slice(&u32::from(index).to_be_bytes());
    input.extend_from_slice(relay.as_str().as_bytes());
    let digest = sha256::Hash::hash(&input).to_byte_array();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests;
