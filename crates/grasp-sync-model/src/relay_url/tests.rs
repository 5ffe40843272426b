//! Unit tests of `RelayUrl` normalisation, one `check` per rule.

use super::*;

/// Parses `input` and compares the normalised text (or the error) with `expected`.
fn check(input: &str, expected: Result<&str, ModelError>) {
    let got = RelayUrl::parse(input);
    assert_eq!(
        got.as_ref().map(RelayUrl::as_str),
        expected.as_ref().map(|s| *s),
        "input {input:?}"
    );
}

fn invalid(reason: &'static str, url: &str) -> ModelError {
    ModelError::InvalidRelayUrl {
        reason,
        url: url.to_owned(),
    }
}

#[test]
fn scheme_and_host_are_lowercased() {
    check("WSS://Relay.Example.COM", Ok("wss://relay.example.com"));
    check("Ws://NOS.lol", Ok("ws://nos.lol"));
}

#[test]
fn the_path_keeps_its_case_and_the_query_is_dropped() {
    check(
        "wss://relay.example/Inbox?Key=V",
        Ok("wss://relay.example/Inbox"),
    );
}

#[test]
fn every_numeric_spelling_of_an_ipv4_host_is_one_host() {
    for spelling in [
        "ws://2130706433",
        "ws://127.1",
        "ws://0x7f000001",
        "ws://0x7F.0.0.1",
        "ws://0177.0.0.1",
        "ws://127.0.0.1.",
        "ws://127.0.0.1",
    ] {
        check(spelling, Ok("ws://127.0.0.1"));
    }
    check("ws://0", Ok("ws://0.0.0.0"));
    check("ws://0:7000/x", Ok("ws://0.0.0.0:7000/x"));
    // A name that ends in a number that is not an address is not a host.
    check(
        "ws://relay.999999999999",
        Err(invalid("malformed host", "ws://relay.999999999999")),
    );
}

#[test]
fn a_trailing_dot_is_dropped_from_a_name() {
    check("ws://LocalHost.", Ok("ws://localhost"));
    check("wss://relay.example.:443/x", Ok("wss://relay.example/x"));
    check(
        "ws://relay..example",
        Err(invalid("malformed host", "ws://relay..example")),
    );
}

#[test]
fn ipv4_mapped_ipv6_hosts_are_canonical() {
    check("ws://[::FFFF:127.0.0.1]", Ok("ws://[::ffff:127.0.0.1]"));
    check(
        "ws://[0:0:0:0:0:ffff:7f00:1]:80",
        Ok("ws://[::ffff:127.0.0.1]"),
    );
}

#[test]
fn queries_make_no_new_relays_but_paths_do() {
    let one = RelayUrl::parse("wss://big.example/?1").unwrap();
    let two = RelayUrl::parse("wss://big.example/?32").unwrap();
    assert_eq!(one, two);
    let under = RelayUrl::parse("wss://big.example/nostr").unwrap();
    assert_ne!(one, under);
    assert!(one.same_endpoint(&under));
    assert!(!one.same_endpoint(&RelayUrl::parse("ws://big.example").unwrap()));
    assert!(!one.same_endpoint(&RelayUrl::parse("wss://big.example:444").unwrap()));
    assert_eq!(
        RelayUrl::parse("wss://big.example:444/x").unwrap().port(),
        444
    );
    assert_eq!(one.port(), 443);
    assert_eq!(RelayUrl::parse("ws://big.example").unwrap().port(), 80);
}

#[test]
fn only_ws_and_wss_schemes_are_accepted() {
    check(
        "https://relay.example",
        Err(ModelError::UnsupportedRelayScheme("https".into())),
    );
    check(
        "HTTP://relay.example",
        Err(ModelError::UnsupportedRelayScheme("http".into())),
    );
    check(
        "relay.example",
        Err(invalid("no `://` after a scheme", "relay.example")),
    );
    check(
        "git+ssh://relay.example",
        Err(ModelError::UnsupportedRelayScheme("git+ssh".into())),
    );
}

#[test]
fn default_port_is_dropped() {
    check("wss://relay.example:443", Ok("wss://relay.example"));
    check("ws://relay.example:80/", Ok("ws://relay.example"));
    check("wss://relay.example:0443", Ok("wss://relay.example"));
}

