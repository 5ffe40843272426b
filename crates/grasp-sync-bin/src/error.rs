//! `ConfigError`: why a configuration cannot be used. Every message names the file or the key
//! at fault, so an operator can fix it from the one line the daemon prints before it exits.

use thiserror::Error;

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read configuration file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What the operating system said.
        reason: String,
    },
    /// The configuration file is not valid TOML for this daemon (syntax, an unknown key, a
    /// value of the wrong type).
    #[error("invalid configuration file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// The location and the problem, naming the key.
        reason: String,
    },
    /// A key's value is unusable, wherever it came from (file, environment or flag).
    #[error("invalid configuration: `{key}`: {reason}")]
    Invalid {
        /// The key, as spelled in the configuration file.
        key: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// The NIP-42 signing key is unusable (unreadable, not a key, or given twice). The message
    /// names where it came from and never shows the key.
    #[error("invalid configuration: `{key}`: {reason}")]
    AuthKey {
        /// `GRASP_SYNC_AUTH_KEY` or `auth_key_file`.
        key: &'static str,
        /// What is wrong, without the key's text.
        reason: String,
    },
}

impl ConfigError {
    /// The key at fault, when the error is about one key's value.
    pub fn key(&self) -> Option<&'static str> {
        match self {
            ConfigError::Invalid { key, .. } | ConfigError::AuthKey { key, .. } => Some(key),
            _ => None,
        }
    }

    pub(crate) fn invalid(key: &'static str, reason: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key,
            reason: reason.into(),
        }
    }
}
