//! Dial attempts are handed over in the order decided, each with its number and purpose.

use super::{Dial, DialPurpose, Dials};

#[test]
fn attempts_are_handed_over_in_the_order_decided() {
    let mut dials = Dials::default();
    assert_eq!(dials.poll_dial(), None);
    let dial = |attempt, purpose| Dial { attempt, purpose };
    dials.push(dial(3, DialPurpose::Session));
    dials.push(dial(1, DialPurpose::LiveOnly));
    dials.push(dial(2, DialPurpose::Session));

    let order: Vec<Dial> = std::iter::from_fn(|| dials.poll_dial()).collect();
    assert_eq!(
        order,
        [
            dial(3, DialPurpose::Session),
            dial(1, DialPurpose::LiveOnly),
            dial(2, DialPurpose::Session)
        ]
    );
    assert_eq!(dials.poll_dial(), None, "each is handed over once");
}