#[test]
fn other_ports_are_kept() {
    check("wss://relay.example:80", Ok("wss://relay.example:80"));
    check("ws://relay.example:443", Ok("ws://relay.example:443"));
    check("ws://127.0.0.1:7777/", Ok("ws://127.0.0.1:7777"));
}

#[test]
fn empty_port_is_dropped() {
    check("wss://relay.example:", Ok("wss://relay.example"));
}

#[test]
fn bad_ports_are_refused() {
    check(
        "wss://relay.example:0",
        Err(invalid("port out of range", "wss://relay.example:0")),
    );
    check(
        "wss://relay.example:65536",
        Err(invalid("port out of range", "wss://relay.example:65536")),
    );
    check(
        "wss://relay.example:4x3",
        Err(invalid("port is not a number", "wss://relay.example:4x3")),
    );
    check(
        "wss://relay.example:+443",
        Err(invalid("port is not a number", "wss://relay.example:+443")),
    );
}

#[test]
fn trailing_slash_on_empty_path_is_dropped() {
    check("wss://relay.example/", Ok("wss://relay.example"));
    check("wss://relay.example/?a=1", Ok("wss://relay.example"));
    check(
        "wss://relay.example/nostr/",
        Ok("wss://relay.example/nostr/"),
    );
    check("wss://relay.example//", Ok("wss://relay.example//"));
}

#[test]
fn empty_query_is_dropped() {
    check("wss://relay.example/?", Ok("wss://relay.example"));
}

#[test]
fn fragment_is_dropped() {
    check("wss://relay.example/#top", Ok("wss://relay.example"));
    check(
        "wss://relay.example/path?q=1#frag",
        Ok("wss://relay.example/path"),
    );
    check("wss://relay.example#", Ok("wss://relay.example"));
}

#[test]
fn userinfo_is_refused() {
    check(
        "wss://user:pw@relay.example",
        Err(invalid(
            "user information is not allowed",
            "wss://user:pw@relay.example",
        )),
    );
    check(
        "wss://@relay.example",
        Err(invalid(
            "user information is not allowed",
            "wss://@relay.example",
        )),
    );
}

#[test]
fn surrounding_whitespace_is_trimmed() {
    check("  wss://relay.example \n", Ok("wss://relay.example"));
}

#[test]
fn malformed_hosts_are_refused() {
    check("wss://", Err(invalid("malformed host", "wss://")));
    check("wss:///path", Err(invalid("malformed host", "wss:///path")));
    check(
        "wss://relay example",
        Err(invalid("malformed host", "wss://relay example")),
    );
    check(
        "wss://rélay.example",
        Err(invalid("malformed host", "wss://rélay.example")),
    );
    check(
        "wss://relay..example",
        Err(invalid("malformed host", "wss://relay..example")),
    );
    check(
        "wss://%72elay.example",
        Err(invalid("malformed host", "wss://%72elay.example")),
    );
}

/// The transport reads hosts with the WHATWG URL parser, which takes a name ending in a number
/// for an IPv4 address; the normal form names that address, so the address policy judges the
/// host that is dialled. `ws://6` is the input the `relay_url` fuzz target found.
#[test]
fn hosts_ending_in_a_number_are_ipv4_addresses_in_dotted_decimal() {
    check("ws://6", Ok("ws://0.0.0.6"));
    check("ws://127.1:7777", Ok("ws://127.0.0.1:7777"));
    check("ws://0x7f.0.0.1", Ok("ws://127.0.0.1"));
    check("ws://0177.0.0.1", Ok("ws://127.0.0.1"));
    check("ws://2130706433", Ok("ws://127.0.0.1"));
    check("wss://10.1/inbox", Ok("wss://10.0.0.1/inbox"));
    check("ws://0x10", Ok("ws://0.0.0.16"));
    check(
        "ws://999.1.1.1",
        Err(invalid("malformed host", "ws://999.1.1.1")),
    );
    check(
        "ws://relay.example.42",
        Err(invalid("malformed host", "ws://relay.example.42")),
    );
    check("wss://relay42.example", Ok("wss://relay42.example"));
}

#[test]
fn one_trailing_dot_of_the_host_is_dropped() {
    check("ws://localhost.:7777", Ok("ws://localhost:7777"));
    check("wss://Relay.Example./", Ok("wss://relay.example"));
    check("ws://127.0.0.1.", Ok("ws://127.0.0.1"));
    check(
        "wss://relay.example..",
        Err(invalid("malformed host", "wss://relay.example..")),
    );
    check("wss://.", Err(invalid("malformed host", "wss://.")));
}

