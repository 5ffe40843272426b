//! The NIP-42 signing key: read from `GRASP_SYNC_AUTH_KEY` (the key itself, never a flag, so
//! it stays out of the process list) or from the file `auth_key_file` names, as an `nsec` or
//! 64 hex digits. [`SecretText`] and [`AuthKey`] never show the secret in `Debug`, and no
//! error carries it: a bad key is [`ConfigError::AuthKey`], naming where it came from.

use std::fmt;
use std::path::Path;

use nostr::Keys;

use crate::error::ConfigError;

/// The environment variable that carries the key itself.
pub const AUTH_KEY_ENV: &str = "GRASP_SYNC_AUTH_KEY";

/// The configuration key naming a file that holds the key.
const AUTH_KEY_FILE: &str = "auth_key_file";

/// What a bad key is told: never the key's text.
const NOT_A_KEY: &str = "not a secret key (expected an nsec or 64 hex digits)";

/// Text that must not be shown: `Debug` prints `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }
}

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The key that answers relays' NIP-42 challenges. `Debug` shows its public key only.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(Keys);

impl AuthKey {
    /// The signing keys.
    pub fn keys(&self) -> &Keys {
        &self.0
    }
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthKey")
            .field("public_key", &self.0.public_key().to_hex())
            .finish()
    }
}

/// The key from the environment's text or the file at `file`; neither is no key. Both at once
/// is an error: which one is meant would be a guess.
pub(crate) fn resolve_auth_key(
    text: Option<&SecretText>,
    file: Option<&Path>,
) -> Result<Option<AuthKey>, ConfigError> {
    match (text, file) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(ConfigError::AuthKey {
            key: AUTH_KEY_ENV,
            reason: format!("set either {AUTH_KEY_ENV} or {AUTH_KEY_FILE}, not both"),
        }),
        (Some(SecretText(text)), None) => parse(AUTH_KEY_ENV, text).map(Some),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|error| ConfigError::AuthKey {
                key: AUTH_KEY_FILE,
                reason: format!("cannot read {}: {error}", path.display()),
            })?;
            parse(AUTH_KEY_FILE, &text).map(Some)
        }
    }
}

fn parse(key: &'static str, text: &str) -> Result<AuthKey, ConfigError> {
    Keys::parse(text.trim())
        .map(AuthKey)
        .map_err(|_| ConfigError::AuthKey {
            key,
            reason: NOT_A_KEY.to_owned(),
        })
}

#[cfg(test)]
mod tests;
