//! Which relays the engine may dial: internal addresses are refused unless allowed, so a hostile
//! announcement cannot point the daemon at internal hosts.
//!
//! The rule is applied twice. [`AddressPolicy::check`] reads a relay URL when the relay is
//! discovered: literal addresses (every numeric IPv4 spelling is already dotted by
//! [`RelayUrl`]) and `localhost` names. [`AddressPolicy::check_address`] reads each address a
//! host name resolves to, at connect time, in the transport ([`crate::transport::connect_checked`]),
//! so a public name that resolves to an internal address is refused too, and the address that
//! was checked is the address that is dialled.
//!
//! Internal means: loopback, private (RFC 1918), shared (100.64/10), link-local, unspecified,
//! "this network" (0/8), broadcast, benchmarking (198.18/15), documentation (192.0.2/24,
//! 198.51.100/24, 203.0.113/24, 2001:db8::/32), reserved (240/4), multicast, IPv6 unique-local
//! (fc00::/7), site-local (fec0::/10) and discard (100::/64), and any IPv6 address that embeds
//! an internal IPv4 one (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16).

mod refusals;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use grasp_sync_model::RelayUrl;

pub(crate) use refusals::AddressRefusals;

/// The dialing policy for discovered relay hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Allow every private, loopback and link-local address.
    pub allow_private: bool,
    /// Hosts allowed even when private (exact, case-insensitive; IPv6 without brackets).
    pub allowed_hosts: Vec<String>,
    /// Hosts never dialled (exact, case-insensitive).
    pub denied_hosts: Vec<String>,
}

/// Why a relay may not be dialled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressRefusal {
    /// The host is a private, loopback, link-local or otherwise internal address.
    Internal,
    /// The host is on the deny list.
    Denied,
}

impl AddressPolicy {
    /// Allows loopback and private addresses (tests and local demos).
    pub fn allow_all() -> Self {
        Self {
            allow_private: true,
            ..Self::default()
        }
    }

    /// Decides whether `relay` may be dialled, by its URL.
    pub fn check(&self, relay: &RelayUrl) -> Result<(), AddressRefusal> {
        let host = bare_host(relay.host());
        self.admit(&host, || is_internal_host(&host))
    }

    /// Decides whether `ip`, an address `host` resolved to, may be connected to. `host` is
    /// the URL's host (lowercase, IPv6 without brackets): the allow and deny lists name hosts,
    /// and an allowed host's addresses are all allowed.
    pub fn check_address(&self, host: &str, ip: IpAddr) -> Result<(), AddressRefusal> {
        let host = bare_host(host);
        if self.denied_hosts.iter().any(|h| *h == ip.to_string()) {
            return Err(AddressRefusal::Denied);
        }
        self.admit(&host, || is_internal_ip(ip))
    }

    fn admit(&self, host: &str, internal: impl FnOnce() -> bool) -> Result<(), AddressRefusal> {
        if self
            .denied_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
        {
            return Err(AddressRefusal::Denied);
        }
        if self.allow_private
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host))
        {
            return Ok(());
        }
        if internal() {
            return Err(AddressRefusal::Internal);
        }
        Ok(())
    }
}

impl AddressRefusal {
    /// A short label for metrics and status.
    pub fn label(self) -> &'static str {
        match self {
            AddressRefusal::Internal => "internal",
            AddressRefusal::Denied => "denied",
        }
    }
}

/// A host lowercased, without IPv6 brackets.
fn bare_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// Whether a host (lowercase, IPv6 without brackets) names an internal address.
pub fn is_internal_host(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(is_internal_ip)
}

/// Whether an address is internal (see the module documentation for the ranges).
pub fn is_internal_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_internal_v4(ip),
        IpAddr::V6(ip) => is_internal_v6(ip),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        // 100.64.0.0/10, shared address space
        || (a == 100 && (64..=127).contains(&b))
        // 198.18.0.0/15, benchmarking
        || (a == 198 && (b == 18 || b == 19))
        // 192.0.0.0/24, protocol assignments
        || (a == 192 && b == 0 && c == 0)
        // 240.0.0.0/4, reserved
        || a >= 240
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let embedded_v4 = |high: u16, low: u16| {
        Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8)
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_internal_v4(v4);
    }
    // ::a.b.c.d, IPv4-compatible (deprecated, still routed by some stacks)
    if segments[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return is_internal_v4(embedded_v4(segments[6], segments[7]));
    }
    // 64:ff9b::/96, NAT64
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_internal_v4(embedded_v4(segments[6], segments[7]));
    }
    // 2002::/16, 6to4: the IPv4 address follows the prefix
    if segments[0] == 0x2002 {
        return is_internal_v4(embedded_v4(segments[1], segments[2]));
    }
    let first = segments[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // fc00::/7 unique local
        || (first & 0xfe00) == 0xfc00
        // fe80::/10 link local
        || (first & 0xffc0) == 0xfe80
        // fec0::/10 site local (deprecated)
        || (first & 0xffc0) == 0xfec0
        // 2001:db8::/32 documentation
        || (first == 0x2001 && segments[1] == 0x0db8)
        // 100::/64 discard
        || segments[..4] == [0x100, 0, 0, 0]
}

#[cfg(test)]
mod tests;
