//! Which discovered relays the engine may dial: private, loopback and link-local addresses are
//! refused unless allowed, so a hostile announcement cannot point the daemon at internal hosts.
//!
//! Only literal addresses and `localhost` names are recognised here; a public DNS name that
//! resolves to a private address is not detected (resolution happens in the transport).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use grasp_sync_model::RelayUrl;

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

    /// Decides whether `relay` may be dialled.
    pub fn check(&self, relay: &RelayUrl) -> Result<(), AddressRefusal> {
        let host = relay
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if self
            .denied_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&host))
        {
            return Err(AddressRefusal::Denied);
        }
        if self.allow_private
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&host))
        {
            return Ok(());
        }
        if is_internal_host(&host) {
            return Err(AddressRefusal::Internal);
        }
        Ok(())
    }
}

/// Whether a host (lowercase, IPv6 without brackets) names an internal address.
pub fn is_internal_host(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => is_internal_v4(ip),
        Ok(IpAddr::V6(ip)) => is_internal_v6(ip),
        Err(_) => false,
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || a == 0
        // 100.64.0.0/10, shared address space
        || (a == 100 && (64..=127).contains(&b))
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_internal_v4(v4);
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        // fc00::/7 unique local
        || (first & 0xfe00) == 0xfc00
        // fe80::/10 link local
        || (first & 0xffc0) == 0xfe80
}

#[cfg(test)]
mod tests;
