//! `RelayUrl`: a relay address in one normal form, so equal relays compare equal everywhere.
//!
//! Normalisation rules, applied by [`RelayUrl::parse`] and nowhere else:
//! - surrounding ASCII whitespace is trimmed; the input may be at most [`MAX_RELAY_URL_BYTES`];
//! - the scheme must be `ws` or `wss` (any case) and is lowercased;
//! - the host is parsed as a WebSocket client parses it (the WHATWG URL host parser, from the
//!   `url` crate), so every spelling of one address is one host: a host that ends in a number
//!   is an IPv4 address in any of its numeric forms (`2130706433`, `127.1`, `0x7f000001`,
//!   `0177.0.0.1` are all `127.0.0.1`) and is written dotted; a bracketed IPv6 host is written
//!   in its canonical form; a name is lowercased and loses one trailing dot (`Relay.Example.`
//!   is `relay.example`);
//! - user information (`user@`) is refused; non-ASCII hosts are refused (use the punycode form);
//! - the default port (80 for `ws`, 443 for `wss`) and an empty port are dropped;
//! - a path of exactly `/` is dropped; any other path is kept as it is, since some relays live
//!   under one;
//! - the query and the fragment are dropped: `wss://relay.example/?1` and
//!   `wss://relay.example/?2` are one relay, not two;
//! - the path may hold only visible ASCII.
//!
//! [`RelayUrl::same_endpoint`] compares scheme, host and port only, whatever the path: that is
//! how the service recognises its own relay.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::coordinate::truncated;
use crate::error::ModelError;

/// Longest relay URL accepted, in bytes, before and after normalisation.
pub const MAX_RELAY_URL_BYTES: usize = 512;

/// A normalised `ws://` or `wss://` relay URL.
///
/// Ordering, equality and hashing are those of the normalised text. Cloning is cheap (the text
/// is shared), since every index keyed by relay holds its own copies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelayUrl {
    url: Arc<str>,
    /// Where the host starts and ends in `url` (at most [`MAX_RELAY_URL_BYTES`]).
    host_start: u16,
    host_end: u16,
}

impl RelayUrl {
    /// Parses and normalises a relay URL (see the module documentation for the rules).
    pub fn parse(input: &str) -> Result<Self, ModelError> {
        let input = input.trim_matches(|c: char| c.is_ascii_whitespace());
        if input.len() > MAX_RELAY_URL_BYTES {
            return Err(ModelError::RelayUrlTooLong(input.len()));
        }
        let invalid = |reason| ModelError::InvalidRelayUrl {
            reason,
            url: truncated(input),
        };

        let (scheme, rest) = input
            .split_once("://")
            .ok_or_else(|| invalid("no `://` after a scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "ws" => 80,
            "wss" => 443,
            _ => return Err(ModelError::UnsupportedRelayScheme(truncated(&scheme))),
        };

        // Drop the fragment, then split authority from path and query.
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err(invalid("user information is not allowed"));
        }
        let (host, port) =
            split_host_port(authority).ok_or_else(|| invalid("malformed host or port"))?;
        let host = normalise_host(host).ok_or_else(|| invalid("malformed host"))?;
        let port = match port {
            None | Some("") => None,
            Some(digits) => {
                if !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(invalid("port is not a number"));
                }
                match digits.parse::<u16>() {
                    Ok(0) | Err(_) => return Err(invalid("port out of range")),
                    Ok(port) if port == default_port => None,
                    Ok(port) => Some(port),
                }
            }
        };

        let path = path_and_query
            .split_once('?')
            .map_or(path_and_query, |(path, _query)| path);
        if !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(
                "the path holds a space, a control or a non-ascii character",
            ));
        }
        let path = if path == "/" { "" } else { path };

        let mut url = String::with_capacity(input.len());
        url.push_str(&scheme);
        url.push_str("://");
        let host_start = url.len();
        url.push_str(&host);
        let host_end = url.len();
        if let Some(port) = port {
            url.push(':');
            url.push_str(&port.to_string());
        }
        url.push_str(path);
        if url.len() > MAX_RELAY_URL_BYTES {
            return Err(ModelError::RelayUrlTooLong(url.len()));
        }
        // Both fit: the URL is at most `MAX_RELAY_URL_BYTES` long.
        let offset =
            |at: usize| u16::try_from(at).map_err(|_| ModelError::RelayUrlTooLong(url.len()));
        Ok(Self {
            host_start: offset(host_start)?,
            host_end: offset(host_end)?,
            url: url.into(),
        })
    }

    /// The normalised URL.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The host, lowercased; an IPv6 host keeps its brackets (`[::1]`).
    pub fn host(&self) -> &str {
        &self.url[usize::from(self.host_start)..usize::from(self.host_end)]
    }

    /// Whether the scheme is `wss`.
    pub fn is_secure(&self) -> bool {
        self.url.starts_with("wss://")
    }

    /// The port, the scheme's default when none is written.
    pub fn port(&self) -> u16 {
        let after_host = &self.url[usize::from(self.host_end)..];
        after_host
            .strip_prefix(':')
            .and_then(|rest| rest.split('/').next())
            .and_then(|digits| digits.parse().ok())
            .unwrap_or(if self.is_secure() { 443 } else { 80 })
    }

    /// Whether both URLs reach the same scheme, host and port, whatever their paths.
    pub fn same_endpoint(&self, other: &RelayUrl) -> bool {
        self.is_secure() == other.is_secure()
            && self.host() == other.host()
            && self.port() == other.port()
    }
}

impl fmt::Display for RelayUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

impl FromStr for RelayUrl {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl AsRef<str> for RelayUrl {
    fn as_ref(&self) -> &str {
        &self.url
    }
}

/// Splits `host[:port]` or `[v6][:port]`; `None` if brackets are unbalanced or junk follows them.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.starts_with('[') {
        let close = authority.find(']')?;
        let (host, after) = authority.split_at(close + 1);
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match authority.split_once(':') {
        Some((host, port)) => Some((host, Some(port))),
        None => Some((authority, None)),
    }
}

/// The host in its one written form: an IPv4 address dotted (from any numeric spelling), an
/// IPv6 address bracketed and canonical, a name lowercased without a trailing dot.
fn normalise_host(host: &str) -> Option<String> {
    let ascii = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'[' | b']' | b':'));
    if host.is_empty() || !ascii {
        return None;
    }
    match url::Host::parse(host).ok()? {
        url::Host::Ipv4(address) => Some(address.to_string()),
        url::Host::Ipv6(address) => Some(format!("[{address}]")),
        url::Host::Domain(name) => {
            let name = name.strip_suffix('.').unwrap_or(&name);
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
                && !name.starts_with('.')
                && !name.ends_with('.')
                && !name.contains("..");
            valid.then(|| name.to_ascii_lowercase())
        }
    }
}

#[cfg(test)]
mod tests;
