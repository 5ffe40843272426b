//! `RepoCoordinate`: the address of a NIP-34 repository, `30617:<hex pubkey>:<identifier>`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use nostr::PublicKey;

use crate::error::ModelError;

/// Kind of a NIP-34 repository announcement.
pub const REPO_ANNOUNCEMENT_KIND: u16 = 30617;

/// Longest identifier accepted, in bytes. Longer identifiers are refused so that one hostile
/// announcement cannot blow up filter budgets.
pub const MAX_IDENTIFIER_BYTES: usize = 256;

/// The address of a repository: the announcement's author and its `d` identifier.
///
/// Ordering is by author then identifier, so sorted inputs chunk deterministically. Cloning is
/// cheap (the identifier is shared), since every relay's targets hold their own copies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoCoordinate {
    owner: PublicKey,
    identifier: Arc<str>,
}

impl RepoCoordinate {
    /// Builds a coordinate, validating the identifier (see [`validate_identifier`]).
    pub fn new(owner: PublicKey, identifier: impl Into<String>) -> Result<Self, ModelError> {
        let identifier = identifier.into();
        validate_identifier(&identifier)?;
        Ok(Self {
            owner,
            identifier: identifier.into(),
        })
    }

    /// The author of the announcement.
    pub fn owner(&self) -> &PublicKey {
        &self.owner
    }

    /// The `d` identifier of the announcement.
    pub fn identifier(&self) -> &str {
        &self.identifier
    }
}

impl fmt::Display for RepoCoordinate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{REPO_ANNOUNCEMENT_KIND}:{}:{}",
            self.owner.to_hex(),
            self.identifier
        )
    }
}

impl FromStr for RepoCoordinate {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.splitn(3, ':');
        let (Some(kind), Some(pubkey), Some(identifier)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(ModelError::MalformedCoordinate(truncated(s)));
        };
        let kind: u16 = kind
            .parse()
            .map_err(|_| ModelError::MalformedCoordinate(truncated(s)))?;
        if kind != REPO_ANNOUNCEMENT_KIND {
            return Err(ModelError::WrongCoordinateKind(kind));
        }
        if pubkey.len() != 64 || !pubkey.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ModelError::InvalidPublicKey(truncated(pubkey)));
        }
        let owner = PublicKey::from_hex(pubkey)
            .map_err(|_| ModelError::InvalidPublicKey(truncated(pubkey)))?;
        Self::new(owner, identifier)
    }
}

/// Checks a repository identifier: non-empty, at most [`MAX_IDENTIFIER_BYTES`], no `/`, `\` or
/// NUL, and not `.` or `..`.
pub fn validate_identifier(identifier: &str) -> Result<(), ModelError> {
    if identifier.is_empty() {
        return Err(ModelError::InvalidIdentifier("empty"));
    }
    if identifier.len() > MAX_IDENTIFIER_BYTES {
        return Err(ModelError::InvalidIdentifier(
            "longer than the identifier cap",
        ));
    }
    if identifier == "." || identifier == ".." {
        return Err(ModelError::InvalidIdentifier("`.` or `..`"));
    }
    if identifier.contains(['/', '\\', '\0']) {
        return Err(ModelError::InvalidIdentifier("contains `/`, `\\` or NUL"));
    }
    Ok(())
}

/// The entries of `map` whose repository `owner` announced, in coordinate order (one range
/// of the map, since coordinates order by author first).
pub(crate) fn announced_by<'a, V>(
    map: &'a BTreeMap<RepoCoordinate, V>,
    owner: &PublicKey,
) -> impl Iterator<Item = (&'a RepoCoordinate, &'a V)> + 'a {
    let owner = *owner;
    // The empty identifier orders before every valid one of this author.
    let first = RepoCoordinate {
        owner,
        identifier: Arc::from(""),
    };
    map.range(first..)
        .take_while(move |(coordinate, _)| coordinate.owner == owner)
}

/// Shortens untrusted text quoted in an error so hostile input cannot bloat logs.
pub(crate) fn truncated(s: &str) -> String {
    const MAX: usize = 80;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests;
