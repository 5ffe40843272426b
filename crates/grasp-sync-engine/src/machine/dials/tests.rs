//! Dial attempts are handed over in the order decided, each with its number.

use grasp_sync_model::RelayUrl;

use super::{DialRequest, Dials};

#[test]
fn attempts_are_handed_over_in_the_order_decided() {
    let a = RelayUrl::parse("wss://a.example.com").expect("valid url");
    let b = RelayUrl::parse("wss://b.example.com").expect("valid url");
    let mut dials = Dials::default();
    assert_eq!(dials.poll_dial(), None);
    dials.push(b.clone(), 1);
    dials.push(a.clone(), 2);
    dials.push(b.clone(), 3);

    let order: Vec<DialRequest> = std::iter::from_fn(|| dials.poll_dial()).collect();
    assert_eq!(
        order,
        vec![
            DialRequest {
                relay: b.clone(),
                attempt: 1
            },
            DialRequest {
                relay: a,
                attempt: 2
            },
            DialRequest {
                relay: b,
                attempt: 3
            },
        ]
    );
}
