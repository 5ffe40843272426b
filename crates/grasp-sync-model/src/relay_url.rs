//! `RelayUrl`: a relay address in one normal form, so equal relays compare equal everywhere.
//!
//! Normalisation rules, applied by [`RelayUrl::parse`] and nowhere else:
//! - surrounding ASCII whitespace is trimmed; the input may be at most [`MAX_RELAY_URL_BYTES`];
//! - the scheme must be `ws` or `wss` (any case) and is lowercased;
//! - the host is lowercased; a bracketed IPv6 host is written in its canonical form;
//!   user information (`user@`) is refused; non-ASCII hosts are refused (use the punycode form);
//! - a host is read the way the transport's WHATWG URL parser reads it (`url::Host::parse`), so
//!   the host judged here is the host dialled: a name that ends in a number is an IPv4 address
//!   in whatever spelling (`127.1`, `0x7f.0.0.1`, `2130706433`) and is written in dotted-decimal
//!   form, or refused when it is not a valid one; a single trailing dot is dropped
//!   (`localhost.` is `localhost`);
//! - the default port (80 for `ws`, 443 for `wss`) and an empty port are dropped;
//! - a path of exactly `/` is dropped; any other path and the query are kept as they are;
//! - the fragment is dropped, since it never reaches the relay;
//! - path and query may hold only visible ASCII.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use crate::coordinate::truncated;
use crate::error::ModelError;

/// Longest relay URL accepted, in bytes, before and after normalisation.
pub const MAX_RELAY_URL_BYTES: usize = 512;

/// A normalised `ws://` or `wss://` relay URL.
///
/// Ordering, equality and hashing are those of the normalised text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelayUrl {
    url: String,
    host_start: usize,
    host_end: usize,
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

        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        if !path_and_query.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(
                "path or query holds a space, a control or a non-ascii character",
            ));
        }
        let path = if path == "/" { "" } else { path };
        let query = query.filter(|q| !q.is_empty());

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
        if let Some(query) = query {
            url.push('?');
            url.push_str(query);
        }
        if url.len() > MAX_RELAY_URL_BYTES {
            return Err(ModelError::RelayUrlTooLong(url.len()));
        }
        Ok(Self {
            url,
            host_start,
            host_end,
        })
    }

    /// The normalised URL.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The host, lowercased; an IPv6 host keeps its brackets (`[::1]`).
    pub fn host(&self) -> &str {
        &self.url[self.host_start..self.host_end]
    }

    /// Whether the scheme is `wss`.
    pub fn is_secure(&self) -> bool {
        self.url.starts_with("wss://")
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

/// Canonicalises a bracketed IPv6 host, or reads a name or IPv4 host as the WHATWG URL parser
/// does: lowercased, without one trailing dot, any spelling of an IPv4 address in dotted-decimal
/// form.
fn normalise_host(host: &str) -> Option<String> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']')?;
        let address = Ipv6Addr::from_str(inner).ok()?;
        return Some(format!("[{address}]"));
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        && !host.starts_with('.')
        && !host.ends_with('.')
        && !host.contains("..");
    if !valid {
        return None;
    }
    match url::Host::parse(&host.to_ascii_lowercase()).ok()? {
        url::Host::Domain(name) => Some(name),
        url::Host::Ipv4(address) => Some(address.to_string()),
        url::Host::Ipv6(_) => None,
    }
}

#[cfg(test)]
mod tests;