#[test]
fn invalid_punycode_hosts_are_refused() {
    check(
        "wss://xn--mnchen-3ya.example",
        Ok("wss://xn--mnchen-3ya.example"),
    );
    check(
        "wss://xn--zz.example",
        Err(invalid("malformed host", "wss://xn--zz.example")),
    );
}

#[test]
fn path_with_spaces_or_controls_is_refused() {
    let reason = "the path holds a space, a control or a non-ascii character";
    check(
        "wss://relay.example/a b",
        Err(invalid(reason, "wss://relay.example/a b")),
    );
    check(
        "wss://relay.example/\u{0}",
        Err(invalid(reason, "wss://relay.example/\u{0}")),
    );
    check(
        "wss://relay.example/é",
        Err(invalid(reason, "wss://relay.example/é")),
    );
}

#[test]
fn bracketed_ipv6_hosts_work_and_are_canonical() {
    check("wss://[::1]", Ok("wss://[::1]"));
    check("ws://[0:0:0:0:0:0:0:1]:8080/", Ok("ws://[::1]:8080"));
    check(
        "wss://[2001:DB8::A]:443/nostr",
        Ok("wss://[2001:db8::a]/nostr"),
    );
    check(
        "wss://[::1",
        Err(invalid("malformed host or port", "wss://[::1")),
    );
    check(
        "wss://[::1]x",
        Err(invalid("malformed host or port", "wss://[::1]x")),
    );
    check(
        "wss://[not-v6]",
        Err(invalid("malformed host", "wss://[not-v6]")),
    );
    check(
        "wss://[fe80::1%eth0]",
        Err(invalid("malformed host", "wss://[fe80::1%eth0]")),
    );
}

#[test]
fn host_is_the_lowercased_host_with_ipv6_brackets() {
    assert_eq!(
        RelayUrl::parse("wss://Relay.Example:7000/x")
            .unwrap()
            .host(),
        "relay.example"
    );
    assert_eq!(RelayUrl::parse("ws://[::1]:7000").unwrap().host(), "[::1]");
    assert_eq!(RelayUrl::parse("ws://10.0.0.1").unwrap().host(), "10.0.0.1");
}

#[test]
fn length_is_capped() {
    let prefix = "wss://relay.example/";
    let fits = format!("{prefix}{}", "a".repeat(MAX_RELAY_URL_BYTES - prefix.len()));
    assert_eq!(fits.len(), MAX_RELAY_URL_BYTES);
    assert!(RelayUrl::parse(&fits).is_ok());
    let over = format!("{fits}a");
    assert_eq!(
        RelayUrl::parse(&over),
        Err(ModelError::RelayUrlTooLong(MAX_RELAY_URL_BYTES + 1))
    );
}

#[test]
fn equal_relays_compare_equal_after_normalisation() {
    let spellings = [
        "wss://relay.example",
        "WSS://RELAY.EXAMPLE/",
        "wss://relay.example:443",
        "wss://Relay.Example:443/#x",
        " wss://relay.example/? ",
    ];
    let parsed: Vec<RelayUrl> = spellings
        .iter()
        .map(|s| RelayUrl::parse(s).unwrap())
        .collect();
    assert!(
        parsed.windows(2).all(|pair| pair[0] == pair[1]),
        "{parsed:?}"
    );
    let distinct = [
        "ws://relay.example",
        "wss://relay.example:8443",
        "wss://relay.example/x",
    ];
    for other in distinct {
        assert_ne!(parsed[0], RelayUrl::parse(other).unwrap(), "{other}");
    }
}

#[test]
fn display_and_from_str_round_trip() {
    let url: RelayUrl = "wss://Relay.Example:8443/a?b=c".parse().unwrap();
    assert_eq!(url.to_string(), "wss://relay.example:8443/a");
    assert_eq!(url.to_string().parse::<RelayUrl>().unwrap(), url);
    assert!(url.is_secure());
    assert!(!RelayUrl::parse("ws://relay.example").unwrap().is_secure());
}

#[test]
fn long_hostile_input_is_quoted_shortened_in_errors() {
    let input = format!("wss://{}", " x".repeat(200));
    match RelayUrl::parse(&input) {
        Err(ModelError::InvalidRelayUrl { url, .. }) => assert!(url.len() < 100, "{url}"),
        other => panic!("expected InvalidRelayUrl, got {other:?}"),
    }
}
