//! The `shard` key: `INDEX/COUNT`, numbered from 0 (`0/4` to `3/4`), the part of the remote
//! relays this daemon syncs when several daemons share one external own relay (see
//! `grasp_sync_model::Shard` for the rule). Several shards need `own_relay`: embedded daemons
//! would each keep a store of their own, and none would hold the whole.

use grasp_sync_model::{RelayUrl, Shard};

use super::bounds::{self, count_in};
use crate::error::ConfigError;

/// The shard `value` names ([`Shard::WHOLE`] when unset), refused unless it is `INDEX/COUNT`
/// with `COUNT` in [`bounds::SHARD_COUNT`] and `INDEX` below it, or when it is one of several
/// without an external own relay.
pub(crate) fn shard_key(
    value: Option<&str>,
    own_relay: Option<&RelayUrl>,
) -> Result<Shard, ConfigError> {
    let Some(text) = value.map(str::trim) else {
        return Ok(Shard::WHOLE);
    };
    if let Some(count) = text
        .split_once('/')
        .and_then(|(_, count)| count.trim().parse::<u16>().ok())
    {
        count_in("shard", Some(count), bounds::SHARD_COUNT)?;
    }
    let shard: Shard = text
        .parse()
        .map_err(|error: grasp_sync_model::ModelError| {
            ConfigError::invalid("shard", error.to_string())
        })?;
    if !shard.is_whole() && own_relay.is_none() {
        return Err(ConfigError::invalid(
            "shard",
            format!(
                "{shard} is one of several shards, which need an external own relay (own_relay): embedded daemons would each keep a store of their own"
            ),
        ));
    }
    Ok(shard)
}
