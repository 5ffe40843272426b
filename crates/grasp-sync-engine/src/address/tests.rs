//! Tests of the dialing policy.

use grasp_sync_model::RelayUrl;

use super::{AddressPolicy, AddressRefusal};

fn check(policy: &AddressPolicy, url: &str, expected: Result<(), AddressRefusal>) {
    let relay = RelayUrl::parse(url).expect("test url parses");
    assert_eq!(policy.check(&relay), expected, "{url}");
}

#[test]
fn internal_addresses_are_refused_by_default() {
    let policy = AddressPolicy::default();
    for url in [
        "ws://127.0.0.1:7777",
        "ws://localhost:7777",
        "wss://relay.localhost",
        "ws://10.1.2.3",
        "ws://172.16.0.1",
        "ws://192.168.1.1",
        "ws://169.254.169.254",
        "ws://100.64.0.1",
        "ws://0.0.0.0",
        "ws://[::1]:7777",
        "ws://[fe80::1]",
        "ws://[fd00::1]",
        "ws://[::ffff:127.0.0.1]",
        // Every numeric spelling of loopback, and a trailing dot.
        "ws://2130706433",
        "ws://127.1",
        "ws://0x7f000001",
        "ws://0177.0.0.1",
        "ws://0",
        "ws://localhost.",
        "ws://LOCALHOST.",
        // Documentation, benchmarking, reserved, multicast.
        "ws://192.0.2.1",
        "ws://198.18.0.1",
        "ws://240.0.0.1",
        "ws://224.0.0.1",
        "ws://[2001:db8::1]",
        // IPv6 that embeds an internal IPv4 address.
        "ws://[::127.0.0.1]",
        "ws://[64:ff9b::7f00:1]",
        "ws://[2002:7f00:1::]",
        "ws://[2002:a00:1::1]",
        "ws://[fec0::1]",
        "ws://[ff02::1]",
    ] {
        check(&policy, url, Err(AddressRefusal::Internal));
    }
}

/// Other spellings of internal addresses are the addresses they dial (the WHATWG URL parser of
/// the transport reads `127.1` as `127.0.0.1`, DNS reads `localhost.` as `localhost`), so they
/// are refused as well.
#[test]
fn other_spellings_of_internal_addresses_are_refused() {
    let policy = AddressPolicy::default();
    for url in [
        "ws://127.1:7777",
        "ws://0x7f.0.0.1",
        "ws://0177.0.0.1",
        "ws://2130706433",
        "ws://10.1",
        "ws://0",
        "ws://localhost.:7777",
        "ws://127.0.0.1.",
        "wss://relay.localhost.",
    ] {
        check(&policy, url, Err(AddressRefusal::Internal));
    }
}

#[test]
fn resolved_addresses_are_checked_with_the_lists_of_their_host() {
    let policy = AddressPolicy {
        allowed_hosts: vec!["relay.internal.example".to_owned()],
        denied_hosts: vec!["203.0.113.9".to_owned()],
        ..AddressPolicy::default()
    };
    let ip = |text: &str| text.parse::<std::net::IpAddr>().expect("ip");
    // A public name that resolves to loopback or a mapped private address.
    assert_eq!(
        policy.check_address("relay.example", ip("127.0.0.1")),
        Err(AddressRefusal::Internal)
    );
    assert_eq!(
        policy.check_address("relay.example", ip("::ffff:10.0.0.1")),
        Err(AddressRefusal::Internal)
    );
    assert_eq!(policy.check_address("relay.example", ip("8.8.8.8")), Ok(()));
    // An allowed host may resolve to an internal address.
    assert_eq!(
        policy.check_address("relay.internal.example", ip("10.0.0.5")),
        Ok(())
    );
    // A denied address is denied whatever name led to it.
    assert_eq!(
        policy.check_address("other.example", ip("203.0.113.9")),
        Err(AddressRefusal::Denied)
    );
    let open = AddressPolicy::allow_all();
    assert_eq!(open.check_address("localhost", ip("127.0.0.1")), Ok(()));
}

#[test]
fn public_addresses_are_allowed() {
    let policy = AddressPolicy::default();
    for url in [
        "wss://nos.lol",
        "wss://relay.damus.io",
        "ws://8.8.8.8",
        "wss://[2606:4700::1111]",
        "ws://[2002:808:808::1]",
        "ws://[64:ff9b::808:808]",
    ] {
        check(&policy, url, Ok(()));
    }
}

#[test]
fn allow_list_admits_named_internal_hosts_only() {
    let policy = AddressPolicy {
        allowed_hosts: vec!["127.0.0.1".to_owned()],
        ..Default::default()
    };
    check(&policy, "ws://127.0.0.1:9000", Ok(()));
    check(&policy, "ws://10.0.0.1", Err(AddressRefusal::Internal));
}

#[test]
fn deny_list_wins_over_everything() {
    let policy = AddressPolicy {
        allow_private: true,
        denied_hosts: vec!["nos.lol".to_owned()],
        ..Default::default()
    };
    check(&policy, "wss://NOS.lol", Err(AddressRefusal::Denied));
    check(&policy, "ws://127.0.0.1", Ok(()));
}
