//! Dial attempts are handed over in the order decided, each with its number.

use super::Dials;

#[test]
fn attempts_are_handed_over_in_the_order_decided() {
    let mut dials = Dials::default();
    assert_eq!(dials.poll_dial(), None);
    dials.push(3);
    dials.push(1);
    dials.push(2);

    let order: Vec<u64> = std::iter::from_fn(|| dials.poll_dial()).collect();
    assert_eq!(order, [3, 1, 2]);
    assert_eq!(dials.poll_dial(), None, "each is handed over once");
}
