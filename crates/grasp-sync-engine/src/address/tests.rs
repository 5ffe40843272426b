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
fn public_addresses_are_allowed() {
    let policy = AddressPolicy::default();
    for url in [
        "wss://nos.lol",
        "wss://relay.damus.io",
        "ws://8.8.8.8",
        "wss://[2001:db8::1]",
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
